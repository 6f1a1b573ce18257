"""``collviz lesson collectives --present``, read from the rendered screen at 100×30 and 160×50:
the lesson command plays its items through the real viewer (replayed from recorded items, each
driven under Pilot); the first item opens projected, ``P`` there holds for the next item, the
header keeps ``step k/n`` inside the screen's width, and ``Q`` ends the lesson with exit 0 and
one plain line, no signal story.

The items' values are worked out here by hand from the scenarios' inputs: broadcast on 3 ranks
from rank 0 holding 1 2 3 (the others 0 0 0); reduce (sum) to rank 0 of 1 2 3, 4 5 6, 7 8 9.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from collviz.app.app import make_app
from collviz.app.commands import lesson as lesson_cmd

from support.app import until
from support.cli import run_cli
from support.screens import screen_lines

ITEMS = ("broadcast", "reduce")
"""The lesson's first two items, recorded as ``collviz lesson --record`` names them."""


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lesson's items 1 and 2 on gloo ranks (each scenario's own world size), recorded once."""
    folder = tmp_path_factory.mktemp("lesson-traces")
    for number, name in enumerate(ITEMS, start=1):
        path = folder / f"{number:02d}-{name}.cvz"
        result = run_cli(name, "--backend", "gloo", "--headless", "--record", str(path), timeout=240)
        assert result.returncode == 0, f"{name} failed:\n{result.stdout[-2000:]}\n{result.stderr}"
    return folder


def _panel_rows(lines: list[str]) -> list[list[str]]:
    """The words of every pane row: the text between two of a pane's side edges."""
    return [cell.split() for line in lines for cell in re.findall(r"[│┃╏]([^│┃╏]*)(?=[│┃╏])", line)]


@pytest.mark.parametrize("size", [(100, 30), (160, 50)], ids=lambda size: f"{size[0]}x{size[1]}")
def test_a_projected_lesson_keeps_its_counter_p_holds_and_shift_q_leaves_plainly(traces, size, monkeypatch, capsys):
    keys = [["P", "q"], ["Q"]]  # item 1: P (projector off), q (next item); item 2: Q (end the lesson)
    seen: list[tuple[bool, list[str]]] = []

    def run_viewer(*, trace: Path | None = None, quiz: bool = False, options=None, **_: object) -> int:
        app = make_app(trace=trace, quiz=quiz, options=options, mask_volatile=True)

        async def drive() -> None:
            async with app.run_test(size=size) as pilot:
                await until(pilot, lambda: app.loaded)
                for _ in range(3):
                    await pilot.pause(0.05)
                seen.append((app.viewer.has_class("-present"), screen_lines(app.export_screenshot())))
                await pilot.press(*keys[len(seen) - 1])

        asyncio.run(drive())
        return app.return_code if app.return_code is not None else app.exit_code()

    monkeypatch.setattr("collviz.app.app.run_viewer", run_viewer)
    monkeypatch.setattr("collviz.app.commands.playing.no_terminal", lambda: None)  # Pilot is the terminal
    assert lesson_cmd.main(["collectives", "--traces", str(traces), "--present"]) == 0
    (first_present, first), (second_present, second) = seen
    assert first_present and not second_present  # opened projected; P in item 1 held for item 2
    for lines, number, name in ((first, 1, "broadcast"), (second, 2, "reduce")):
        header = lines[0].rstrip()
        # each opens at its collective: setup, the call, the release is step 2 of 3
        assert f"lesson collectives · {number}/8" in header and "· step 2/3" in header, header
        assert len(header) <= size[0], header
        assert f"collviz {name}" in header
    rows = _panel_rows(first)
    # rank 0's x, unchanged, once; ranks 1 and 2 before (0 0 0) and after (rank 0's 1 2 3)
    assert rows.count(["1", "2", "3"]) == 3 and rows.count(["0", "0", "0"]) == 2, rows
    shown = "\n".join(first)
    assert "S = 24 B" in shown and shown.count("broadcast 24 B→24 B") == 3  # 3 int64, on every rank
    assert "24 B r0[0:3]→r1[0:3]" in shown and "24 B r0[0:3]→r2[0:3]" in shown
    assert ["12", "15", "18"] in _panel_rows(second)  # rank 0: 1+4+7, 2+5+8, 3+6+9
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "collviz: lesson collectives ended at item 2/8 (Q)"
    assert "SIGINT" not in err and "interrupted" not in err
