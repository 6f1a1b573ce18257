"""The viewer on imported artifacts: every step of a dump or trace fits the smallest terminal, and
the panes say what an artifact does not hold (transfers, durations, memory) and which call each
rank is still inside.

The dumps and traces are real (the ``job_artifacts`` fixture: 4 gloo ranks, :mod:`support.artifact_jobs`).
"""

from __future__ import annotations

import pytest

from collviz.app.app import make_app
from collviz.runtime.sources import open_artifacts

from support import artifact_jobs as jobs
from support.app import until
from support.pane_rows import pane_rows
from support.artifact_imports import FLOAT32


@pytest.mark.parametrize("present", [False, True], ids=["plain", "present"])
@pytest.mark.parametrize("name", ["healthy", "hang", "profile"])
async def test_every_step_of_an_import_at_100x30_shows_its_call_s_figures(job_artifacts, name, present):
    """Flight Recorder dumps (healthy, hung) and profiler traces, at the smallest size, plain and
    in the projector layout: each step's call shows S (and t, algbw, busbw where the artifact has
    times) on the screen."""
    from collviz.app.viewer_options import ViewerOptions
    from support.screens import walk_every_step

    where = {"healthy": job_artifacts["healthy"] / "fr" / "json", "hang": job_artifacts["hang"] / "fr" / "pickle",
             "profile": job_artifacts["healthy"] / "profile"}[name]
    run = open_artifacts([where])
    walk = await walk_every_step(make_app(events=run.events, options=ViewerOptions(present=present)), (100, 30))
    assert walk.hidden == [] and walk.cut == [] and walk.checked >= len(jobs.HANG_CALLS if name == "hang" else
                                                                         jobs.HEALTHY_CALLS)


async def _last_step_panes(events, back: int = 0) -> dict[str, str]:
    """The transfers pane's title and the text of the transfers, cost and memory panes at the last
    step, or ``back`` steps before it (each pane's text on one line)."""
    app = make_app(events=events)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.loaded)
        await pilot.press("end", *["left"] * back)
        await pilot.pause()
        await pilot.pause()
        panes = {"transfers": " ".join(" ".join(pane_rows(app.screen.query_one("#transfers"))).split()),
                 "cost": " ".join(app.screen.query_one("#cost").render().plain.split())}
        panes["memory"] = "".join(segment.text for segment in app.screen.query_one("#memory").build_lines(150, 8)[0])
        panes["transfers title"] = str(app.screen.query_one("#transfers").border_title)
        return panes


async def test_the_viewer_says_what_an_artifact_does_not_hold(job_artifacts):
    """The panes name what a dump lacks (transfers, durations, memory) instead of showing none, and
    a hung step's cost pane names the call the waiting ranks are still inside."""
    events = open_artifacts([job_artifacts["hang"] / "fr" / "json"]).events
    panes = await _last_step_panes(events)
    assert panes["transfers title"] == "transfers · not recorded"
    assert "no values, provenance or transfers" in panes["transfers"] and "no transfers in this step" not in panes["transfers"]
    waiting = ", ".join(f"r{r}" for r in range(jobs.WORLD) if r != jobs.SKIPPER)
    assert f"all_reduce #{len(jobs.HANG_CALLS) + 1} has not ended on {waiting}: no cost" in panes["cost"]
    assert panes["memory"] == "memory not recorded: the imported artifact holds none"
    cost = (await _last_step_panes(events, back=1))["cost"]  # the skipper's last call, completed everywhere
    gathered = jobs.ELEMENTS * FLOAT32 * jobs.WORLD  # the skipper's last call: an all_gather of every input
    assert f"S = {gathered} B · t not recorded" in cost  # the headline says t is missing, the details why
    assert "t: not recorded: a Flight Recorder dump records durations only with timing on" in cost
    assert "t = " not in cost  # no duration job_artifacts up from the phase's edges


async def test_ranks_inside_different_calls_are_named_by_call(job_artifacts):
    """The mismatch job's last step: the odd rank broadcasts where the others all-reduce."""
    cost = (await _last_step_panes(open_artifacts([job_artifacts["mismatch"] / "fr" / "json"]).events))["cost"]
    others = ", ".join(f"r{r}" for r in range(jobs.WORLD) if r != jobs.ODD_RANK)
    assert f"calls not ended: all_reduce #3 on {others}; broadcast #3 on r{jobs.ODD_RANK}: no cost" in cost
