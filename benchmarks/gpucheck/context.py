"""What a check is given (:class:`Context`) and what describes one (:class:`Check`)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .report import Finding
from .running import Deadline, Ran, run, spawn, stop, wait

__all__ = ["ROOT", "Check", "Context", "free_port"]

ROOT = Path(__file__).resolve().parents[2]
"""The checkout."""


@dataclass(frozen=True)
class Context:
    """One check's run: the backend to use (nccl with CUDA, else gloo), whether ``--quick``, a
    folder of its own, its log, its deadline and the environment its processes get."""

    backend: str
    quick: bool
    work: Path
    log: Path
    deadline: Deadline
    env: Mapping[str, str]

    @property
    def ranks(self) -> int:
        """Ranks of the multi-rank checks: 4 (2 with ``--quick``)."""
        return 2 if self.quick else 4

    def python(self, *args: str | Path, cwd: Path | None = None) -> Ran:
        """``python ARGS`` (this interpreter), to its end or the deadline."""
        return run([sys.executable, *map(str, args)], self.log, self.deadline, self.env, cwd=cwd or self.work)

    def collviz(self, *args: str | Path) -> Ran:
        """``collviz ARGS``, to its end or the deadline."""
        return self.python("-m", "collviz.app.cli", *args)

    def run_ranks(self, what: str, world: int, command: Callable[[int], Sequence[str | Path]]) -> list[int]:
        """Run ``world`` ranks at once in the work folder, rank r as ``command(r)``: their exit
        statuses, or (every rank stopped) :class:`~.running.TimedOut` naming ``what`` rank R."""
        started = [spawn(command(rank), self.log, self.env, cwd=self.work) for rank in range(world)]
        try:
            return [wait(process, self.deadline, f"{what} rank {rank}") for rank, process in enumerate(started)]
        finally:
            for process in started:
                stop(process)


@dataclass(frozen=True)
class Check:
    """One check: its log's name, title, time budget (seconds), the modules it imports or starts,
    and what it does."""

    key: str
    title: str
    budget_s: float
    needs: tuple[str, ...]
    body: Callable[[Context], Finding]


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
