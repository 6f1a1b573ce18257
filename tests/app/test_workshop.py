"""Workshop mode: paced runs on a fake clock, the projector layout, moving between lesson items."""

from __future__ import annotations

import itertools

import pytest

from collviz.app.app import make_app
from collviz.app.viewer_options import LessonPlace, ViewerOptions
from collviz.app.model.pacing import Pacer
from collviz.app.widgets.render import HIGH_CONTRAST_COLOURS, RANK_COLOURS, rank_colour

from support.app import FakeSession, real_session, until
from support.paths import FIXTURES
from support.synthetic import all_gather_events


class FakeClock:
    """Time that moves only when a test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_pacer_counts_a_full_period_from_when_the_ranks_are_ready():
    clock = FakeClock()
    pacer = Pacer(5.0, clock)
    assert not pacer.due(ready=False)
    clock.now = 10.0
    assert not pacer.due(ready=True) and pacer.remaining() == 5.0  # ready at 10: due at 15
    clock.now = 14.9
    assert not pacer.due(ready=True)
    clock.now = 15.0
    assert pacer.due(ready=True) and not pacer.due(ready=True)  # once; the next period starts over
    assert pacer.toggle() is True and not pacer.due(ready=True)
    clock.now = 100.0
    assert not pacer.due(ready=True) and pacer.remaining() is None  # paused: never due
    assert pacer.toggle() is False
    assert not pacer.due(ready=True)  # resumed at 100: a full period again
    clock.now = 105.0
    assert pacer.due(ready=True)


async def test_a_paced_run_opens_its_gates_by_the_clock_and_space_pauses_it():
    clock = FakeClock()
    session = real_session("all-gather", step=True)
    app = make_app(session=session, options=ViewerOptions(pace=5.0, clock=clock))
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.current_view().state.kind == "waiting", tries=1500)
        app.mode.pace_tick(app)  # the ranks are ready now (t = 0): the gate opens at t = 5
        clock.now = 4.9
        app.mode.pace_tick(app)
        assert app.mode.released == -1
        assert "paced every 5 s" in app.labels()[0]
        clock.now = 5.0
        app.mode.pace_tick(app)
        assert app.mode.released == 1  # the setup has no gate: the first is gate 1
        await until(pilot, lambda: app.current_view().state.gate == 2, tries=1500)
        await pilot.press("space")  # pause
        assert app.mode.pacer.paused and "paused" in app.labels()[0]
        clock.now = 60.0
        app.mode.pace_tick(app)
        assert app.mode.released == 1
        await pilot.press("left")  # browsing back does not stop the run
        await pilot.press("space")  # resume: a full period from now
        app.mode.pace_tick(app)
        clock.now = 65.0
        app.mode.pace_tick(app)
        assert app.mode.released == 2 and not app.following
        await pilot.press("q")


def test_projector_layout_hides_what_a_room_does_not_need_and_swaps_the_palette(snap_compare):
    app = make_app(trace=FIXTURES / "all-gather.cvz", mask_volatile=True, options=ViewerOptions(present=True))

    async def run_before(pilot) -> None:
        await until(pilot, lambda: app.loaded)
        await pilot.press("g", "s", "2", "enter")
        await pilot.pause()
        assert app.theme == "collviz-projector"
        assert [rank_colour(r) for r in range(8)] == list(HIGH_CONTRAST_COLOURS)
        assert not app.screen.query_one("#memory").display

    try:
        assert snap_compare(app, terminal_size=(160, 50), run_before=run_before)
    finally:
        from collviz.app.theme import palette_for
        palette_for("textual-dark")  # the palette is module state: leave it as other tests expect
    assert [rank_colour(r) for r in range(8)] == list(RANK_COLOURS)


# Machado, Oliveira & Fernandes (2009) simulation matrices at full severity, on linear RGB
_DEFICIENCIES = {
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602), (0.004733, 0.691367, 0.303900)),
}


def _linear(channel: float) -> float:
    return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4


def _simulated(colour: str, matrix) -> tuple[float, ...]:
    rgb = [_linear(int(colour[i:i + 2], 16) / 255) for i in (1, 3, 5)]
    return tuple(max(0.0, min(1.0, sum(m * c for m, c in zip(row, rgb)))) for row in matrix)


@pytest.mark.parametrize("deficiency", sorted(_DEFICIENCIES))
def test_projector_rank_colours_stay_apart_for_colour_blind_viewers(deficiency):
    """Every pair of the 8 rank colours differs clearly (in linear RGB) after simulating the deficiency."""
    seen = [_simulated(c, _DEFICIENCIES[deficiency]) for c in HIGH_CONTRAST_COLOURS]
    closest = min(sum((a - b) ** 2 for a, b in zip(x, y)) ** 0.5 for i, x in enumerate(seen) for y in seen[i + 1:])
    assert closest > 0.08, f"two rank colours nearly merge for {deficiency}: distance {closest:.3f}"


async def test_n_q_p_and_shift_q_leave_a_lesson_item_the_header_says_which_plays():
    for key, navigation in (("n", "next"), ("q", "next"), ("p", "previous"), ("Q", "end")):
        options = ViewerOptions(lesson=LessonPlace("collectives", 7, 8, "reduce-scatter"))
        app = make_app(events=all_gather_events(), options=options)
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.pause()
            assert app.labels()[0].startswith("lesson collectives · 7/8 reduce-scatter · replay")
            await pilot.press(key)
            await pilot.pause()
        assert options.navigation == navigation
    app = make_app(events=all_gather_events())  # outside a lesson, n and p do nothing
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("n", "p")
        assert app.is_running
        await pilot.press("q")


def test_the_lesson_loop_follows_n_and_p(monkeypatch):
    """Item 1, then p on item 2 goes back to 1, then n, n, and the end."""
    from collviz.app.commands import lesson as lesson_cmd

    played: list[str] = []
    choices = itertools.chain(["next", "previous", "next", "next"], itertools.repeat("next"))

    def play(item, headless, lesson, trace, recording, viewer):
        played.append(item.scenario if not item.compare else "compare")
        viewer.navigation = next(choices)
        return 0

    monkeypatch.setattr(lesson_cmd, "_play", play)
    from collviz.runtime.scenario_files.lessons import find_lesson

    items = find_lesson("collectives").items
    assert lesson_cmd.main(["collectives"]) == 0
    names = [item.scenario if not item.compare else "compare" for item in items]
    assert played == [names[0], names[1], names[0], names[1], *names[2:]]


def test_the_lesson_ends_on_shift_q_and_goes_on_after_an_interrupted_item_left_with_q(monkeypatch):
    """Item 1 left with q while its run was stopped (status 130, navigation next): the lesson goes
    on; item 2 ended with Q: the lesson ends there, with item 2's status."""
    from collviz.app.commands import lesson as lesson_cmd

    played: list[int] = []

    def play(item, headless, lesson, trace, recording, viewer):
        played.append(viewer.lesson.number)
        viewer.navigation = "next" if viewer.lesson.number == 1 else "end"
        return 130

    monkeypatch.setattr(lesson_cmd, "_play", play)
    assert lesson_cmd.main(["collectives"]) == 130
    assert played == [1, 2]


