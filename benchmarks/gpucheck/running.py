"""Child processes run against a deadline, their output appended to a check's log.

Each child starts in a process session of its own, so a run past its deadline is stopped with
everything it started (collviz's ranks, torchrun's workers): SIGINT first (collviz's Ctrl-C: it
tears its ranks down), SIGKILL to the whole group :data:`GRACE_S` later.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Deadline", "Ran", "TimedOut", "run", "spawn", "stop", "wait", "tail"]

GRACE_S = 10.0
"""How long a stopped run has to end after SIGINT before its process group is killed."""


@dataclass(frozen=True)
class Deadline:
    """A moment on the monotonic clock that a check's runs must end by."""

    end: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        """The deadline ``seconds`` from now."""
        return cls(time.monotonic() + seconds)

    def left(self) -> float:
        """Seconds left until the deadline (0 once it passed)."""
        return max(0.0, self.end - time.monotonic())

    def sooner(self, seconds: float) -> Deadline:
        """This deadline, or the one ``seconds`` from now if that comes first."""
        return Deadline(min(self.end, time.monotonic() + seconds))


class TimedOut(Exception):
    """A run was still going at its check's deadline (and was stopped); ``lines``: what the check
    could still say for the report (e.g. which tests ended before it)."""

    def __init__(self, what: str, lines: Sequence[str] = ()):
        super().__init__(what)
        self.lines = list(lines)


@dataclass(frozen=True)
class Ran:
    """A finished run: its exit status and its output (stdout and stderr, as they interleaved)."""

    code: int
    output: str


def _header(log: Path, command: Sequence[str | Path]) -> int:
    """Write the command line into the log; the log's size after it (where the run's output starts)."""
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(str(part) for part in command)}\n")
    return log.stat().st_size


def spawn(command: Sequence[str | Path], log: Path, env: Mapping[str, str], cwd: Path | None = None) -> subprocess.Popen:
    """Start ``command`` in a session of its own, its output appended to ``log``."""
    _header(log, command)
    with log.open("a") as out:
        return subprocess.Popen([str(part) for part in command], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=dict(env), cwd=cwd, start_new_session=True)


def stop(process: subprocess.Popen) -> None:
    """End ``process`` and everything it started: SIGINT, then SIGKILL to its group."""
    if process.poll() is None:
        _signal(process, signal.SIGINT)
        try:
            process.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    _signal(process, signal.SIGKILL)  # what it left behind in its group, if anything
    process.wait()


def _signal(process: subprocess.Popen, number: int) -> None:
    try:
        os.killpg(process.pid, number)
    except ProcessLookupError:
        pass


def wait(process: subprocess.Popen, deadline: Deadline, what: str) -> int:
    """``process``'s exit status; stopped, and :class:`TimedOut` raised, if it outlives ``deadline``."""
    try:
        return process.wait(timeout=deadline.left())
    except subprocess.TimeoutExpired:
        stop(process)
        raise TimedOut(what) from None


def run(command: Sequence[str | Path], log: Path, deadline: Deadline, env: Mapping[str, str],
        cwd: Path | None = None) -> Ran:
    """Run ``command`` to its end or ``deadline``; its output is in ``log`` and in the result."""
    start = _header(log, command)
    with log.open("a") as out:
        process = subprocess.Popen([str(part) for part in command], stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=dict(env), cwd=cwd, start_new_session=True)
    code = wait(process, deadline, " ".join(str(part) for part in command[1:4]))
    with log.open("rb") as read:
        read.seek(start)
        return Ran(code, read.read().decode(errors="replace"))


def tail(text: str, lines: int = 25) -> list[str]:
    """The last ``lines`` lines of ``text`` as a fenced markdown block."""
    return ["```", *text.rstrip().splitlines()[-lines:], "```"]
