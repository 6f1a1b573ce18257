"""Scenario runs recorded once per test session and shared by every module that reads them.

Several rooms read the same plain run (all-gather on 4 gloo ranks: its collective's values, its
export, its teaching check on screen; tp and moe: their training checks and their memory): each
run is a few seconds of four worker processes, so the session fixture ``scenario_runs``
(tests/conftest.py) launches each command line once, the first time a test asks for it, and hands
every later test the same trace and output.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from support.cli import run_cli

__all__ = ["RANKS", "Recorded", "ScenarioRuns"]

RANKS = 4
"""The world a run gets unless its options name one (``--gpus``)."""


@dataclass(frozen=True)
class Recorded:
    """One run, as it ended with exit status 0: its trace file and what it printed."""

    path: Path
    stdout: str


class ScenarioRuns:
    """``collviz NAME OPTIONS --backend gloo --headless --record PATH`` on :data:`RANKS` ranks (or
    the ``--gpus`` the options give), each distinct command line run once and remembered."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._done: dict[tuple[str, ...], Recorded] = {}
        self._launched = 0

    def __call__(self, name: str, *options: str, timeout: float = 240) -> Recorded:
        """The run of ``name`` with ``options``, launched now if this session has not yet; a run
        ending with another status fails the asking test with its output (and is tried again by
        the next test that asks)."""
        key = (name, *options)
        if key not in self._done:
            world = [] if "--gpus" in options else ["--gpus", str(RANKS)]
            self._launched += 1  # a new file each launch: a failed run's partial trace is never recorded over
            path = self._folder / f"{self._launched}-{name}.cvz"
            result = run_cli(name, *options, *world, "--backend", "gloo", "--headless", "--record", str(path),
                             timeout=timeout)
            assert result.returncode == 0, f"{' '.join(key)} failed:\n{result.stdout[-3000:]}\n{result.stderr}"
            self._done[key] = Recorded(path, result.stdout)
        return self._done[key]
