"""What the screen tests share: the screen's text read from Textual's SVG screenshot, numbers whose
unit a pane's edge cut, the figures a call's cost headline must show, and a walk over every step
of a viewer that collects what it missed.

Every expected figure is written here from the call's own numbers, never read from the pane.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from collviz.app.app import CollvizApp
from collviz.app.model import CallCost
from collviz.app.theme import palette_for
from collviz.app.widgets.cost import format_seconds
from collviz.app.widgets.render import format_bytes
from collviz.runtime.observation.metrics import human_rate

from support.app import until

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


async def screens_after(app: CollvizApp, size: tuple[int, int], keys: list[list[str]]) -> list[list[str]]:
    """The screen's rows (blank runs dropped, as the screenshot writes them) after each key list
    pressed in ``app`` run at ``size``, once it has loaded."""
    shown = []
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.loaded, tries=500)
        for pressed in keys:
            await pilot.press(*pressed)
            for _ in range(3):
                await pilot.pause(0.05)
            shown.append(screen_lines(app.export_screenshot()))
    return shown


def cut_units(lines: list[str]) -> list[str]:
    """The lines where a number's unit is cut."""
    return [line.strip() for line in lines for match in AT_AN_EDGE.finditer(line.rstrip())
            if match.group(1) in CUT_UNITS]


def headline(cost: CallCost) -> list[str]:
    """The figures a call's headline shows, as the cost pane writes each number, the bus factor
    written out here from the op and n (nccl-tests: 2(n−1)/n for all-reduce, 1 for broadcast and
    reduce, (n−1)/n for the rest): S, and t, algbw and busbw where the call has them."""
    n = cost.ranks
    factor = {"all_reduce": f"2·{n - 1}/{n}", "broadcast": "1", "reduce": "1"}.get(cost.op, f"{n - 1}/{n}")
    figures = [f"S = {format_bytes(cost.algo_bytes)}"]
    if cost.seconds is not None:
        figures.append(f"t = {format_seconds(cost.seconds)}")
    if cost.rate is not None:  # busbw's figure may go on a line of its own, whole
        figures += [f"algbw = S/t = {human_rate(cost.rate.algbw)}", f"busbw = algbw × {factor}",
                    f"= {human_rate(cost.rate.busbw)}"]
    return figures


@dataclass
class Walk:
    """What a walk over every step found: ``cut`` lines (a unit cut at an edge), ``hidden``
    headline figures not on the screen, and how many figures it looked for (``checked``)."""

    cut: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    checked: int = 0


async def walk_every_step(app: CollvizApp, size: tuple[int, int]) -> Walk:
    """Run ``app`` at ``size``, go to its start, and at every step look at the rendered screen for
    each figure of the step's latest call (whitespace aside: the screenshot drops blank runs) and
    for cut units. The rank palette is left as the default theme has it (the projector's is
    module state)."""
    walk = Walk()
    async with app.run_test(size=size) as pilot:
        for _ in range(500):
            if app.loaded:
                break
            await pilot.pause(0.02)
        assert app.loaded, "the events did not load"
        await pilot.press("home")
        for _ in range(len(app.event_log.step_ends) + 1):
            await pilot.pause()
            view = app.current_view()
            lines = screen_lines(app.export_screenshot())
            walk.cut += [f"step {view.step + 1}: {line}" for line in cut_units(lines)]
            screen = ["".join(line.split()) for line in lines]
            for figure in headline(view.costs[-1]) if view.costs else []:
                walk.checked += 1
                if not any("".join(figure.split()) in line for line in screen):
                    walk.hidden.append(f"step {view.step + 1}: {figure}")
            await pilot.press("right")
        await pilot.press("q")
    palette_for("textual-dark")
    return walk
