"""The intake every session's events pass through (``runtime/sessions/intake.py``): each event,
received or the session's own, is counted, recorded and queued once, in arrival order; the run's
end is stamped with the run of the events and counts them all."""

from __future__ import annotations

import collections

import pytest

from collviz.runtime.sessions.contract import RunOutcome
from collviz.runtime.sessions.intake import SocketIntake
from collviz.runtime.wire.protocol import LAUNCHER_RANK, Dropped, Go, Phase, RankEnd, RunEnd, encode


class FakeCollector:
    """Hands out prepared batches of (event, payload), one per ``receive``; counts refusals."""

    def __init__(self, *batches):
        self.batches = list(batches)
        self.dropped: collections.Counter[str] = collections.Counter()
        self.closed = False

    def receive(self, timeout_s):
        return [(event, encode(event)) for event in self.batches.pop(0)] if self.batches else []

    def close(self):
        self.closed = True


class FakeTrace:
    """Keeps every payload appended; says whether it was closed."""

    error = None

    def __init__(self):
        self.payloads: list[bytes] = []
        self.closed = False

    def append(self, payload):
        self.payloads.append(payload)

    def flush(self):
        pass

    def close(self):
        self.closed = True


def _phase(rank, seq, run="job-7"):
    return Phase(run=run, rank=rank, seq=seq, t_ns=1_000 + seq, index=0, name="setup", edge="begin")


def test_received_and_own_events_are_counted_recorded_and_queued_once_in_order():
    first = [_phase(0, 0), _phase(1, 0)]
    second = [RankEnd(run="job-7", rank=0, seq=1, t_ns=2_000, status="ok")]
    collector, trace = FakeCollector(first, second), FakeTrace()
    intake = SocketIntake(collector, trace, timeout_s=30.0, run=None)
    assert intake.receive(0) == first
    intake.emit(Go, index=0)
    assert intake.receive(0) == second
    queued = intake.take_pending()
    assert [type(e).__name__ for e in queued] == ["Phase", "Phase", "Go", "RankEnd"]
    assert intake.take_pending() == []  # taken once
    assert trace.payloads == [encode(e) for e in queued]
    assert intake.events_seen == 4


def test_a_listening_intake_speaks_for_the_run_of_the_first_event_it_received():
    intake = SocketIntake(FakeCollector([_phase(0, 0, run="torchrun-abc")]), None, timeout_s=30.0, run=None)
    with pytest.raises(RuntimeError, match="no event has arrived yet"):
        intake.emit(Go, index=0)
    assert intake.check() is False  # nothing to check, nobody to speak for
    intake.receive(0)
    intake.emit(Go, index=0)
    go = intake.take_pending()[-1]
    assert (go.run, go.rank, go.seq) == ("torchrun-abc", LAUNCHER_RANK, 0)


def test_closing_says_what_was_dropped_and_ends_the_run_counting_every_event():
    collector, trace = FakeCollector([_phase(0, 0), _phase(1, 0)]), FakeTrace()
    collector.dropped.update({"unauthenticated": 2, "malformed": 1})
    intake = SocketIntake(collector, trace, timeout_s=30.0, run="local-1")
    intake.receive(0)
    intake.close(RunOutcome("failed", "rank 1 failed: boom", 1))
    dropped, end = intake.take_pending()[2:]
    assert isinstance(dropped, Dropped) and dropped.counts == {"unauthenticated": 2, "malformed": 1}
    assert isinstance(end, RunEnd)
    # 2 received + Dropped + RunEnd itself; 2 + 1 frames refused
    assert (end.run, end.status, end.detail) == ("local-1", "failed", "rank 1 failed: boom")
    assert (end.events, end.dropped) == (4, 3)
    assert collector.closed and trace.closed
