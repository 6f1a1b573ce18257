"""A running job read live, as a session: ``collviz attach`` in the viewer (its ranks' worker
servers, or by pid their stacks) and ``collviz replay --follow`` (a folder of NCCL Inspector
files) — one session over any :class:`~collviz.runtime.live.reading.Reader`.

:class:`LiveSession` is a :class:`~.contract.Session` like a local or remote one: the viewer, the
trace writer and export consume it unchanged, and its events pass through an
:class:`~.intake.Intake` (counted, fingerprinted, written to the trace). It steps the one live
loop (:class:`~collviz.runtime.live.loop.LiveLoop`): a poll waits for the next reading to fall due
(or returns after its timeout), takes it, and hands out what it passed on. Only reads are made,
each bounded by its deadline; the job is never signalled. Its hang reports come from confirmed
waits (with the missing ranks' stack lines), so the intake's own hang watch is off.

It ends when the reader says the job is over (no rank answers; an Inspector folder idle), or,
given ``running``, once that says the job is over (after one last reading); ``stop`` ends it as
interrupted and closes the trace, which stays readable. The RunEnd's detail says how the job
ended (``failed``, naming the wait, where ranks were waiting at the last reading any rank answered:
:func:`~collviz.runtime.live.loop.how_it_ended`) — and stays the last event, so the viewer keeps the
step the user was on and says so.
"""

from __future__ import annotations

import math
import signal
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..live.feed import Feed
from ..live.inspector_reader import InspectorReader
from ..live.loop import LiveLoop, how_it_ended
from ..live.pace import Pace
from ..live.pid_reader import PidReader
from ..live.reading import End, Reader
from ..live.reading_cost import ReadingCost
from ..live.recorder_reader import RecorderReader
from ..live.workers import Worker
from ..wire.protocol import IMPORT_RUN_PREFIX, AnyEvent
from ..wire.trace import TraceWriter
from .contract import RunOutcome
from .intake import Intake, TracedSession

__all__ = ["LiveSession", "NextReading", "attached_reader_session", "attached_session", "followed_session", "pid_session"]


@dataclass(frozen=True)
class NextReading:
    """When a live session's next reading is due (``at``, on :func:`time.monotonic`'s clock), and
    whether the ranks' CPU budget holds it back (``held``: a steady job is read only as often as
    each rank's own CPU pays for it at 0.4 %)."""

    at: float
    held: bool


@dataclass
class LiveSession(TracedSession):
    """The viewer's end of a job read by ``reader``.

    ``running``: whether the job is still running (a launcher that knows); without it the job is
    over when the reader says so. ``pace``: how readings are paced, held back by ``cost`` where it
    measures the ranks (:mod:`~collviz.runtime.live.reading_cost`). ``patient``: a rank that never
    answered is not named (a job that is starting). ``closes_ranks``: each rank gets its RankEnd
    (ok) at the end, for a source that says nothing of ranks ending (an Inspector folder).
    """

    reader: Reader
    record: Path | None = None
    running: Callable[[], bool] | None = None
    pace: Pace = Pace()
    cost: ReadingCost | None = None
    patient: bool = False
    closes_ranks: bool = False
    names_silent: bool = True
    grouped: bool = False
    """Whether each call's news is one event per reading (:attr:`~collviz.runtime.live.feed.Feed.grouped`)."""
    step: bool = False
    log_dir: str | None = None
    run_id: str = field(default_factory=lambda: f"live-{uuid.uuid4().hex[:12]}")
    outcome: RunOutcome | None = None
    """How the session ended (None until it has)."""
    next_reading: NextReading | None = None
    """When the next reading is due, as of the last poll (None: before the first, or once ended)."""
    _intake: Intake | None = None
    _loop: LiveLoop | None = None
    _next_noted_at: float = -math.inf
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def finished(self) -> bool:
        """True once the job ended (or the session was stopped) and RunEnd was produced."""
        return self.outcome is not None

    def start(self) -> None:
        """Open the trace; the first poll reads at once (once: a started session stays as it is)."""
        if self._intake is not None:
            return
        trace = TraceWriter(self.record) if self.record is not None else None
        intake = self._intake = Intake(trace, math.inf, self.run_id)
        feed = Feed(intake, self.run_id, self.reader, patient=self.patient or self.running is not None,
                    names_silent=self.names_silent, grouped=self.grouped)
        self._loop = LiveLoop(self.reader, feed, self.pace, cost=self.cost)

    def poll(self, timeout: float) -> list[AnyEvent]:
        """The events of the readings taken since the last call: reads if a reading falls due
        within ``timeout`` seconds (waiting for it), else waits ``timeout``."""
        if self._intake is None or self._loop is None:
            raise RuntimeError("the session has not been started")
        if self.outcome is None:
            with self._lock:
                last = self.running is not None and not self.running()
                reading = self._loop.step() if last else self._loop.wait_and_step(timeout)
                if reading is not None and self.outcome is None:
                    self._intake.check()  # ranks that called different things at the same place
                    end = self.reader.ended(reading) if self.running is None else None  # a launcher knows better
                    if last or end is not None:
                        self._end(_outcome(how_it_ended(end or End("ok", "the job has ended"), self._loop.waiting)))
                    else:
                        self._intake.flush()
                self._note_next_reading(reading is not None)
        return self._intake.take_pending()

    def _note_next_reading(self, read: bool) -> None:
        """:attr:`next_reading`, after a reading or once a second (the meter reads each rank's
        threads from /proc: not at every poll)."""
        assert self._loop is not None
        now = time.monotonic()
        if self.outcome is not None:
            self.next_reading = None
        elif read or now - self._next_noted_at >= 1.0:
            held = self._loop.held_s()
            self.next_reading = NextReading(now + self._loop.next_in(), held > 0)
            self._next_noted_at = now

    def release(self, index: int) -> None:
        """A live job has no gates."""

    def stop(self, signum: int = signal.SIGINT) -> None:
        """Stop reading (the job goes on: it is its launcher's) and close the trace; idempotent;
        a reading under way is left to its deadline."""
        if self._loop is not None:
            self._loop.interrupt()
        with self._lock:
            if self._intake is not None and self.outcome is None:
                self._end(RunOutcome("interrupted", f"interrupted by {signal.Signals(signum).name}: "
                                     "stopped reading the job, which goes on", 128 + signum))

    def _end(self, outcome: RunOutcome) -> None:
        assert self._intake is not None and self._loop is not None
        self._loop.feed.begin()  # a job of no call still has its RunStart
        if self.closes_ranks:
            self._loop.feed.close()
        self._intake.close(outcome)
        self.outcome = outcome


