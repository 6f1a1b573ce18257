"""collviz's command line, run as a user runs it (a fresh interpreter) or in this process (fast)."""

from __future__ import annotations

import subprocess
import sys

from collviz.app.cli import main


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``collviz ARGS`` in a fresh interpreter, as a user would; capture text output."""
    return subprocess.run(
        [sys.executable, "-m", "collviz.app.cli", *args],
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )



def run_main(capsys, *args: str) -> tuple[int, str]:
    """Call the CLI's main in this process (fast); a traceback would surface as an exception."""
    status = main(list(args))
    return status, capsys.readouterr().err

