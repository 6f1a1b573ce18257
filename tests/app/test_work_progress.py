"""Long work shows a progress bar in the viewer: a large trace opening, a bench sweep running."""

from __future__ import annotations

import msgspec
from textual.widgets import ProgressBar

from collviz.app.app import make_app
from collviz.app.messages import LoadProgress
from collviz.app.widgets import WorkProgress
from collviz.runtime.wire.protocol import Phase, RunEnd
from collviz.runtime.wire.sidecar import index_path
from collviz.runtime.wire.trace import PROGRESS_RECORDS

from support.app import SIZE, FakeSession, until
from support.synthetic import all_gather_events, write_trace
from support.synthetic_bench import bench_events


def _large_trace(folder):
    """A trace of three progress reports' worth of records (an all-gather's events, repeated), and its events."""
    events = all_gather_events(world=4)
    copies = 3 * PROGRESS_RECORDS // len(events)
    big = [msgspec.structs.replace(e, seq=e.seq + c * len(events)) for c in range(copies) for e in events]
    return write_trace(folder / "big.cvz", big), big


async def test_opening_a_large_trace_without_its_index_shows_reading_then_indexing_and_then_goes(tmp_path):
    path, big = _large_trace(tmp_path)
    index_path(path).unlink()  # read by the careful reader: no index serves a first frame early
    seen: list[LoadProgress] = []
    app = make_app(trace=path)
    async with app.run_test(size=SIZE, message_hook=lambda m: seen.append(m) if isinstance(m, LoadProgress) else None) \
            as pilot:
        await until(pilot, lambda: app.loaded, tries=3000)
        await pilot.pause()
        assert not app.screen.query_one(WorkProgress).has_class("-active")
    stages = [m.stage for m in seen]
    assert stages[0] == "reading" and stages[-1] == "indexing"
    reading = [m for m in seen if m.stage == "reading"]
    assert reading[-1].done == reading[-1].total == path.stat().st_size
    indexing = [m for m in seen if m.stage == "indexing"]
    assert indexing[-1].done == indexing[-1].total == len(big)


async def test_opening_a_large_indexed_trace_shows_a_frame_and_then_reads_the_rest_checked(tmp_path):
    """Through its index, the first frame comes without a progress bar; the rest is read behind it
    (the header's note), then the whole trace is checked, and every event is filed."""
    path, big = _large_trace(tmp_path)
    assert index_path(path).exists()
    seen: list[LoadProgress] = []
    app = make_app(trace=path)
    async with app.run_test(size=SIZE, message_hook=lambda m: seen.append(m) if isinstance(m, LoadProgress) else None) \
            as pilot:
        await until(pilot, lambda: app.loaded and app.checked, tries=3000)
        await pilot.pause()
        assert not app.screen.query_one(WorkProgress).has_class("-active")
        assert app.event_log.filed == len(app.event_log) == len(big)
        assert app.reading_note() == "" and app.trace_problem == ""
    assert seen == []


async def test_a_running_bench_sweep_shows_how_many_sizes_are_measured():
    events = bench_events(world=4)
    ends = [i for i, e in enumerate(events) if isinstance(e, Phase) and e.edge == "end"]
    half = events[: ends[len(ends) // 2] + 1]  # a sweep halfway through, still running
    app = make_app(session=FakeSession(half))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(app.event_log) == len(half))
        await pilot.pause()
        progress = app.screen.query_one(WorkProgress)
        assert progress.has_class("-active")
        bar = progress.query_one(ProgressBar)
        view = app.current_view()
        assert bar.total == view.bench.cases and bar.progress == len(view.bench.rows) < view.bench.cases
    finished = make_app(session=FakeSession(events))
    async with finished.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: any(isinstance(e, RunEnd) for e in finished.event_log.events[-3:]))
        await pilot.pause()
        assert not finished.screen.query_one(WorkProgress).has_class("-active")
