"""Every benchmark runs: each ``benchmarks/*.py`` with ``--quick`` (a small run of the same code
path), as a user would start it, from a folder outside the checkout. Nothing else runs them, so
without this a benchmark breaks silently (overhead.py and bench_vs_bare.py failed from their second
round for weeks once ``--record`` refused an existing file). About a minute on 2 cores in all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = sorted(p for p in (Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py")
                    if not p.name.startswith("_"))


def test_the_benchmarks_are_found():
    assert {"overhead", "bench_vs_bare", "startup", "viewer", "large_trace", "alpha_beta_fit"} <= {p.stem for p in BENCHMARKS}


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda path: path.stem)
def test_benchmark_runs_quick_from_outside_the_checkout(script: Path, tmp_path: Path):
    result = subprocess.run([sys.executable, str(script), "--quick"], cwd=tmp_path, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=180)
    assert result.returncode == 0, f"{script.name} --quick exited {result.returncode}:\n{result.stderr[-3000:]}"
    assert result.stdout.strip(), f"{script.name} --quick printed nothing"
