"""At 100×30, the smallest size the viewer draws, no number loses its unit: every step of every
fixture trace is walked and the screen's text searched for a number followed by a cut unit
(``8.38 m`` for ms, ``211.8 K…`` for KiB) at a pane's edge or before an ellipsis."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from collviz.app.app import make_app
from test_app import _until

FIXTURES = Path(__file__).parent / "fixtures"
TRACES = ("all-gather", "reduce-scatter", "all-reduce", "all-gather-ring", "ring-all-reduce", "desync", "hang",
          "moe", "pp", "fsdp-tiny")
UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "ns", "µs", "ms", "s", "B/s", "kB/s", "MB/s", "GB/s", "TB/s")
CUT_UNITS = {unit[:i] for unit in UNITS for i in range(1, len(unit))} - set(UNITS)
"""Beginnings of a unit that are not a unit themselves: what a cut unit looks like."""
AT_AN_EDGE = re.compile(r"\d(?:\.\d+)? ?([A-Za-zµ/]+)(?:…|$|(?=[│╮╯╭╰┃▏]))")


def screen_lines(svg: str) -> list[str]:
    """The screen's text, one string per row, from Textual's SVG screenshot."""
    rows: dict[float, list[tuple[float, str]]] = {}
    for attributes, body in re.findall(r"<text([^>]*)>(.*?)</text>", svg):
        x, y = re.search(r'x="([\d.]+)"', attributes), re.search(r'y="([\d.]+)"', attributes)
        if x and y:
            text = html.unescape(re.sub(r"<[^>]+>", "", body)).replace("\xa0", " ")
            rows.setdefault(float(y.group(1)), []).append((float(x.group(1)), text))
    return ["".join(text for _, text in sorted(parts)) for _, parts in sorted(rows.items())]


def cut_units(lines: list[str]) -> list[str]:
    """The lines where a number's unit is cut."""
    return [line.strip() for line in lines for match in AT_AN_EDGE.finditer(line.rstrip())
            if match.group(1) in CUT_UNITS]


def test_the_search_finds_a_cut_unit_and_passes_whole_ones():
    assert cut_units(["│all_gather 16 B→64 B 8.38 m│"]) == ["│all_gather 16 B→64 B 8.38 m│"]
    assert cut_units(["step 3/5 AdamW (211.8 K…"]) and cut_units(["busbw 1.2 GB/│"])
    assert cut_units(["busbw 1.2 GB/s│"]) == []
    assert cut_units(["│all_gather 16 B→64 B 8.38 ms│", "t = 4.5 ms", "12.8 KiB in → 3.2 KiB out"]) == []


@pytest.mark.parametrize("name", TRACES)
async def test_every_step_at_100x30_keeps_every_unit_whole(name):
    app = make_app(trace=FIXTURES / f"{name}.cvz")
    found: list[str] = []
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(400):
            if app.loaded:
                break
            await pilot.pause(0.05)
        await pilot.press("home")
        for _ in range(len(app.event_log.step_ends) + 1):
            await pilot.pause()
            found += [f"step {app.current_view().step + 1}: {line}" for line in cut_units(screen_lines(
                app.export_screenshot()))]
            await pilot.press("right")
        await pilot.press("q")
    assert found == []


@pytest.mark.parametrize(("ranks", "size"), [(4, (100, 30)), (64, (100, 30)), (8, (100, 32)), (64, (160, 50))])
async def test_every_side_pane_fits_the_side_column(ranks, size):
    """The narration, cost and transfers lie inside the column that holds them, each with a line of
    its own text at least, and the legend too where it is shown (a short screen once laid the
    transfers and the legend out below its edge, where they were never seen)."""
    from fixtures.synthetic import all_gather_events

    app = make_app(events=all_gather_events(ranks), mask_volatile=True)
    async with app.run_test(size=size) as pilot:
        await _until(pilot, lambda: app.loaded)
        await pilot.press("end")
        await pilot.pause()
        side = app.screen.query_one("#side").region
        for name, least in (("narration", 3), ("cost", 3), ("transfers", 3), ("legend", 1)):
            pane = app.screen.query_one(f"#{name}")
            if name == "legend" and not pane.display:
                continue
            assert pane.region.height >= least and side.contains_region(pane.region), (name, pane.region, side)


def test_the_side_column_is_shared_by_priority():
    """Worked by hand: the cost pane keeps its figures (9 rows from 24, 7 from 18, else 5), the
    legend goes when the narration and transfers would have fewer than 9 rows beside it, then the
    transfers take a third of the rest (at least 4 where 9 are left)."""
    from collviz.app.widgets.side_column import SideShares, side_shares

    assert side_shares(20, 4) == SideShares(narration=5, cost=7, transfers=4, legend=4)  # 100x30, 4 ranks
    assert side_shares(20, 5) == SideShares(narration=9, cost=7, transfers=4, legend=0)  # 8 ranks' longer legend
    assert side_shares(38, 4) == SideShares(narration=17, cost=9, transfers=8, legend=4)  # 160x50
    assert side_shares(12, 4) == SideShares(narration=4, cost=5, transfers=3, legend=0)  # the pipeline pane shown
    assert side_shares(20, 4, with_cost=False) == SideShares(narration=11, cost=0, transfers=5, legend=4)
    for height in range(8, 81):
        for legend in range(1, 9):
            shares = side_shares(height, legend)
            assert shares.narration + shares.cost + shares.transfers + shares.legend == height
            assert min(shares.narration, shares.transfers) >= 0