def test_present_opens_the_lesson_projected_and_p_pressed_in_an_item_holds_for_the_next(monkeypatch, capsys):
    """--present: item 1 opens projected; P there switches it off, so item 2 opens unprojected;
    P in item 2 switches it back on for item 3; Q in item 3 ends the lesson, exit 0, saying so."""
    from collviz.app.commands import lesson as lesson_cmd

    opened: list[bool] = []

    def play(item, headless, lesson, trace, recording, viewer):
        opened.append(viewer.present)
        viewer.present = not viewer.present  # P
        viewer.navigation = "end" if viewer.lesson.number == 3 else "next"
        return 0

    monkeypatch.setattr(lesson_cmd, "_play", play)
    assert lesson_cmd.main(["collectives", "--present"]) == 0
    assert opened == [True, False, True]
    assert capsys.readouterr().err.splitlines()[-1] == "collviz: lesson collectives ended at item 3/8 (Q)"


async def test_p_in_the_viewer_is_kept_in_its_options():
    options = ViewerOptions(present=True)
    app = make_app(events=all_gather_events(), options=options)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        assert app.viewer.has_class("-present")
        await pilot.press("P")
        assert not app.viewer.has_class("-present") and options.present is False
        await pilot.press("P")
        assert options.present is True
        await pilot.press("P")  # off again: the rank palette is process-wide, later tests draw with the default


