"""One session's events on their way in, written once for every kind of session.

Each event a session makes or receives passes through :class:`Intake` (:class:`SocketIntake` for a
session whose workers send events on its receiving socket) exactly once: it is
counted, watched for hangs (:mod:`~collviz.runtime.observation.watchdog`), fingerprinted for
collectives whose ranks disagree (:mod:`~collviz.runtime.observation.fingerprints`), appended to
the trace, and queued until the consumer polls. A trace holds each rank's own events only: a
``CallRanks`` (a grouped feed's, live and in memory) is written as its ranks' Phase and Collective
events (:func:`~collviz.runtime.wire.call_ranks.per_rank_events`), made only where a trace is
written, so every reader of a trace reads one format. What a session does besides — following its
processes, deciding when the run is over and why — is its own.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from ..observation.fingerprints import Disagreement, FingerprintCheck
from ..observation.watchdog import CollectiveWatch, Stalled
from ..wire.call_ranks import per_rank_events
from ..wire.protocol import AnyEvent, CallRanks, Dropped, Mismatch, RunEnd, Stall, encode
from ..wire.trace import TraceWriter
from ..wire.transport import Collector, LauncherEmitter
from .contract import RunOutcome

__all__ = ["Intake", "SocketIntake", "TracedSession"]


class Intake:
    """Counts, watches, fingerprints, records and queues every event of one run (a live job's,
    built from its readings, or a run's whose workers send them: :class:`SocketIntake`).

    ``trace`` is the recording (opened by the session), ``timeout_s`` how long a collective may
    wait before the watch reports a hang (``math.inf``: never, for a session that reports its own),
    ``run`` the run the session's own events speak for (None: the run of the first event taken in).
    """

    def __init__(self, trace: TraceWriter | None, timeout_s: float, run: str | None) -> None:
        self.trace = trace
        self._watch = CollectiveWatch(timeout_s)
        self._watching = math.isfinite(timeout_s)
        """Whether the watch follows the events (not where the session reports its own waits: a live
        job's feed; 40,960 events a reading at 1,024 ranks need not be followed for nothing)."""
        self._fingerprints = FingerprintCheck()
        self._emitter = LauncherEmitter(run) if run is not None else None
        self._pending: list[AnyEvent] = []
        self.events_seen = 0
        """Every event taken in so far, received or emitted (a ``CallRanks`` counted as the events
        of its ranks it stands for, as its trace holds them)."""
        self.mismatch: Disagreement | None = None
        """The first collective whose ranks disagreed: the run's cause wherever it was found."""
        self.first_stall: Stalled | None = None
        """The first hang the watch reported: its missing ranks are the run's culprits."""

    def take(self, event: AnyEvent) -> None:
        """Take in an event the session made itself for one of the run's ranks (stamped by it):
        an attached job's calls, or a run's calls read from its ranks' Flight Recorder dumps.
        Encoded only where a trace is written (a 1,024-rank job's reading is 40,000 events); a
        ``CallRanks`` is written as its ranks' events (see the module)."""
        if self.trace is not None and type(event) is CallRanks:
            for each in per_rank_events(event):
                self.trace.append(encode(each))
            self._take(event, None)
        else:
            self._take(event, encode(event) if self.trace is not None else None)

    def emit(self, event_type: type[AnyEvent], **fields: Any) -> None:
        """Take in an event of the session's own (rank ``LAUNCHER_RANK``)."""
        if self._emitter is None:
            raise RuntimeError("no event has arrived yet: the run to speak for is not known")
        event, payload = self._emitter.make(event_type, **fields)
        self._take(event, payload)

    def check(self) -> bool:
        """Emit a Mismatch for each collective found to disagree and a Stall for each hang found
        since the last check; whether a mismatch was found."""
        if self._emitter is None:  # nothing has arrived: nothing to check, nobody to speak for
            return False
        now = time.monotonic_ns()
        found_mismatch = False
        for found in self._fingerprints.check(now):
            self.emit(Mismatch, group=found.group, group_ranks=list(found.group_ranks), group_seq=found.group_seq,
                      calls=found.calls, odd_ranks=found.odd_ranks, text=found.text)
            self.mismatch = self.mismatch or found
            found_mismatch = True
        for stall in self._watch.check(now) if self._watching else ():
            self.first_stall = self.first_stall or stall
            self.emit(Stall, group=stall.group, group_seq=stall.group_seq, op=stall.op, waiting=stall.waiting,
                      elsewhere=list(stall.elsewhere.values()), waited_s=stall.waited_s, text=stall.text)
        return found_mismatch

    def flush(self) -> None:
        """Write the trace's pending records (once per batch: a trace being written stays readable)."""
        if self.trace is not None:
            self.trace.flush()

    def take_pending(self) -> list[AnyEvent]:
        """The events queued since the last call, in the order they were taken in."""
        pending, self._pending = self._pending, []
        return pending

    def close(self, outcome: RunOutcome) -> None:
        """End the run as ``outcome`` says: emit RunEnd (when there is a run to speak for) and close
        the trace."""
        self._end(outcome, {})

    def _end(self, outcome: RunOutcome, dropped: dict[str, int]) -> None:
        if self._emitter is not None:
            if sum(dropped.values()):
                self.emit(Dropped, counts=dropped)
            self.emit(RunEnd, status=outcome.status, detail=outcome.detail, events=self.events_seen + 1,
                      dropped=sum(dropped.values()))
        if self.trace is not None:
            self.trace.close()

    @property
    def recording_error(self) -> str | None:
        """Why the trace stopped before the run's end (a write error), or None."""
        return self.trace.error if self.trace is not None else None

    def _take(self, event: AnyEvent, payload: bytes | None) -> None:
        """Count, watch, fingerprint and queue ``event``; append ``payload`` (its record) to the trace."""
        if self._emitter is None:
            self._emitter = LauncherEmitter(event.run)
        self.events_seen += 2 * (len(event.issued) + len(event.ended)) if type(event) is CallRanks else 1
        if self._watching:
            self._watch.observe(event)
        self._fingerprints.observe(event, time.monotonic_ns())
        if self.trace is not None and payload is not None:
            self.trace.append(payload)
        self._pending.append(event)


class SocketIntake(Intake):
    """An :class:`Intake` whose events arrive, besides, on the session's receiving socket
    (``collector``: its workers')."""

    def __init__(self, collector: Collector, trace: TraceWriter | None, timeout_s: float, run: str | None) -> None:
        super().__init__(trace, timeout_s, run)
        self.collector = collector

    def receive(self, timeout: float, take: bool = True) -> list[AnyEvent]:
        """Take in what the collector has (waiting up to ``timeout`` s for some); those events,
        in arrival order, for the session's own bookkeeping. Unless ``take``, they are only
        returned: messages to the session, not part of the run (the ranks of a run read from
        Flight Recorder say how they ended; their calls come from their dumps, :meth:`take`)."""
        events = []
        for event, payload in self.collector.receive(timeout):
            if take:
                self._take(event, payload)
            events.append(event)
        return events

    def close(self, outcome: RunOutcome) -> None:
        """End the run as ``outcome`` says: emit Dropped (if the collector refused frames) and RunEnd
        (when there is a run to speak for), close the trace and the collector."""
        self._end(outcome, dict(self.collector.dropped))
        self.collector.close()


class TracedSession:
    """The base of a session whose events pass its intake (``_intake``, None until started) into
    the trace at its ``record`` path: what it says of that trace, as :class:`~.contract.Session` asks."""

    record: Path | None
    _intake: Intake | None

    @property
    def record_path(self) -> Path | None:
        """The trace being written, if any."""
        return self.record

    @property
    def recording_error(self) -> str | None:
        """Why the trace stopped before the run's end (a write error), or None."""
        return self._intake.recording_error if self._intake is not None else None
