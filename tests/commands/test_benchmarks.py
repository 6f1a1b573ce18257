"""Every benchmark runs: each ``benchmarks/*.py`` with ``--quick`` (a small run of the same code
path), as a user would start it, from a folder outside the checkout. Nothing else runs them, so
without this a benchmark breaks silently (overhead.py and bench_vs_bare.py failed from their second
round for weeks once ``--record`` refused an existing file). About a minute on 2 cores in all: marked
``slow`` (``pytest -m "not slow"`` leaves them out of a quick local loop; CI runs them)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import ROOT

BENCHMARKS = sorted(p for p in (ROOT / "benchmarks").glob("*.py")
                    if not p.name.startswith("_") and p.stem != "gpu_check")
"""Every benchmark but gpu_check, whose ``--quick`` runs in test_gpu_check.py (into a given OUT)."""


def test_the_benchmarks_are_found():
    assert {"overhead", "bench_vs_bare", "startup", "viewer", "large_trace", "alpha_beta_fit", "run_overhead"} <= \
        {p.stem for p in BENCHMARKS}


@pytest.mark.slow
@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda path: path.stem)
def test_benchmark_runs_quick_from_outside_the_checkout(script: Path, tmp_path: Path):
    result = subprocess.run([sys.executable, str(script), "--quick"], cwd=tmp_path, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=180)
    assert result.returncode == 0, f"{script.name} --quick exited {result.returncode}:\n{result.stderr[-3000:]}"
    assert result.stdout.strip(), f"{script.name} --quick printed nothing"


RUNNING_NUMBER = re.compile(r"\bsessions? \d+\b", re.I)
"""A measurement labelled by running session numbers, one or several ("session 10", "sessions 4, 5")."""

DOCUMENTS = [ROOT / "README.md", ROOT / "BENCHMARKS.md", ROOT / "CHANGELOG.md", ROOT / "RELIABILITY.md",
             *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_measured_section_is_placed_by_date_and_commit():
    """A reader can place a measurement by its date and the commit that recorded it; a running
    session number ("Session 10", "sessions 4, 5 and 7") places it nowhere."""
    headings = [line for line in (ROOT / "BENCHMARKS.md").read_text().splitlines() if line.startswith("## ")]
    assert headings
    unplaced = [h for h in headings if not re.search(r"\d{4}-\d{2}-\d{2}, recorded in [0-9a-f]{7,40}\)$", h)]
    assert not unplaced, unplaced
    numbered = [f"{path.name}:{n}" for path in DOCUMENTS
                for n, line in enumerate(path.read_text().splitlines(), 1) if re.search(RUNNING_NUMBER, line)]
    assert not numbered, numbered


@pytest.mark.parametrize("line, numbered", [("(session 10)", True), ("(sessions 4, 5 and 7, 2026-11-22)", True),
                                            ("Session 3 measured", True), ("a session 2x faster", False),
                                            ("(2026-11-22, recorded in 41cb7d3)", False)])
def test_a_running_session_number_is_caught_in_the_singular_and_the_plural(line, numbered):
    assert bool(RUNNING_NUMBER.search(line)) is numbered
