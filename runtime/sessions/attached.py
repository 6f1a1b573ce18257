"""A running job attached through its ranks' worker servers, as a session (``collviz attach
TARGET`` in the viewer; ``collviz run`` may feed its viewer the same way from the sockets of its
run folder).

:class:`AttachedSession` is a :class:`~.contract.Session` like a local or remote one: the viewer,
the recorder and export consume it unchanged, and its events pass through an
:class:`~.intake.EventIntake` (counted, fingerprinted, recorded). It reads every rank at the
adaptive pace of :class:`~collviz.runtime.attach.watch.Watcher` (fast while calls move or ranks
wait, slower while the job is steady) and turns each reading into events with
:class:`~collviz.runtime.attach.feed.Feed`. Only reads are sent, each bounded by its timeout; the
job is never signalled. Its own hang reports come from confirmed waits (with the missing ranks'
stack lines), so the intake's watchdog is off.

It ends when no rank answers (the job ended), or, given ``running``, once that says the job is
over (after one last reading); ``stop`` ends it as interrupted and closes the trace, which stays
readable. Outcome ``ok`` or ``interrupted``: the job's own exit status is its launcher's.
"""

from __future__ import annotations

import math
import signal
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..attach.feed import Feed
from ..attach.snapshot import Ask, SnapshotOptions
from ..attach.watch import Pace, Watcher, gone
from ..attach.workers import Worker, ask_all
from ..wire.protocol import AnyEvent
from ..wire.trace import TraceWriter
from .contract import RunOutcome
from .intake import EventIntake, RecordingSession
from .readings import Readings

__all__ = ["AttachedSession"]

ENDED = "no rank's worker server answers any more: the job has ended (its exit status is its launcher's)"
"""The outcome's detail when the job's servers are gone."""


@dataclass
class AttachedSession(RecordingSession):
    """The viewer's end of a job whose ranks serve their Flight Recorders (``workers``).

    ``running``: whether the job is still running (a launcher that knows, like ``collviz run``);
    without it the job is over once no rank answers. ``target``: what the user attached to, for
    the run's description. ``pace``, ``options`` and ``ask``: how readings are paced, bounded and
    sent (:mod:`~collviz.runtime.attach.watch`). A poll waits up to its timeout for the next
    reading to be due; a reading itself takes as long as the slowest rank's answer (each bounded by
    ``options.timeout_s``).

    A launcher whose ranks open their worker servers in its run folder feeds its viewer so::

        workers = [Worker(rank, str(folder / f"rank{rank}.sock")) for rank in range(world_size)]
        session = AttachedSession(workers, record=path, running=lambda: process.poll() is None)

    (a socket not there yet is a rank not answering yet: with ``running`` given, never named for it).
    """

    workers: Sequence[Worker]
    record: Path | None = None
    running: Callable[[], bool] | None = None
    target: str = ""
    pace: Pace = Pace()
    options: SnapshotOptions = SnapshotOptions()
    ask: Ask = ask_all
    step: bool = False
    log_dir: str | None = None
    run_id: str = field(default_factory=lambda: f"attach-{uuid.uuid4().hex[:12]}")
    _intake: EventIntake | None = None
    _reading: _Readers | None = None
    _loop: Readings | None = None

    @property
    def outcome(self) -> RunOutcome | None:
        """How the session ended (None until it has)."""
        return self._loop.outcome if self._loop is not None else None

    @property
    def finished(self) -> bool:
        """True once the job ended (or the session was stopped) and RunEnd was produced."""
        return self.outcome is not None

    def start(self) -> None:
        """Open the trace; the first poll reads at once (once: a started session stays as it is)."""
        if self._intake is not None:
            return
        trace = TraceWriter(self.record) if self.record is not None else None
        intake = self._intake = EventIntake(trace, math.inf, self.run_id)
        self._reading = _Readers(Watcher(self.workers, self.pace, self.options, self.ask),
                                 Feed(intake, self.run_id, self.workers, self.target,
                                      patient=self.running is not None))
        self._loop = Readings(intake, self._read, self._reading.feed.begin)  # a job of no call still has its RunStart

    def poll(self, timeout: float) -> list[AnyEvent]:
        """The events of the readings taken since the last call: reads every rank if a reading
        falls due within ``timeout`` seconds (waiting for it), else waits ``timeout``."""
        if self._loop is None:
            raise RuntimeError("the session has not been started")
        return self._loop.poll(timeout)

    def _read(self) -> float | RunOutcome:
        """One reading and its events: the seconds to the next, or the end when the job is over."""
        assert self._intake is not None and self._reading is not None  # started
        parts = self._reading
        last = self.running is not None and not self.running()
        reading, snapshot = parts.watcher.read(parts.feed.since)
        parts.feed.take(reading, snapshot)
        self._intake.check()  # ranks that called different things at the same place
        if last or (self.running is None and gone(reading)):
            return RunOutcome("ok", ENDED if gone(reading) else "the job has ended", 0)
        return parts.watcher.interval

    def release(self, index: int) -> None:
        """An attached job has no gates (live only)."""

    def stop(self, signum: int = signal.SIGINT) -> None:
        """Stop reading (the job goes on: it is its launcher's) and close the trace; idempotent."""
        if self._loop is not None:
            self._loop.stop(RunOutcome("interrupted", f"interrupted by {signal.Signals(signum).name}: "
                                       "stopped reading the job, which goes on", 128 + signum))


@dataclass(frozen=True)
class _Readers:
    """What a started session reads with: the paced readings and the feed of their events."""

    watcher: Watcher
    feed: Feed