@pytest.mark.parametrize("size", [(100, 30), (160, 50)])
async def test_a_lesson_header_keeps_its_step_counter_at_100_columns(size):
    """The lesson's words give way to `step k/n` (events given up front open at the last step)."""
    from support.screens import screen_lines

    options = ViewerOptions(lesson=LessonPlace("collectives", 7, 8, "all-gather: every rank ends with every shard"))
    app = make_app(events=all_gather_events(), options=options)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        header = screen_lines(app.export_screenshot())[0].rstrip()
        steps = len(app.event_log.step_ends)
        assert f" · step {steps}/{steps}" in header and "lesson collectives · 7/8" in header, header
        assert len(header) <= size[0]


async def test_a_live_quiz_follows_to_the_next_gate_when_it_arrives_with_the_step_end():
    """The ranks end a step and wait at the next gate in one batch (the fake session hands out
    everything up to the next release at once): a step without a question, and a step once its
    question is answered, are followed to the wait at the next gate, not left at the step's end."""
    from collviz.app.screens.quiz import QuizScreen

    session = FakeSession(all_gather_events(step=True), step=True)
    app = make_app(session=session)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.current_view().state.kind == "waiting")
        await pilot.press("z", "space")  # setup: no question
        await until(pilot, lambda: app.current_view().state.gate == 1)
        assert app.following and app.cursor == len(app.event_log)
        await pilot.press("space")  # the all-gather: asked first
        await until(pilot, lambda: isinstance(app.screen, QuizScreen))
        await pilot.press(*"1 2 3", "enter", "enter")
        await until(pilot, lambda: not isinstance(app.screen, QuizScreen))
        await until(pilot, lambda: app.current_view().state.gate == 2)
        assert app.following and app.cursor == len(app.event_log)
        await pilot.press("q")


async def test_a_quiz_in_a_live_step_through_run_asks_before_the_step_is_shown():
    """z, then space through the gates: once the all-gather step has run on every rank, its
    question comes first; the gathered buffer is shown only after the answer, then the view
    follows the run again."""
    from collviz.app.screens.quiz import QuizScreen

    session = real_session("all-gather", step=True)
    app = make_app(session=session)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.current_view().state.kind == "waiting", tries=1500)
        await pilot.press("z", "space")  # setup: no question, the frame follows
        await until(pilot, lambda: app.current_view().state.gate == 1, tries=1500)
        await pilot.press("space")  # the all-gather
        await until(pilot, lambda: isinstance(app.screen, QuizScreen), tries=1500)
        held = app.current_view()
        assert not app.following and app.event_log.ended_on_every_rank(1)  # asked once every rank has it
        assert held.cursor < app.event_log.step_ends[1]  # the all-gather's result is not on screen yet
        assert not any(b.name == "gathered" and b.moment == "after" for r in held.ranks for b in r.buffers)
        await pilot.press(*"1 2 3", "enter")
        await until(pilot, lambda: app.current_view().step == 1)
        assert any(b.name == "gathered" and b.moment == "after" for b in app.current_view().ranks[0].buffers)
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, QuizScreen))
        assert app.following and len(app.quiz_flow.round.score.grades) == 1
        await pilot.press("q")


async def test_ctrl_down_and_up_scroll_the_narration_and_its_hint_follows():
    """At 100×30 the all-gather's narration runs past its pane: ctrl+↓ scrolls it (a Static never
    scrolled itself, so the key did nothing), as far as its last row and no further, the "↓ more"
    hint going once that row is in view; ctrl+↑ brings back its first row; a step back starts at
    the top of its own text."""
    from collviz.app.widgets.narration import NarrationPane
    from support.screens import screen_lines

    app = make_app(trace=FIXTURES / "all-gather.cvz")
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.loaded)
        await pilot.pause()
        pane = app.screen.query_one(NarrationPane)
        lines = screen_lines(app.export_screenshot())
        assert any("all_gather copies every rank's" in line for line in lines)
        assert not any("as logical movement." in line for line in lines) and pane.border_subtitle == "↓ more: scroll"
        for _ in range(4):  # further than the text goes
            await pilot.press("ctrl+down")
        await pilot.pause()
        lines = screen_lines(app.export_screenshot())
        assert any("as logical movement." in line for line in lines)
        assert not any("all_gather copies every rank's" in line for line in lines)
        await until(pilot, lambda: pane.border_subtitle == "")
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+up")
        await pilot.pause()
        assert any("all_gather copies every rank's" in line for line in screen_lines(app.export_screenshot()))
        await until(pilot, lambda: pane.border_subtitle == "↓ more: scroll")
        await pilot.press("ctrl+down")
        await pilot.press("left")
        await pilot.pause()
        assert pane.rows_above() == 0
