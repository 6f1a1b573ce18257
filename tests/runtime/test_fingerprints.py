"""The fingerprint check on hand-made calls: who is blamed, when, and what counts as the same call."""

from __future__ import annotations

from collviz.runtime.observation.fingerprints import GRACE_S, FingerprintCheck, disagreements
from collviz.runtime.wire.protocol import Collective

SECOND = 1_000_000_000


def call(rank: int, op: str = "all_reduce", *, seq: int = 0, count: int = 8, t: float = 0.0,
         group: str = "world", ranks=(0, 1, 2, 3), reduce_op: str | None = "sum", root: int | None = None,
         dtype: str = "float32") -> Collective:
    return Collective(run="r", rank=rank, seq=seq, t_ns=int(t * SECOND), phase=1, edge="begin", op=op, group=group,
                      group_ranks=list(ranks), group_seq=seq, dtype=dtype, count=count, bytes_in=4 * count,
                      bytes_out=4 * count, algo_bytes=4 * count, reduce_op=reduce_op, root=root)


def test_agreeing_calls_are_no_mismatch():
    assert disagreements([call(r) for r in range(4)]) == []


def test_the_odd_rank_is_blamed_even_when_it_arrives_first():
    check = FingerprintCheck()
    check.observe(call(2, "reduce_scatter"), 0)
    check.observe(call(3), 1)  # two calls, two opinions: not yet decidable
    assert check.check(2) == []
    check.observe(call(0), 3)
    check.observe(call(1), 4)  # every member has called: decided at once
    [found] = check.check(5)
    assert found.odd_ranks == [2]
    assert found.text == ("collective mismatch at call #0 on group world: rank 2 called reduce_scatter(float32 ×8, sum), "
                          "where ranks 0, 1, 3 called all_reduce(float32 ×8, sum)")
    assert check.check(6) == []  # reported once


def test_a_missing_member_does_not_hold_the_report_back_past_the_grace():
    check = FingerprintCheck()
    check.observe(call(0), 0)
    check.observe(call(1, "all_gather", reduce_op=None), 0)
    assert check.check(int(GRACE_S * SECOND) - 1) == []
    [found] = check.check(int(GRACE_S * SECOND))
    assert found.odd_ranks == [1]  # a tie goes to the party holding the lowest rank


def test_each_field_of_the_fingerprint_matters():
    for different in ({"dtype": "float64"}, {"count": 9}, {"reduce_op": "max"}, {"root": 1}):
        found = disagreements([call(0), call(1, **different), call(2), call(3)])
        assert [f.odd_ranks for f in found] == [[1]], different


def test_uneven_all_to_all_counts_are_legitimate():
    events = [call(r, "all_to_all", count=8 + r, reduce_op=None) for r in range(4)]
    assert disagreements(events) == []


def test_calls_on_different_groups_of_one_name_are_not_compared():
    """Two tp groups both named "tp" ({0,1} and {2,3}) number their calls independently."""
    events = [call(0, group="tp", ranks=(0, 1)), call(1, group="tp", ranks=(0, 1)),
              call(2, "all_gather", group="tp", ranks=(2, 3), reduce_op=None),
              call(3, "all_gather", group="tp", ranks=(2, 3), reduce_op=None)]
    assert disagreements(events) == []
