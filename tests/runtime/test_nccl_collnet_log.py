"""A real CollNet (SHARP) job's NCCL log (``tests/fixtures/nccl/collnet/``, its source and hand
reading in that folder's README), opened as collviz runs: every expected value was worked out by
hand from the file's lines, not from the reader."""

from __future__ import annotations

from collviz.runtime.sources import open_artifacts
from collviz.runtime.wire.protocol import RankStart, RunEnd

from support.nccl_readings import hops, shape, tree
from support.paths import FIXTURES

LOG = FIXTURES / "nccl" / "collnet" / "nccl-tests-311-collnet-sharp-hang.log"


def test_a_collnet_sharp_job_of_four_nodes_reads_as_worked_by_hand():
    """nccl-tests#311: 8 ranks, 2 GPUs on each of gpu34, gpu36, gpu40, gpu41 (Init START lines give
    cudaDev and busId), ring 0 1 2 … 7 on channels 00–02, two tree shapes (channels 00 and 02 alike),
    four CollNet receive lines, and four ``sharp_plugin.c:382 NCCL WARN`` lines — the first printed
    by pid 15433 (rank 2, gpu36), then 2899 (rank 4), 63046 (rank 6), 23654 (rank 0)."""
    run = open_artifacts([LOG])
    assert shape(run) == (8, list(range(8)))
    assert {e.rank: e.device for e in run.events if isinstance(e, RankStart)} == {
        0: "cuda:0 (busId 7000) on gpu34", 1: "cuda:1 (busId b000) on gpu34",
        2: "cuda:0 (busId 88000) on gpu36", 3: "cuda:1 (busId cb000) on gpu36",
        4: "cuda:0 (busId 4c000) on gpu40", 5: "cuda:1 (busId 88000) on gpu40",
        6: "cuda:0 (busId 7000) on gpu41", 7: "cuda:1 (busId 88000) on gpu41"}
    found = hops(run)
    assert found["NCCL ring, channels 00, 01, 02 on world"] == {(r, (r + 1) % 8, 1) for r in range(8)}
    # child → parent, from each rank's "Trees [c] down/…->rank->up" entries
    assert found["NCCL tree, channels 00, 02 on world"] == tree({1: 0, 4: 0, 5: 4, 6: 4, 2: 5, 3: 2, 7: 6})
    assert found["NCCL tree, channel 01 on world"] == tree({0: 2, 1: 0, 2: 6, 3: 2, 4: 3, 5: 4, 7: 6})
    assert run.warnings == ["the log has no per-call lines (NCCL_DEBUG_SUBSYS=COLL,TUNING prints them): topology only"]
    assert run.exit_status == 1
    [end] = [e for e in run.events if isinstance(e, RunEnd)]
    assert end.detail == ("NCCL WARN SHARP int8,uint8,bfloat16 Datatypes not supported (sharp_plugin.c:382) on rank 2 "
                          "(gpu36) — a notice NCCL goes on after, but no call follows it in the log (and 3 more "
                          "WARN/ERROR lines, on ranks 0, 4, 6 too)")
