"""The viewer driven with Pilot: replay keys, and a fake session for live and step-through."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.color import Color

from collviz.app.app import make_app
from collviz.app.messages import EventsArrived
from collviz.app.viewer_options import ViewerOptions
from collviz.app.screens import HelpScreen, NumberPrompt, RankDetailScreen
from collviz.app.screens.help import scroll_hint
from collviz.app.widgets import RankHeatmap, RankPanel
from collviz.app.widgets.render import format_bytes, format_values, rank_colour
from collviz.runtime.wire.protocol import Buffer, BufferSummary, Gate, Go

from support.app import SIZE, FakeSession, real_session, until
from support.pane_rows import pane_rows
from support.paths import FIXTURES
from support.synthetic import all_gather_events, write_trace


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "ag.cvz", all_gather_events())


async def test_replay_keys_move_the_cursor_and_speed(trace: Path):
    app = make_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.loaded)
        ends = app.event_log.step_ends
        assert app.cursor == ends[1]  # a finished run opens at its first collective (step 2: the all-gather)
        assert "opened at the first collective" in app.labels()[1]
        await pilot.press("left")
        assert app.cursor == ends[0] and "opened at" not in app.labels()[1]
        await pilot.press("right")
        assert app.cursor == ends[1]
        await pilot.press("end")
        assert app.cursor == len(app.event_log)
        await pilot.press("home")
        assert app.cursor == 0
        speed = app.speed
        await pilot.press("plus")
        assert app.speed == speed * 2
        await pilot.press("minus", "minus")
        assert app.speed == speed / 2
        await pilot.press("g")
        assert isinstance(app.screen, NumberPrompt)
        await pilot.press("s", "2", "enter")
        assert app.cursor == ends[1]
        await pilot.press("q")
    assert app.return_value == 0


async def test_a_seek_to_the_next_step_shows_the_view_built_ahead_as_it_would_be_built(tmp_path: Path, monkeypatch):
    from collviz.app.model import navigation, view_at

    app = make_app(trace=write_trace(tmp_path / "ag.cvz", all_gather_events(world=6)))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.loaded)
        await pilot.press("home")
        ends = app.event_log.step_ends
        await pilot.press("right")
        await until(pilot, lambda: app.view_ahead.take(app.event_log, ends[1], 0) is not None)
        assert app.view_ahead.take(app.event_log, ends[1], 0) == view_at(app.event_log, ends[1], 0)
        built_at: list[int] = []
        monkeypatch.setattr(navigation, "view_at", lambda log, cursor, tail: built_at.append(cursor))
        await pilot.press("right")
        assert app.cursor == ends[1] and ends[1] not in built_at  # the frame showed the view built ahead
        await pilot.press("q")


async def test_replay_plays_to_the_end_and_stops(trace: Path):
    app = make_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.loaded)
        for _ in range(4):
            await pilot.press("plus")
        start = app.cursor
        assert start < len(app.event_log)  # opened at the first collective
        await pilot.press("space")  # at 16 steps/s it may already have finished when the press returns
        await until(pilot, lambda: not app.playing and app.cursor == len(app.event_log))


async def test_bad_trace_is_reported_and_the_app_stays_open(tmp_path: Path):
    bad = tmp_path / "bad.cvz"
    bad.write_bytes(b"not a trace")
    app = make_app(trace=bad)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "not a collviz trace" in app.status_line)
        assert app.is_running


def test_the_header_s_first_word_says_what_the_viewer_does():
    """Following its run, the viewer is live or stepping, and finished once the run has ended
    (ok, failed or interrupted); an earlier moment of a live run is browsing; a trace, replay."""
    from collviz.app.model import Labels
    from collviz.app.widgets.run_header import viewer_status

    following = {kind: Labels("", "", False, kind) for kind in ("live", "stepping")}
    assert [viewer_status(following["live"], state) for state in ("starting", "running", "stalled")] == ["live"] * 3
    assert viewer_status(following["stepping"], "waiting") == "stepping"
    assert {viewer_status(labels, state) for labels in following.values()
            for state in ("finished", "failed", "interrupted")} == {"finished"}
    assert viewer_status(Labels("", "", True, "live"), "running") == "browsing"
    assert viewer_status(Labels("", "", True, "stepping"), "finished") == "browsing"
    assert viewer_status(Labels("", "", True, "replay"), "running") == "replay"


async def test_live_session_reaches_the_end_and_quit_stops_it():
    session = FakeSession(all_gather_events())
    app = make_app(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.event_log.run_end is not None)
        # a live run that finished well is shown at its first collective, not its emptiest last step
        assert not app.following and app.cursor == app.event_log.step_ends[1]
        assert "showing its first collective" in app.labels()[1]
        def header() -> str:
            return app.screen.query_one("#header").render().plain.splitlines()[0]

        await until(pilot, lambda: " · finished · " in header())  # drawn at the next frame (frames are throttled)
        assert " live " not in header(), header()  # the run is over, not live
        await pilot.press("end")
        assert app.following and app.cursor == len(app.event_log)
        view = app.current_view()
        assert view.state.kind == "finished"
        assert app.screen.query_one("#header").render().plain.splitlines()[1].startswith(" finished ")
        assert view.ranks[3].buffers[0].values == [0.0, 1.0, 10.0, 11.0, 20.0, 21.0, 30.0, 31.0]  # the latest step's first
        # stepping back stops following; end resumes it
        await pilot.press("left")
        assert not app.following and app.cursor < len(app.event_log)
        assert "the run has finished (end: follow)" in app.labels()[1]  # not only the moment shown
        await pilot.pause()
        assert app.screen.query_one("#header").render().plain.splitlines()[1].startswith(" browsing ")
        await pilot.press("end")
        assert app.following
        await pilot.press("q")
    assert session.stopped >= 1
    assert app.return_value == 0


async def test_step_mode_space_releases_one_gate_per_press():
    session = FakeSession(all_gather_events(step=True), step=True)
    app = make_app(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.current_view().state.kind == "waiting")
        assert app.current_view().state.gate == 0
        assert session.released == []
        await pilot.press("space")
        await until(pilot, lambda: session.released == [0])
        await until(pilot, lambda: app.current_view().state.gate == 1)
        assert not any(e.index >= 1 for e in app.event_log.gos.events)
        await pilot.press("space")
        await until(pilot, lambda: session.released == [0, 1])
        await pilot.press("space")
        await until(pilot, lambda: app.event_log.run_end is not None)
        assert session.released == [0, 1, 2]
        await pilot.press("space")  # no gate left: nothing released
        await pilot.pause()
        assert session.released == [0, 1, 2]


async def test_a_step_through_frame_lands_only_once_every_rank_has_arrived():
    """The ranks arrive at each gate one event at a time (each right after its own end of the
    step): every frame the viewer follows to has all 4 ranks waiting at a gate (or none begun,
    or every one ended), never a step some ranks have done and others not; the header says how many
    have arrived meanwhile, and space opens the gate they wait at (the setup has none)."""
    session = FakeSession([], step=True)
    app = make_app(session=session)
    followed: list[tuple[str, tuple[int, ...], str]] = []
    async with app.run_test(size=SIZE) as pilot:
        for event in all_gather_events(step=True, staggered=True):
            if isinstance(event, Go):  # the launcher's Go answers space
                await pilot.press("space")
                await until(pilot, lambda: session.released[-1:] == [event.index])
            app.post_message(EventsArrived([event]))
            await pilot.pause()
            state = app.current_view().state
            kind = "ended" if all(rank.state == "done" for rank in app.current_view().ranks) else state.kind
            followed.append((kind, state.waiting, app.mode.labels(app, app.following)[1]))
            if state.kind == "waiting" and state.gate == 1:
                assert app.current_view().step == 0 and all(rank.buffers for rank in app.current_view().ranks)
        await pilot.press("q")
    assert session.released == [1, 2]
    assert {kind for kind, _, _ in followed} == {"starting", "waiting", "ended"}  # every rank ended, then the run
    assert all(waiting == (0, 1, 2, 3) for kind, waiting, _ in followed if kind == "waiting")
    running = [label for _, _, label in followed if "running" in label]
    assert {"step 2 running · 1/4 ranks at the next gate", "step 2 running · 3/4 ranks at the next gate",
            "step 3 running · 2/4 ranks at the next gate"} <= set(running), running


async def test_quitting_a_live_run_early_is_the_user_s_choice_not_an_interruption():
    """q at the first gate stops the workers and exits 0 (no signal was sent), saying where the run
    was left: before its first step ended."""
    session = FakeSession(all_gather_events(step=True), step=True)
    options = ViewerOptions()
    app = make_app(session=session, options=options)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.current_view().state.kind == "waiting")
        await pilot.press("q")
    assert session.stopped >= 1
    assert app.return_value == 0
    assert options.left_at == "before its first step ended"


async def test_a_finished_run_quit_with_q_is_not_said_to_be_left():
    options = ViewerOptions()
    app = make_app(session=FakeSession(all_gather_events()), options=options)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.event_log.run_end is not None)
        await pilot.press("q")
    assert app.return_value == 0 and options.left_at is None


async def test_failed_rank_is_shown():
    app = make_app(events=all_gather_events(fail_rank=1))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.current_view().state.kind == "failed"
        panel = app.screen.query(RankPanel)[1]
        assert panel.has_class("-error")


async def test_help_detail_log_and_screenshot(tmp_path: Path):
    app = make_app(events=all_gather_events(), screenshot_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.click(RankPanel)
        assert isinstance(app.screen, RankDetailScreen) and app.screen.rank == 0
        await pilot.press("escape")
        await pilot.press("l")
        assert app.log_visible and app.screen.query_one("#log").display
        await pilot.press("s")
        await pilot.pause()
        assert len(list(tmp_path.glob("*.svg"))) == 1


async def test_help_says_when_keys_are_hidden_below_or_above():
    app = make_app(events=all_gather_events())
    async with app.run_test(size=(100, 30)) as pilot:  # too short for every key
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        box = app.screen.query_one("#help-box")
        assert box.max_scroll_y > 0 and str(box.border_subtitle).startswith("↓ more below")
        await pilot.press("end")
        await pilot.pause()
        assert str(box.border_subtitle).startswith("↑ more above")
    app = make_app(events=all_gather_events())
    async with app.run_test(size=(160, 50)) as pilot:  # every key fits
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert str(app.screen.query_one("#help-box").border_subtitle) == "esc: close"


async def test_a_pane_s_scroll_hint_goes_when_its_text_gets_short():
    """The fsdp fixture's step 5 lists more transfers than the pane holds; step 6 has none."""
    app = make_app(trace=FIXTURES / "fsdp-tiny.cvz")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.loaded, tries=500)
        await pilot.press("g", "s", "5", "enter")
        await pilot.pause()
        await pilot.pause()
        pane = app.screen.query_one("#transfers")
        assert pane.border_subtitle == "↓ more: scroll"
        await pilot.press("right")
        await pilot.pause()
        await pilot.pause()
        assert "no transfers" in " ".join(pane_rows(pane)) and pane.border_subtitle == ""


