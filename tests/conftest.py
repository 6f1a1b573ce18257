"""Shared fixtures: real multi-rank runs happen once per session and are asserted on many times."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from collviz.runtime.wire.trace import TraceContents, read_trace

COLLECTIVE_SCENARIOS = (
    "broadcast", "reduce", "all-reduce", "gather", "all-gather", "scatter", "reduce-scatter", "all-to-all",
)


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``collviz ARGS`` in a fresh interpreter, as a user would; capture text output."""
    return subprocess.run(
        [sys.executable, "-m", "collviz.app.cli", *args],
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="session")
def traces_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for the traces recorded during this test session."""
    return tmp_path_factory.mktemp("traces")


@pytest.fixture(scope="session")
def collective_traces(traces_dir: Path) -> dict[str, TraceContents]:
    """Each of the eight collective scenarios run once on 4 gloo ranks, recorded, read back."""
    traces = {}
    for name in COLLECTIVE_SCENARIOS:
        path = traces_dir / f"{name}.cvz"
        result = run_cli(name, "--gpus", "4", "--backend", "gloo", "--headless", "--record", str(path))
        assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"
        traces[name] = read_trace(path)
    return traces
