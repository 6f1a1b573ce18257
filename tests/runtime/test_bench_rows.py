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


def test_every_line_of_the_table_but_its_rows_starts_with_a_hash_as_in_nccl_tests():
    """nccl-tests' tables: its preamble, column titles and closing lines start with ``#``, so
    ``grep -v '^#'`` keeps the rows; the titles give their first space to the ``#`` and stay aligned."""
    from collviz.runtime.reports.bench_table import BenchReport, render_table

    row = bench_row(_calls(), world_size=4)
    report = BenchReport(world_size=4, backend="gloo", backend_reason="gloo on CPU", options={"dtype": "float32"},
                         rows=[row, row], devices=[], status="ok")
    lines = render_table(report).splitlines()
    rows = [line for line in lines if not line.startswith("#")]
    assert [line.split()[:4] for line in rows] == [["all_reduce", "4096", "1024", "float32"]] * 2
    titles = next(line for line in lines if "busbw (GB/s)" in line)
    busbw = f"{4096 / 60e-6 * 1.5 / 1e9:.3f}"  # 0.102: the row's busbw, right-aligned under its title
    assert titles.startswith("#  ") and titles.index("busbw (GB/s)") + len("busbw (GB/s)") == rows[0].index(busbw) + 5
    assert lines[0] == "# collviz bench — 4 ranks, gloo on CPU" and lines[-1] == "# result: ok"
    assert "#" in lines and "" not in lines  # the blank lines are "#", as nccl-tests prints them