def test_scroll_hint_names_the_hidden_side():
    assert scroll_hint(0, 0) == "esc: close"
    assert scroll_hint(9, 0).startswith("↓ more below")
    assert scroll_hint(9, 4).startswith("↑↓ more")
    assert scroll_hint(9, 9).startswith("↑ more above")


async def test_large_buffers_show_their_summary_and_picture():
    events = all_gather_events()
    big = Buffer(run="synthetic", rank=0, seq=999, t_ns=1, phase=0, name="weights", role="param", moment="before",
                 shape=[1 << 20], dtype="float32",
                 summary=BufferSummary(min=-1.0, max=2.0, mean=0.5, crc32="deadbeef", picture=[0.0, 1.0, 2.0, 1.0]))
    at = next(i for i, e in enumerate(events) if isinstance(e, Buffer) and e.rank == 0) + 1
    app = make_app(events=[*events[:at], big, *events[at:]])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        body = app.screen.query(RankPanel)[0].body().plain
        assert "weights [1048576] before" in body
        assert "min -1 max 2 mean 0.5 crc deadbeef" in body
        assert any(bar in body for bar in "▁▂▃▄▅▆▇█")


async def test_a_panel_too_short_for_its_buffers_says_what_is_cut():
    events = all_gather_events()
    extra = [Buffer(run="synthetic", rank=0, seq=900 + i, t_ns=1, phase=0, name=f"param{i}", role="param",
                    moment="before", shape=[4], dtype="float32", values=[1.0, 2.0, 3.0, 4.0]) for i in range(12)]
    at = next(i for i, e in enumerate(events) if isinstance(e, Buffer) and e.rank == 0) + 1
    app = make_app(events=[*events[:at], *extra, *events[at:]])
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        body = app.screen.query(RankPanel)[0].body().plain
        assert body.splitlines()[0].startswith("output")  # the latest step's buffer comes first
        last = body.splitlines()[-1]
        assert last.startswith("… ") and "more" in last and "click" in last


