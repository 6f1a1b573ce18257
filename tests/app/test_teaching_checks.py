"""A check against teaching text reads as teaching: all-gather's followup compares torch's queries
with the lesson's own worked numbers (shipped in its scenario file), and the screen names no file
a class does not have."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from collviz.app.app import make_app

from support.app import until
from support.paths import SCENARIOS
from support.recordings import ScenarioRuns
from support.screens import screen_lines


@pytest.fixture(scope="module")
def all_gather(scenario_runs: ScenarioRuns) -> Path:
    """all-gather on 4 gloo ranks, recorded once per session."""
    return scenario_runs("all-gather").path


def test_the_lessons_worked_queries_are_w_query_times_the_embeddings_transposed():
    """The shipped numbers, checked here by a reference that imports nothing from collviz."""
    data = tomllib.loads((SCENARIOS / "all-gather.toml").read_text())
    w_query = [row for shard in next(e for e in data["example"] if e["gpus"] == 4)["inputs"] for row in shard]
    embeddings = data["followup"]["right"]
    worked = [[round(sum(a * b for a, b in zip(row, token)), 2) for token in embeddings] for row in w_query]
    assert worked == data["followup"]["note_result"] and data["followup"]["note_source"] == "the lesson"


async def test_all_gather_s_followup_shows_the_lesson_s_check_passing_and_names_no_file(all_gather):
    app = make_app(trace=all_gather)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.loaded)
        await pilot.press("right")  # opened at the all-gather (step 2); its followup is step 3
        await pilot.pause()
        lines = screen_lines(app.export_screenshot())
        assert "step 3/4 followup: queries on rank 0" in lines[0]
        assert any("✓ r0 the lesson's queries" in line for line in lines), lines
        assert not any("✗" in line or ".md" in line for line in lines), lines
