"""Every demo opens where its lesson starts: a finished run, live or replayed, shows its first step
that moves data (a ring all-reduce's hop 1, a pipeline's first microbatch), read from the screen;
] and [ step from one such step to the next."""

from __future__ import annotations

from pathlib import Path

import pytest

from collviz.app.app import make_app

from support.app import until
from support.recordings import ScenarioRuns
from support.screens import screen_lines

STAGES = MICROBATCHES = 4
"""pp on 4 ranks: one stage per rank, 4 microbatches (its narration's GPipe schedule)."""


@pytest.fixture(scope="module")
def recorded(scenario_runs: ScenarioRuns) -> dict[str, Path]:
    """ring-all-reduce and pp on 4 gloo ranks, recorded once per session."""
    return {name: scenario_runs(name).path for name in ("ring-all-reduce", "pp")}


@pytest.mark.parametrize("size", [(100, 30), (160, 50)])
async def test_a_ring_all_reduce_opens_at_hop_1_not_at_its_comparison(recorded, size):
    app = make_app(trace=recorded["ring-all-reduce"])
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.loaded)
        await pilot.pause()
        # setup, six hops, the dist.all_reduce comparison: hop 1 is the second of 8 steps
        assert app.cursor == app.event_log.step_ends[1]
        header = screen_lines(app.export_screenshot())[0]
        assert "step 2/8 hop 1/6" in header, header
        await pilot.press("right")
        assert "step 3/8 hop 2/6" in screen_lines(app.export_screenshot())[0]


@pytest.mark.parametrize("size", [(100, 30), (160, 50)])
async def test_pp_opens_at_its_first_microbatch(recorded, size):
    app = make_app(trace=recorded["pp"])
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.loaded)
        await pilot.pause()
        assert app.cursor == app.event_log.step_ends[1] and app.navigator.pieces == 1
        lines = screen_lines(app.export_screenshot())
        assert "step 2/5 GPipe" in lines[0]
        pieces = 2 * STAGES * MICROBATCHES  # a forward and a backward of each microbatch on each stage
        assert any(f"piece 1 of {pieces}: r0 forward of microbatch 0" in line for line in lines), lines


async def test_a_replay_asked_to_quiz_opens_at_its_first_step_not_its_first_exchange(recorded):
    """--quiz asks every step from the first, so it opens at the first step's end (setup)."""
    app = make_app(trace=recorded["ring-all-reduce"], quiz=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.loaded)
        assert app.cursor == app.event_log.step_ends[0]


async def test_brackets_go_to_the_next_and_previous_step_that_moves_data(recorded):
    """In pp, only step 2 (GPipe) moves data: ] from it says there is none later and stays; from
    the start ([home]) ] reaches it; [ from the last step goes back to it. In the ring, ] walks the
    hops one by one and on to the comparison."""
    app = make_app(trace=recorded["pp"])
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.loaded)
        gpipe = app.event_log.step_ends[1]
        await pilot.press("right_square_bracket")
        assert app.cursor == gpipe
        await pilot.press("home", "right_square_bracket")
        assert app.cursor == gpipe and app.navigator.pieces == 1  # from its first microbatch, as → lands
        await pilot.press("end", "left_square_bracket")
        assert app.cursor == gpipe
    app = make_app(trace=recorded["ring-all-reduce"])
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.loaded)
        headers = []
        for _ in range(7):
            await pilot.press("right_square_bracket")
            headers.append(screen_lines(app.export_screenshot())[0])
        expected = [f"step {k + 2}/8 hop {k + 1}/6" for k in range(1, 6)] + ["step 8/8 compare with dist.all_reduce"] * 2
        assert [e in h for e, h in zip(expected, headers)] == [True] * 7, headers
        await pilot.press("question_mark")
        await pilot.pause()
        helped = screen_lines(app.export_screenshot())
        assert any("the next step that moves data" in line for line in helped), helped
