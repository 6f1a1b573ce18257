"""Leave the test process by ``os._exit`` once pytest has reported, with pytest's own exit status.

Tests run torch in this process (gloo groups, its worker server, the handlers collviz registers in
a rank); torch's C++ globals outlive the interpreter and some of them hold Python objects, so the
interpreter's own finalisation can abort after every test passed ("PyThreadState_Get … finalizing",
status 134: seen once on 2026-11-28 after the whole suite had reported). collviz's ranks leave the
same way for the same reason. Everything pytest writes is flushed first; the status is pytest's.
"""

from __future__ import annotations

import os
import sys

import pytest


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """After every report (the terminal summary, the snapshot report) is written: flush, then leave."""
    status = getattr(config, "_collviz_exit_status", None)
    if status is None or os.environ.get("COLLVIZ_TESTS_FINALIZE"):  # set it to see the interpreter's own end
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(status))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Keep the session's exit status for :func:`pytest_unconfigure`."""
    session.config._collviz_exit_status = exitstatus  # type: ignore[attr-defined]
