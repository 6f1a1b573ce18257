"""torch.profiler traces in the four shapes that tell wrong from right (:mod:`support.profiler_shapes`):
4 ranks; an all_reduce on the world where rank 3's kernel takes 4 ms and its peers' 1 ms; two
communicators of 2 ranks (``tp_a``: 0, 1; ``tp_b``: 2, 3, no rank 0), each with its own all_gather.

By hand (float32: 4 B; t = the slowest rank's kernel; S, algbw = S/t and busbw as nccl-tests):
- all_reduce: S = 262,144 × 4 = 1,048,576 B; t = 4 ms (rank 3); algbw = 1,048,576 / 0.004 =
  262,144,000 B/s; busbw = × 2·3/4 = 393,216,000 B/s (with rank 0's 1 ms: 4× too high);
- tp_a's all_gather: S = 1,024 × 4 × 2 ranks = 8,192 B; t = 40 µs (rank 1); algbw = 8,192 / 40e-6
  = 204,800,000 B/s; busbw = × 1/2 = 102,400,000 B/s (with the world's 3/4: 153,600,000);
- tp_b's all_gather: S = 2,048 × 4 × 2 = 16,384 B; t = 50 µs (rank 2); algbw = 327,680,000 B/s;
  busbw = 163,840,000 B/s.
"""

from __future__ import annotations

import pytest

from collviz.runtime.reports.summary import render_summary
from collviz.runtime.reports.summary_json import summary_document
from collviz.runtime.sources import open_artifacts
from collviz.runtime.wire.protocol import RunStart

from support.profiler_shapes import write_traces


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    return open_artifacts([write_traces(tmp_path_factory.mktemp("profiler_shapes"))])


@pytest.fixture(scope="module")
def figures(run) -> dict[str, dict]:
    """Each call of the summary's --json by its group."""
    return {call["group"]: call for call in summary_document(run.events)["calls"]}


def test_four_ranks_and_no_warning(run):
    [start] = [e for e in run.events if isinstance(e, RunStart)]
    assert (start.world_size, run.exit_status, run.warnings) == (4, 0, [])


def test_each_call_on_its_group_with_its_ranks(figures):
    assert {group: (c["op"], c["group_ranks"], c["group_seq"]) for group, c in figures.items()} == {
        "0 (default_pg)": ("all_reduce", [0, 1, 2, 3], 1), "1 (tp_a)": ("all_gather", [0, 1], 1),
        "2 (tp_b)": ("all_gather", [2, 3], 1)}


def test_each_ranks_time_and_the_slowest(figures):
    world, tp_a, tp_b = figures["0 (default_pg)"], figures["1 (tp_a)"], figures["2 (tp_b)"]
    assert world["seconds"] == pytest.approx({0: 1e-3, 1: 1e-3, 2: 1e-3, 3: 4e-3})
    assert world["slowest_seconds"] == pytest.approx(4e-3)
    assert tp_a["seconds"] == pytest.approx({0: 10e-6, 1: 40e-6}) and tp_a["slowest_seconds"] == pytest.approx(40e-6)
    assert tp_b["seconds"] == pytest.approx({2: 50e-6, 3: 20e-6}) and tp_b["slowest_seconds"] == pytest.approx(50e-6)


@pytest.mark.parametrize("group, s, algbw, busbw", [
    ("0 (default_pg)", 1_048_576, 262_144_000, 393_216_000),
    ("1 (tp_a)", 8_192, 204_800_000, 102_400_000),
    ("2 (tp_b)", 16_384, 327_680_000, 163_840_000),
])
def test_s_algbw_and_busbw_of_each_group(figures, group, s, algbw, busbw):
    call = figures[group]
    assert call["algo_bytes"] == s
    assert call["algbw"] == pytest.approx(algbw) and call["busbw"] == pytest.approx(busbw)


def test_the_summary_says_each_figure_with_its_groups_factor(run):
    """The text a user reads: 4 ms for the world's call (rank 3's), the pairs' factor 1/2."""
    text = render_summary(run.events)
    assert "  time (per rank): r0 1.000 ms, r1 1.000 ms, r2 1.000 ms, r3 4.000 ms" in text
    assert "algbw = S/t = 1 MiB / 4.000 ms = 262 MB/s; busbw = algbw × 2(n−1)/n = 2·3/4 = 1.5 = 393 MB/s" in text
    assert "algbw = S/t = 8 KiB / 0.040 ms = 205 MB/s; busbw = algbw × (n−1)/n = 1/2 = 0.5 = 102 MB/s" in text
    assert "algbw = S/t = 16 KiB / 0.050 ms = 328 MB/s; busbw = algbw × (n−1)/n = 1/2 = 0.5 = 164 MB/s" in text