async def test_many_ranks_share_one_heatmap_with_a_row_per_rank():
    """16 ranks: no panels, one heatmap; after the all-gather each rank's row runs through the 16
    source ranks' colours in order; clicking a row opens that rank's detail."""
    app = make_app(events=all_gather_events(world=16))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        await pilot.press("home", "right", "right")
        await pilot.pause()
        assert not app.screen.query(RankPanel) and app.screen.query_one("#ranks").has_class("-ranks-many")
        heatmap = app.screen.query_one(RankHeatmap)
        lines = heatmap.build_lines(*heatmap.content_size)
        labels = ["".join(s.text for s in line).split()[0] for line in lines if line and line[0].text.strip()]
        assert labels == [f"r{r}" for r in range(16)]
        first_row = next(line for line in lines if line[0].text.strip() == "r5")
        colours = [s.style.bgcolor.name for s in first_row[2:] if s.style and s.style.bgcolor]
        assert colours == [Color.parse(rank_colour(r)).name for r in range(16)]
        lines_per_rank = max(1, min(3, heatmap.content_size.height // 16))
        await pilot.click(RankHeatmap, offset=(4, 1 + 3 * lines_per_rank))  # below the border: rank 3's row
        await pilot.pause()
        assert isinstance(app.screen, RankDetailScreen) and app.screen.rank == 3


async def test_too_small_terminal_says_so():
    app = make_app(events=all_gather_events())
    async with app.run_test(size=(90, 24)) as pilot:
        await pilot.pause()
        assert app.screen.has_class("-too-small")
        assert app.screen.query_one("#too-small").display


async def test_live_all_reduce_on_real_ranks_shows_the_sum():
    session = real_session("all-reduce")
    app = make_app(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.event_log.run_end is not None, tries=1500)
        await pilot.press("end")  # it opened at its first collective; the end shows what the run released
        view = app.current_view()
        assert view.state.kind == "finished"
        assert view.step == view.step_count - 1
        inputs = [e for e in app.event_log.events if isinstance(e, Buffer) and e.moment == "before"]
        outputs = [e for e in app.event_log.events if isinstance(e, Buffer) and e.moment == "after"]
        assert inputs and outputs
        assert all(outputs[0].name in {f.name for f in rank.freed} for rank in view.ranks)  # released at the end
        await pilot.press("g", "s", "2", "enter")  # the all-reduce's own step
        await pilot.pause()
        view = app.current_view()
        expected = [sum(col) for col in zip(*(b.values for b in inputs if b.name == outputs[0].name))]
        reduce_op = app.event_log.run_start.options.get("reduce_op")
        if reduce_op == "avg":
            expected = [v / 4 for v in expected]
        for rank, panel in zip(view.ranks, app.screen.query(RankPanel)):
            shown = {b.name: b for b in rank.buffers}[outputs[0].name]
            assert shown.values == pytest.approx(expected)
            assert " ".join(format_values(shown.values)) in panel.body().plain
        await pilot.press("q")
    assert app.return_value == 0


def _gate_passes(events, gate: int) -> list[int]:
    """Log positions of the ranks' passes through ``gate``."""
    return [i for i, e in enumerate(events) if isinstance(e, Gate) and e.index == gate and e.edge == "pass"]


async def test_step_mode_on_real_ranks_no_rank_passes_a_gate_before_space():
    session = real_session("all-gather", step=True)
    app = make_app(session=session)
    async with app.run_test(size=SIZE) as pilot:
        count = None
        presses = 0
        while app.event_log.run_end is None:
            await until(pilot, lambda: app.current_view().state.kind in ("waiting", "finished", "failed"), tries=1500)
            if app.event_log.run_end is not None or app.current_view().state.kind != "waiting":
                break
            count = app.event_log.phase_count
            view = app.current_view()
            gate = view.state.gate
            assert not _gate_passes(app.event_log.events, gate)  # nobody is through before space
            assert view.state.waiting == (0, 1, 2, 3)  # the frame lands once every rank has arrived
            if presses == 0:  # the first gate: the setup done, every rank shows what it holds
                assert gate == 1 and view.step == 0 and all(rank.buffers for rank in view.ranks)
            await pilot.press("space")
            presses += 1
            await until(pilot, lambda: app.current_view().state.gate != gate or app.event_log.run_end is not None,
                         tries=1500)
        await until(pilot, lambda: app.event_log.run_end is not None, tries=1500)
        assert presses == count - 1  # every phase but the setup waits at a gate
        events = app.event_log.events
        assert not _gate_passes(events, 0)
        for index in range(1, count):
            go = next(i for i, e in enumerate(events) if isinstance(e, Go) and e.index == index)
            passes = _gate_passes(events, index)
            assert len(passes) == 4 and min(passes) > go
        await pilot.press("q")
    assert app.return_value == 0


async def test_q_during_a_live_run_ends_every_worker_within_3s_and_keeps_the_trace(tmp_path: Path):
    import time

    from collviz.runtime.wire.protocol import RunEnd
    from collviz.runtime.wire.trace import read_trace
    from support.processes import alive

    trace = tmp_path / "quit.cvz"
    session = real_session("all-reduce", step=True, record=trace)
    pids = list(session.pids.values())
    app = make_app(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.current_view().state.kind == "waiting", tries=1500)
        pressed = time.monotonic()
        await pilot.press("q")
    deadline = pressed + 3
    while [pid for pid in pids if alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in pids if alive(pid)], "a worker outlived q by 3 s"
    assert app.return_value == 0  # the user left: a choice, not a failure
    events = read_trace(trace).events
    assert isinstance(events[-1], RunEnd) and events[-1].status == "interrupted"
    assert any(isinstance(e, Gate) and e.edge == "wait" for e in events)


async def test_digit_keys_open_a_ranks_detail(trace: Path):
    app = make_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.loaded)
        await pilot.press("2")
        await until(pilot, lambda: isinstance(app.screen, RankDetailScreen))
        assert app.screen.rank == 2
        await pilot.press("escape", "9")  # no rank 9 in a 4-rank run: nothing opens
        await pilot.pause()
        assert not isinstance(app.screen, RankDetailScreen)


async def test_the_footer_keeps_help_and_quit_at_the_minimum_size(trace: Path):
    app = make_app(trace=trace)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.loaded)
        await pilot.pause()
        svg = app.export_screenshot()
    text = "".join(re.findall(r">([^<]*)</text>", svg)).replace("&#160;", " ")
    assert "?helpqquit" in re.sub(r"\s+", "", text)