def _outcome(end: End) -> RunOutcome:
    """The session's outcome for a source's end."""
    return RunOutcome(end.status, end.detail, 0 if end.status == "ok" else 1)


def attached_session(workers: Sequence[Worker], *, record: Path | None = None, target: str = "", pace: Pace = Pace(),
                     timeout_s: float = 2.0, running: Callable[[], bool] | None = None) -> LiveSession:
    """A session on the job whose ranks serve their Flight Recorders at ``workers`` (``collviz
    attach``): each request within ``timeout_s``, the ranks on this host measured so that readings
    keep under their share of the ranks' CPU; ``running`` see :class:`LiveSession`."""
    return attached_reader_session(RecorderReader(workers, timeout_s, target=target), record=record, pace=pace,
                                   running=running, cost=ReadingCost.of(workers))


def attached_reader_session(reader: Reader, *, record: Path | None = None, pace: Pace = Pace(),
                            running: Callable[[], bool] | None = None, cost: ReadingCost | None = None,
                            grouped: bool = False) -> LiveSession:
    """A session on a running job as ``reader`` reads it (its worker servers, its relays: ``collviz
    attach``), its readings held back by ``cost`` where it measures the ranks; ``running`` and
    ``grouped`` see :class:`LiveSession`."""
    return LiveSession(reader, record=record, running=running, pace=pace, cost=cost, grouped=grouped,
                       run_id=f"attach-{uuid.uuid4().hex[:12]}")


def pid_session(reader: PidReader, *, record: Path | None = None, pace: Pace = Pace()) -> LiveSession:
    """A session on the job whose ranks' stacks ``reader`` reads by pid (``collviz attach --pid``)."""
    return LiveSession(reader, record=record, pace=pace, run_id=f"attach-{uuid.uuid4().hex[:12]}")


def followed_session(folder: Path, *, record: Path | None = None, idle_s: float = 60.0, every_s: float = 0.5,
                     announce: Callable[[str], None] | None = None) -> LiveSession:
    """A session on the NCCL Inspector ``folder`` a job is writing (``collviz replay --follow``),
    read every ``every_s``, over once it has not grown for ``idle_s``; ``announce`` is told each
    new step in one line. Its run id is an import's: the artifact holds no memory or values."""
    reader = InspectorReader(folder, idle_s=idle_s, announce=announce)
    return LiveSession(reader, record=record, pace=Pace(every_s, every_s), names_silent=False, closes_ranks=True,
                       run_id=f"{IMPORT_RUN_PREFIX}nccl-inspector-follow-{uuid.uuid4().hex[:12]}")
