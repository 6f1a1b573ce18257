"""A bench row (runtime/reports/bench_table.py) from one phase's calls, ranks timed differently: its
time is the slowest rank's median, and algbw/busbw follow with the nccl-tests factor — by hand here."""

from __future__ import annotations

import pytest

from collviz.runtime.reports.bench_table import bench_row
from collviz.runtime.wire.protocol import Collective

TIMES_US = {0: (30, 10, 20), 1: (50, 70, 60), 2: (90, 40, 45), 3: (5, 6, 7)}
"""Each rank's three timed calls, µs: medians 20, 60, 45, 6 — rank 1 is the slowest."""
SIZE = 4096  # bytes of float32 all-reduced


def _calls() -> list[Collective]:
    return [Collective(run="r", rank=rank, seq=i, t_ns=1_000_000 * (i + 1), phase=3, edge="end", op="all_reduce",
                       group="world", group_ranks=[0, 1, 2, 3], group_seq=i, dtype="float32", count=SIZE // 4,
                       bytes_in=SIZE, bytes_out=SIZE, algo_bytes=SIZE, duration_ns=us * 1000, iteration=i)
            for rank, times in TIMES_US.items() for i, us in enumerate(times)]


def test_a_row_is_timed_by_the_slowest_ranks_median():
    row = bench_row(_calls(), world_size=4)
    assert (row.op, row.size, row.count, row.iters) == ("all_reduce", SIZE, SIZE // 4, 3)
    assert row.time_us == pytest.approx(60)
    algbw = SIZE / 60e-6
    assert row.algbw_gbps == pytest.approx(algbw / 1e9)
    assert row.busbw_gbps == pytest.approx(algbw * 2 * 3 / 4 / 1e9)  # 2(n−1)/n at n = 4