async def test_compare_viewer_draws_both_runs_on_one_scale():
    """Two runs' memory charts share the larger run's peak as full height (here the fsdp fixture
    against a copy of itself with half its bytes), said once above them."""
    from collviz.app.compare_view import CompareApp
    from collviz.runtime.wire.protocol import Memory
    from collviz.runtime.wire.trace import read_trace
    import msgspec

    events = read_trace(FIXTURES / "fsdp-tiny.cvz").events
    halved = [msgspec.structs.replace(e, live_bytes=e.live_bytes // 2, peak_bytes=e.peak_bytes // 2,
                                      by_category={k: v // 2 for k, v in e.by_category.items()})
              if isinstance(e, Memory) else e for e in events]
    peak = max(e.peak_bytes for e in events if isinstance(e, Memory))
    app = CompareApp([("full", events), ("half", halved)], "the table")
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        charts = list(app.query("MemoryTimeline"))
        assert [str(c.border_title).split(" · ")[0] for c in charts] == ["full", "half"]
        assert all(c.shared_top == peak for c in charts)
        title = str(app.query_one("#compare-title").render())
        assert f"one scale: full height = {format_bytes(peak)}" in title  # said once, above the charts
        assert not any("scale" in str(c.border_title) for c in charts)
        rows = {c.id: "".join(s.text for line in c.build_lines(140, 12) for s in line) for c in charts}
        assert f"peak {format_bytes(peak)}" in rows["memory-0"]
        assert f"peak {format_bytes(peak // 2)}" in rows["memory-1"]
        # the categories' legend is said once, above the charts, naming every category the fixture holds
        held = {name for e in events if isinstance(e, Memory) for name in e.by_category}
        legend = str(app.query_one("#compare-legend").render())
        assert held and all(f"■ {name}" in legend for name in held) and "▼ peak" in legend
        assert not any("■" in text for text in rows.values())
        await pilot.press("q")


async def test_r_opens_any_rank_s_detail_by_number_beyond_the_digit_keys():
    """Above ten ranks the digit keys cannot reach rank 12: r asks for its number; a rank that
    does not exist is refused with a notice and nothing opens."""
    app = make_app(events=all_gather_events(16))
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await pilot.press("r")
        assert isinstance(app.screen, NumberPrompt)
        await pilot.press("1", "2", "enter")
        await pilot.pause()
        assert isinstance(app.screen, RankDetailScreen) and app.screen.rank == 12
        await pilot.press("escape", "r", "4", "0", "enter")
        await pilot.pause()
        assert not isinstance(app.screen, (RankDetailScreen, NumberPrompt))
        await pilot.press("q")


async def test_question_mark_opens_the_help_over_every_screen(trace: Path):
    """? opens the keys over the viewer, a rank's detail and the factor box, and in compare."""
    from collviz.app.compare_view import CompareApp
    from collviz.app.screens.factor import FactorScreen
    from collviz.app.screens.help import HelpScreen
    from collviz.runtime.wire.trace import read_trace

    app = make_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.loaded)
        for opener, screen in ((None, None), ("2", RankDetailScreen), ("b", FactorScreen)):
            if opener is not None:
                await pilot.press(opener)
                await until(pilot, lambda: isinstance(app.screen, screen))
            await pilot.press("question_mark")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen))
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
            if opener is not None:
                await pilot.press("escape")
        await pilot.press("q")
    events = read_trace(trace).events
    compare = CompareApp([("a", events), ("b", events)], "the table")
    async with compare.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(compare.screen, HelpScreen))
        assert "one scale" in str(compare.screen.query_one("#help-intro").render())
        await pilot.press("escape", "q")


@pytest.mark.parametrize("kind", ["lesson", "step"])
async def test_lesson_and_step_footers_say_what_each_key_does_uncut_at_100x30(trace: Path, kind: str):
    """A lesson's q moves on (n too), so its footer says so; step-through's space runs a step;
    both keep ? help and q at the right end of 100 columns."""
    from collviz.app.viewer_options import LessonPlace, ViewerOptions

    if kind == "lesson":
        app = make_app(trace=trace, options=ViewerOptions(lesson=LessonPlace("collectives", 2, 8, "all-gather")))
        expected = "spaceplay/pause←back→stependlatestggotocallppreviousQendlesson?helpqnextitem"
    else:
        app = make_app(session=FakeSession(all_gather_events(4, step=True), step=True))
        expected = "spacerunastep←back→stependlatestggotocall?helpqquit"
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.3)
        svg = app.export_screenshot()
        await pilot.press("Q" if kind == "lesson" else "q")
    footer = re.sub(r"\s+", "", "".join(re.findall(r">([^<]*)</text>", svg)).replace("&#160;", " ")).rsplit("─╯", 1)[-1]
    assert footer == expected
