"""An NCCL log in the four shapes that tell wrong from right: ``tests/fixtures/nccl/job-4ranks-two-pairs.log``,
written by hand in NCCL 2.21's line format (no GPU here to capture one). Four ranks on one host; a
world communicator (commId 0x1111…) and two communicators of two ranks each — A (commId 0xaaaa…:
ranks 0 and 1) and B (commId 0xbbbb…: ranks 2 and 3, their local ranks 0 and 1, no rank 0) — and
rank 3 never printing the world's second all_reduce (its peers entered it: the rank the others wait on).

Every expected value below is worked out by hand from the file's lines (float32 is NCCL datatype 7,
4 bytes; opCount N is call #N+1; an all_gather's count is per rank, its output the group's n times
it; a reduce_scatter's count is its output, its input n times it; S as nccl-tests defines it).
"""

from __future__ import annotations

import pytest

from collviz.runtime.reports.summary_json import summary_document
from collviz.runtime.sources import open_artifacts
from collviz.runtime.wire.protocol import RankStart, RunStart

from support.nccl_readings import calls, hops, shape
from support.paths import FIXTURES

LOG = FIXTURES / "nccl" / "job-4ranks-two-pairs.log"
FLOAT32 = 4


@pytest.fixture(scope="module")
def run():
    return open_artifacts([LOG])


def test_four_ranks_each_on_its_own_device_and_nccls_version(run):
    """Rank 0's ``NCCL version 2.21.5+cuda12.4``; each rank's ``cudaDev r … busId (r+1)8000``."""
    assert shape(run) == (4, [0, 1, 2, 3])
    assert run.exit_status == 0 and run.warnings == []
    [start] = [e for e in run.events if isinstance(e, RunStart)]
    assert start.nccl_version == "2.21.5+cuda12.4"
    assert {e.rank: e.device for e in run.events if isinstance(e, RankStart)} == {
        r: f"cuda:{r} (busId {r + 1}8000) on gpu-node-9" for r in range(4)}


def test_each_communicator_keeps_its_global_ranks(run):
    """B's lines say local ranks 0 and 1; they are the job's ranks 2 and 3 (pids 5202, 5203)."""
    document = summary_document(run.events)
    groups = {(c["group"], c["group_seq"]): (c["op"], c["group_ranks"]) for c in document["calls"]}
    assert groups == {("world", 1): ("all_reduce", [0, 1, 2, 3]), ("world", 2): ("all_reduce", [0, 1, 2, 3]),
                      ("nccl comm 1", 1): ("all_gather", [0, 1]), ("nccl comm 2", 1): ("all_gather", [2, 3]),
                      ("nccl comm 2", 2): ("reduce_scatter", [2, 3])}


def test_the_two_pairs_rings_are_drawn_on_their_own_ranks(run):
    """Each pair's ``Ring 00 : 1 -> 0 -> 1`` (local) is global 0 ⇄ 1 for A and 2 ⇄ 3 for B."""
    found = hops(run)
    assert {(s, d) for s, d, _ in found["NCCL ring, channel 00 on nccl comm 1"]} == {(0, 1), (1, 0)}
    assert {(s, d) for s, d, _ in found["NCCL ring, channel 00 on nccl comm 2"]} == {(2, 3), (3, 2)}
    assert {(s, d) for s, d, _ in found["NCCL ring, channel 00 on world"]} == {(0, 1), (1, 2), (2, 3), (3, 0)}


def test_each_ranks_calls_and_sizes(run):
    """(op, call number, elements, bytes in, bytes out) per rank, from each rank's own lines:
    world all_reduce #1: 262,144 × 4 B = 1,048,576 B in and out; #2: 4,096 × 4 = 16,384 B;
    A's all_gather: 1,024 × 4 = 4,096 B in, × 2 ranks = 8,192 out; B's: 2,048 × 4 = 8,192 in,
    16,384 out; B's reduce_scatter: 512 out per rank × 4 B = 2,048 B out; its input 512 × 2 ranks = 1,024 elements,
    4,096 B."""
    world_1 = ("all_reduce", 1, 262_144, 1_048_576, 1_048_576)
    world_2 = ("all_reduce", 2, 4_096, 16_384, 16_384)
    pair_a = ("all_gather", 1, 1_024, 4_096, 8_192)
    pair_b = [("all_gather", 1, 2_048, 8_192, 16_384), ("reduce_scatter", 2, 1_024, 4_096, 2_048)]
    assert {rank: sorted(found) for rank, found in calls(run).items()} == {
        0: sorted([world_1, world_2, pair_a]), 1: sorted([world_1, world_2, pair_a]),
        2: sorted([world_1, world_2, *pair_b]), 3: sorted([world_1, *pair_b])}


def test_the_rank_missing_from_a_call_is_not_counted_in_it(run):
    """Ranks 0, 1 and 2 printed all_reduce #2; rank 3 never did."""
    [second] = [c for c in summary_document(run.events)["calls"] if (c["group"], c["group_seq"]) == ("world", 2)]
    assert sorted(second["bytes_in"]) == [0, 1, 2]


def test_s_of_every_call_and_no_time(run):
    """S by nccl-tests: all_reduce's is its buffer (1,048,576 and 16,384 B), all_gather's its output
    (8,192 on A, 16,384 on B: two equal-size communicators, different figures), reduce_scatter's its
    input (4,096). The log has no clock: no time, so no algbw or busbw."""
    document = summary_document(run.events)
    found = {(c["group"], c["group_seq"]): (c["algo_bytes"], c["seconds"], c.get("algbw"), c.get("busbw"))
             for c in document["calls"]}
    assert found == {("world", 1): (1_048_576, {}, None, None), ("world", 2): (16_384, {}, None, None),
                     ("nccl comm 1", 1): (8_192, {}, None, None), ("nccl comm 2", 1): (16_384, {}, None, None),
                     ("nccl comm 2", 2): (4_096, {}, None, None)}
