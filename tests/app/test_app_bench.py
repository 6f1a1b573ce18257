"""The viewer on bench runs (busbw plot) and the memory pane's device figures (N/A without them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collviz.app.app import make_app
from collviz.app.model import EventLog, bench_at, step_at
from collviz.app.widgets import BenchPlot, MemoryTimeline
from collviz.app.widgets.bench_plot import nice_top, short_bytes
from collviz.runtime.reports.bench_table import bench_report
from collviz.runtime.wire.protocol import Collective, Check
from collviz.runtime.wire.trace import read_trace

from support.app import SIZE, until
from support.cli import run_cli
from support.paths import FIXTURES
from support.synthetic import all_gather_events, write_trace
from support.synthetic_bench import bench_events


OPS = ("all_reduce", "reduce_scatter")
SIZES = [1024 * 2**k for k in range(5)]  # 1K:16K


@pytest.fixture(scope="session")
def bench_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real 4-rank gloo bench of all-reduce and reduce-scatter over 1K:16K, recorded once."""
    path = tmp_path_factory.mktemp("bench-view") / "bench.cvz"
    result = run_cli("bench", *(op.replace("_", "-") for op in OPS), "--gpus", "4", "--backend", "gloo",
                     "--sizes", "1K:16K", "--iters", "3", "--warmup", "1", "--record", str(path))
    assert result.returncode == 0, result.stderr
    return path


async def _loaded(pilot) -> None:
    await until(pilot, lambda: pilot.app.loaded)


async def test_replayed_bench_plots_one_series_per_op_from_bench_report(bench_trace: Path):
    expected = bench_report(read_trace(bench_trace).events).rows
    assert len(expected) == len(OPS) * len(SIZES)
    app = make_app(trace=bench_trace)
    async with app.run_test(size=SIZE) as pilot:
        await _loaded(pilot)
        await pilot.press("end")
        await pilot.pause()
        plot = app.screen.query_one(BenchPlot)
        assert plot.display and not app.screen.query_one("#ranks").display  # the plot replaces the panels
        assert [s.op for s in plot.series] == list(OPS)
        for series in plot.series:
            rows = [row for row in expected if row.op == series.op]
            assert len(series.points) == len(SIZES)
            assert list(series.rows) == rows
            assert list(series.points) == [(row.size, row.busbw_gbps) for row in rows]
        assert [s.factor_text for s in plot.series] == ["2(n−1)/n = 2·3/4 = 1.5", "(n−1)/n = 3/4 = 0.75"]
        assert plot.border_subtitle.startswith(f"{len(expected)} of {len(expected)} sizes measured")
        text = "\n".join("".join(segment.text for segment in line) for line in plot.build_lines(80, 24))
        for label in ("busbw (GB/s", "message size S (bytes", "1K", "16K", "× 2(n−1)/n = 2·3/4 = 1.5"):
            assert label in text


async def test_the_plot_grows_step_by_step_with_the_rows_of_the_events_up_to_the_cursor(bench_trace: Path):
    app = make_app(trace=bench_trace)
    async with app.run_test(size=SIZE) as pilot:
        await _loaded(pilot)
        await pilot.press("home")
        counts = []
        for _ in range(3):
            await pilot.press("right")
            log, cursor = app.event_log, app.cursor
            step = step_at(log, cursor)
            shown = [log.run_start, *(e for e in log.events[:cursor]
                                       if isinstance(e, (Collective, Check)) and e.phase <= step)]
            plot = app.screen.query_one(BenchPlot)
            assert [r for s in plot.series for r in s.rows] == bench_report(shown).rows
            counts.append(sum(len(s.points) for s in plot.series))
        assert counts == [1, 2, 3]


def test_bench_view_follows_a_growing_live_log():
    """Absorbing events one by one (as live batches do) gives the rows of the events so far."""
    events = bench_events()
    log = EventLog()
    for number, event in enumerate(events, start=1):
        log.append(event)
        if number % 37 and number != len(events):
            continue
        view = bench_at(log, number, step_at(log, number))
        assert view is not None
        step = step_at(log, number)
        shown = [events[0], *(e for e in events[:number] if isinstance(e, (Collective, Check)) and e.phase <= step)]
        assert list(view.rows) == bench_report(shown).rows
    assert len(view.rows) == 18 and [len(s.points) for s in view.series] == [9, 9]


def test_other_runs_have_no_bench_view():
    log = EventLog(all_gather_events())
    assert bench_at(log, len(log), step_at(log, len(log))) is None


def test_axis_helpers():
    assert [short_bytes(n) for n in (512, 1024, 65536, 1536, 16 * 2**20, 2**30)] == \
        ["512", "1K", "64K", "1.5K", "16M", "1G"]
    assert [nice_top(v) for v in (0.0, 0.0024, 0.003, 0.7, 1.0, 3.2, 11)] == [1.0, 0.0025, 0.005, 1.0, 1.0, 5.0, 20]


async def test_cpu_trace_memory_pane_says_device_figures_are_na():
    app = make_app(trace=FIXTURES / "all-gather.cvz")
    async with app.run_test(size=SIZE) as pilot:
        await _loaded(pilot)
        await pilot.press("end")
        await pilot.pause()
        pane = app.screen.query_one(MemoryTimeline)
        assert pane.border_subtitle == "device: CUDA allocator N/A · NVML N/A"
        assert not app.screen.has_class("-bench") and not app.screen.query_one(BenchPlot).display


async def test_memory_pane_shows_cuda_and_nvml_figures_where_the_run_has_them():
    app = make_app(events=bench_events(gpu=True))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        await pilot.press("home", "right")
        pane = app.screen.query_one(MemoryTimeline)
        assert pane.border_subtitle == "device: CUDA allocator allocated/reserved · NVML used/total"
        rows = ["".join(segment.text for segment in line) for line in pane.build_lines(130, 4)]
        by_rank = {row.split()[0]: row for row in rows if row.startswith("r")}
        # NVML's used bytes differ per rank (3 GiB + r MiB), so no two ranks share a row
        assert sorted(by_rank) == ["r0", "r1", "r2", "r3"]
        assert "· CUDA 0 B/2.0 MiB · NVML 3.0 GiB/80.0 GiB" in by_rank["r0"]
        assert "· NVML 3.0 GiB/80.0 GiB" in by_rank["r3"]


def test_bench_plot_snapshot(snap_compare, tmp_path: Path):
    """The busbw plot of a finished synthetic bench (fixed timings, so the frame is deterministic)."""
    trace = write_trace(tmp_path / "bench.cvz", bench_events())

    async def run_before(pilot) -> None:
        await _loaded(pilot)
        await pilot.press("end")
        await pilot.pause()

    assert snap_compare(make_app(trace=trace, mask_volatile=True), terminal_size=SIZE, run_before=run_before)
