"""A logical transfer's sender range, where the call fixes it, is checked against the values the
ranks reported: the sender's input over that range is what arrived (all-gather) or, summed over
every rank, what the receiver holds (reduce-scatter, all-reduce)."""

from __future__ import annotations


import msgspec
import pytest

from collviz.app.model import EventLog, view_at
from collviz.app.model.transfer_ends import source_range, step_call
from collviz.runtime.wire.protocol import Buffer, Collective, Transfer
from collviz.runtime.wire.trace import read_trace

from support.paths import FIXTURES


def _values(events, name: str, moment: str) -> dict[int, list[float]]:
    return {e.rank: list(e.values) for e in events if isinstance(e, Buffer) and e.name == name and e.moment == moment}


def _call_and_transfers(name: str) -> tuple[list, Collective, list[Transfer]]:
    events = read_trace(FIXTURES / f"{name}.cvz").events
    log = EventLog(events)
    transfers = [e for e in events if isinstance(e, Transfer)]
    step = transfers[0].phase
    view = view_at(log, log.step_ends[step])
    call = step_call([rank.collective for rank in view.ranks], step)
    assert call is not None
    return events, call, transfers


def test_an_all_gather_sender_sends_its_whole_input_to_its_place():
    events, call, transfers = _call_and_transfers("all-gather")
    shards, gathered = _values(events, "W_query_shard", "before"), _values(events, "gathered", "after")
    for t in transfers:
        start, stop = source_range(t, call)
        assert (start, stop) == (0, len(shards[t.src]))
        assert shards[t.src][start:stop] == gathered[t.dst][t.start:t.start + t.length]


@pytest.mark.parametrize(("name", "before", "after"), [("reduce-scatter", "grad", "reduced_shard"),
                                                        ("all-reduce", "grad", "grad")])
def test_a_reduction_s_sender_ranges_summed_over_the_ranks_give_what_arrived(name, before, after):
    events, call, transfers = _call_and_transfers(name)
    inputs, outputs = _values(events, before, "before"), _values(events, after, "after")
    for dst in outputs:
        into = [t for t in transfers if t.dst == dst]
        ranges = {source_range(t, call) for t in into}
        assert len(into) == len(inputs) - 1 and len(ranges) == 1  # every other rank sent the same part
        [(start, stop)] = ranges
        over = len(inputs) if call.reduce_op == "avg" else 1  # the all-reduce fixture averages gradients
        total = [sum(inputs[rank][i] for rank in inputs) / over for i in range(start, stop)]
        got = outputs[dst][into[0].start:into[0].start + into[0].length]
        assert got == pytest.approx(total, rel=1e-6)


def test_unknown_where_the_call_does_not_fix_it():
    events, call, transfers = _call_and_transfers("all-gather")
    t = transfers[0]
    assert source_range(msgspec.structs.replace(t, kind="p2p"), call) is None  # a hop: the sender's range unsaid
    assert source_range(t, msgspec.structs.replace(call, op="all_to_all")) is None  # splits not in the call
    assert source_range(msgspec.structs.replace(t, start=t.start + 1), call) is None  # would leave the input
    outside = next(t for t in transfers if t.dst == 3)
    assert source_range(outside, msgspec.structs.replace(call, group_ranks=[0, 1, 2])) is None  # not in the group
    other = msgspec.structs.replace(call, op="all_reduce", count=1)
    assert step_call([call, other], call.phase) is None  # the ranks' latest calls differ: which moved what?
    assert step_call([call, None], call.phase + 1) is None  # not this step's
    assert step_call([msgspec.structs.replace(call, edge="begin")], call.phase) is None  # not ended


def test_a_subgroups_ranks_are_placed_by_their_order_in_the_group_call_after_call():
    """On a subgroup whose ranks are neither 0–3 nor in order, a sender's range follows its place
    in the group, not its number; two calls on two groups asked about in turn each keep theirs.
    Worked by hand: group [4, 6, 1, 3], 2 elements a rank. An all-gather's rank 1 (place 2) lands
    its whole input at [4:6) on every rank; a reduce-scatter of 8 elements gives rank 1 (place 2)
    chunk [4:6) of every sender's input."""
    common = dict(run="r", phase=0, edge="end", group="sub", group_seq=1, dtype="float32", bytes_in=8,
                  bytes_out=32, algo_bytes=32, seq=1, t_ns=1)
    gather = Collective(rank=4, op="all_gather", count=2, group_ranks=[4, 6, 1, 3], **common)
    scatter = Collective(rank=4, op="reduce_scatter", count=8, group_ranks=[4, 6, 1, 3], **common)
    other = Collective(rank=0, op="all_gather", count=2, group_ranks=[1, 0], **common)

    def moved(src: int, dst: int, start: int, length: int) -> Transfer:
        return Transfer(run="r", rank=dst, seq=2, t_ns=2, phase=0, src=src, dst=dst, bytes=4 * length, buffer="out",
                        start=start, length=length, kind="logical")

    for _ in range(2):  # the groups alternate: each call's places are its own
        assert source_range(moved(1, 3, 4, 2), gather) == (0, 2)
        assert source_range(moved(1, 3, 5, 1), gather) == (1, 2)
        assert source_range(moved(1, 3, 2, 2), gather) is None  # [2:4) is rank 6's place: rank 1's input is 2 long
        assert source_range(moved(6, 1, 0, 2), scatter) == (4, 6)
        assert source_range(moved(3, 6, 0, 2), scatter) == (2, 4)
        assert source_range(moved(1, 0, 0, 2), other) == (0, 2)
        assert source_range(moved(0, 1, 2, 2), other) == (0, 2)
        assert source_range(moved(5, 1, 0, 2), scatter) is None  # rank 5 is not in the group
