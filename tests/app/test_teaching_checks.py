"""A check against teaching text reads as teaching: all-gather's followup compares torch's queries
with the lesson's own worked numbers (shipped in its scenario file), and the screen names no file
a class does not have."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from collviz.app.app import make_app
from collviz.app.widgets.narration import narration_text
from collviz.runtime.wire.protocol import Check

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


@pytest.mark.parametrize("size", [(100, 30), (160, 50)], ids=lambda size: f"{size[0]}x{size[1]}")
async def test_all_gather_s_followup_shows_the_lesson_s_check_passing_and_names_no_file(all_gather, size):
    """The check, the step's verdict, is on the screen without scrolling at 100×30 too (it comes
    before the narration's explanation): 4×3 = 12 queries, every one agreeing."""
    app = make_app(trace=all_gather)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.loaded)
        await pilot.press("right")  # opened at the all-gather (step 2); its followup is step 3
        await pilot.pause()
        lines = screen_lines(app.export_screenshot())
        assert "step 3/4 followup: queries on rank 0" in lines[0]
        side = [found.group(1).strip() for line in lines if (found := re.search(r"│([^│]*)│\s*$", line))]
        shown = " ".join(" ".join(side).split())  # the rightmost pane's text, rewrapped
        assert "✓ r0 the lesson's queries all 12 numbers agree with torch's" in shown, lines
        assert not any("✗" in line or ".md" in line for line in lines), lines


def _check(rank: int, ok: bool = True) -> Check:
    return Check(run="r", rank=rank, seq=0, t_ns=0, phase=1, name="sums", ok=ok, detail="4 of 4 right" if ok else "1 wrong")


@pytest.mark.parametrize(("ranks", "failed", "expected"), [
    ([0], [], ["✓ r0 sums 4 of 4 right", "", "EXPLAIN"]),
    ([0, 1, 2, 3], [], ["✓ 4 checks pass (listed below)", "", "EXPLAIN", "", *(f"✓ r{r} sums 4 of 4 right" for r in range(4))]),
    ([0, 1, 2, 3], [2], ["✗ r2 sums 1 wrong", "✓ 3 checks pass (listed below)", "", "EXPLAIN", "",
                         *(f"✓ r{r} sums 4 of 4 right" for r in (0, 1, 3))]),
    ([0, 1], [1], ["✗ r1 sums 1 wrong", "✓ r0 sums 4 of 4 right", "", "EXPLAIN"]),
])
def test_the_steps_verdict_comes_before_its_explanation(ranks, failed, expected):
    """A lone check, or a failure, above the explanation; more than two passing ones counted there
    in one line and listed after it (a 64-rank step's checks would push the explanation away)."""
    checks = [_check(rank, ok=rank not in failed) for rank in ranks]
    assert narration_text("EXPLAIN", checks).plain.split("\n") == expected
