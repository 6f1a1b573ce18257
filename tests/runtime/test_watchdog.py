"""The hang/desync watch on hand-made event sequences (the live desync run is in test_desync)."""

from __future__ import annotations

import pytest

from collviz.runtime.wire.protocol import Collective, Phase
from collviz.runtime.observation.watchdog import CollectiveWatch

S = 1_000_000_000


def _coll(rank: int, edge: str, op: str, seq: int, t: float) -> Collective:
    return Collective(run="r", rank=rank, seq=0, t_ns=int(t * S), phase=1, edge=edge, op=op, group="world",
                      group_ranks=[0, 1, 2, 3], group_seq=seq, dtype="float32", count=1, bytes_in=4,
                      bytes_out=4, algo_bytes=4)


def test_swapped_collective_is_named():
    watch = CollectiveWatch(timeout_s=5)
    for rank in (0, 1, 3):
        watch.observe(_coll(rank, "begin", "all_reduce", 1, 10))
    watch.observe(_coll(2, "begin", "all_gather", 1, 10))
    assert watch.check(14 * S) == []
    [stall] = watch.check(16 * S)
    assert stall.waiting == [0, 1, 3]
    assert stall.text == "all_reduce #1 on group world: ranks 0, 1, 3 waiting 6 s; rank 2 is in all_gather #1"


def test_missing_rank_is_named_with_its_phase():
    watch = CollectiveWatch(timeout_s=5)
    watch.observe(Phase(run="r", rank=2, seq=0, t_ns=0, index=2, name="sleeping", edge="begin"))
    for rank in (0, 1, 3):
        watch.observe(_coll(rank, "begin", "all_reduce", 7, 10))
    [stall] = watch.check(20 * S)
    assert stall.waiting == [0, 1, 3]
    assert stall.text == ("all_reduce #7 on group world: ranks 0, 1, 3 waiting 10 s; "
                          "rank 2 never arrived (last seen in phase 2 'sleeping')")
    assert watch.check(30 * S) == []  # reported once


def test_rank_in_a_later_collective_is_named():
    watch = CollectiveWatch(timeout_s=1)
    for rank in (0, 1, 2):
        watch.observe(_coll(rank, "begin", "all_reduce", 3, 0))
    watch.observe(_coll(3, "begin", "all_reduce", 3, 0))
    watch.observe(_coll(3, "end", "all_reduce", 3, 0.1))
    watch.observe(_coll(3, "begin", "broadcast", 4, 0.2))
    [stall] = watch.check(5 * S)
    assert "rank 3 is in broadcast #4" in stall.text and stall.waiting == [0, 1, 2]


def test_completed_collectives_never_stall():
    watch = CollectiveWatch(timeout_s=1)
    for rank in range(4):
        watch.observe(_coll(rank, "begin", "all_reduce", 0, 0))
    for rank in range(4):
        watch.observe(_coll(rank, "end", "all_reduce", 0, 0.5))
    assert watch.check(100 * S) == []


def test_check_at_end_reports_without_a_clock_and_names_ranks_without_events():
    """A Flight Recorder import: no wait to measure, and rank 3 left no dump."""
    watch = CollectiveWatch(timeout_s=30)
    watch.unknown(3, "no dump of this rank")
    watch.observe(Phase(run="r", rank=2, seq=0, t_ns=0, index=4, name="all_gather #2", edge="begin"))
    for rank in (0, 1):
        watch.observe(_coll(rank, "begin", "all_reduce", 3, 10))
    [stall] = watch.check_at_end()
    assert stall.waited_s is None and stall.waiting == [0, 1]
    assert stall.text == ("all_reduce #3 on group world: ranks 0, 1 waiting; rank 2 never arrived "
                          "(last seen in phase 4 'all_gather #2'); rank 3: no dump of this rank")
    assert watch.check_at_end() == [] and watch.check(10**12) == []  # reported once


def test_a_rank_never_seen_is_said_so_plainly():
    watch = CollectiveWatch(timeout_s=1)
    for rank in (0, 1, 2):
        watch.observe(_coll(rank, "begin", "all_reduce", 0, 0))
    [stall] = watch.check(5 * S)
    assert stall.elsewhere == {3: "rank 3 never arrived (before its first phase)"}


def test_a_stall_is_reported_once_the_timeout_has_passed_and_not_before():
    watch = CollectiveWatch(timeout_s=5)
    for rank in (0, 1, 2):
        watch.observe(_coll(rank, "begin", "all_reduce", 2, 10))
    assert watch.check(int(14.9 * S)) == []
    stalls = watch.check(int(15.1 * S))
    assert [(s.waiting, s.waited_s) for s in stalls] == [([0, 1, 2], pytest.approx(5.1))]
    assert stalls[0].text == "all_reduce #2 on group world: ranks 0–2 waiting 5 s; rank 3 never arrived (before its first phase)"
