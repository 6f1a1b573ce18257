"""The heatmap's rows where ranks hold different data: two communicators' all-gathers (even ranks
gather the even ranks' shards, odd ranks the odd ones'), one rank whose values differ from its
group's by one value, one rank without the buffer, one rank still running. Each rank's row is
written out by hand; rows of equal data build their cells once; and a line widget drawing pieces
makes the strips (and notes the colours) its lines joined make through ``line_to_strip``."""

from __future__ import annotations

import msgspec
import pytest
from rich.segment import Segment
from rich.style import Style
from textual.app import App, ComposeResult

from collviz.app.model import EventLog, view_at
from collviz.app.widgets import RankHeatmap
from collviz.app.widgets.line_widget import LineWidget, piece
from collviz.app.widgets.render import RANK_COLOURS, DrawnColours, colours_drawn, line_to_strip, rank_style
from collviz.runtime.wire.protocol import ProvenanceRun

from support.synthetic import all_gather_events

EVEN = [0.0, 1.0, 20.0, 21.0, 40.0, 41.0, 60.0, 61.0]
"""What each even rank gathered: two elements from each of ranks 0, 2, 4, 6 (rank r's are 10r, 10r + 1)."""
ODD = [10.0, 11.0, 30.0, 31.0, 50.0, 51.0, 70.0, 71.0]
"""What each odd rank gathered, from ranks 1, 3, 5, 7."""
RANK5 = [*ODD[:-1], 171.0]
"""Rank 5's: its group's but for the last value."""


def _ranks():
    """8 ranks after the all-gather, their outputs as the module docstring says (rank 6 holds no
    output, rank 3 is still running)."""
    events = all_gather_events(8)
    ranks = view_at(EventLog(events), len(events)).ranks

    def output(rank: int, buffer):
        values = EVEN if rank % 2 == 0 else RANK5 if rank == 5 else ODD
        group = range(rank % 2, 8, 2)
        runs = [ProvenanceRun(2 * i, 2, [source]) for i, source in enumerate(group)]
        return msgspec.structs.replace(buffer, values=list(values), provenance=runs, shape=[8])

    views = []
    for view in ranks:
        buffers = tuple(output(view.rank, b) if b.name == "output" else b for b in view.buffers
                        if not (view.rank == 6 and b.name == "output"))
        views.append(view._replace(buffers=buffers, state="running" if view.rank == 3 else view.state))
    return tuple(views)


class _Heatmap(App[None]):
    def compose(self) -> ComposeResult:
        yield RankHeatmap(id="heatmap")


def _cells(values: list[float]) -> str:
    """Values in cells 4 columns wide (the widest, ``171``, and a space), right-aligned."""
    return "".join(f"{int(v):>3} " for v in values)


def _runs(strip, start: int, end: int) -> list[tuple[str, str]]:
    """(text, background) of the segments of ``strip`` within columns ``start``–``end``."""
    found, column = [], 0
    for segment in strip:
        if start <= column < end:
            found.append((segment.text, segment.style.bgcolor.name))
        column += len(segment.text)
    return found


def _group_colours(rank: int) -> list[str]:
    """The colours of the ranks whose shards ``rank``'s communicator gathered, in order."""
    return [RANK_COLOURS[source] for source in range(rank % 2, 8, 2)]


@pytest.mark.parametrize("width", [40, 30])
async def test_rows_of_ranks_holding_different_data_each_show_their_own(width: int, monkeypatch):
    built = []
    body = RankHeatmap._body
    monkeypatch.setattr(RankHeatmap, "_body", staticmethod(lambda rank, *args: built.append(rank.rank) or body(rank, *args)))
    app = _Heatmap()
    async with app.run_test(size=(60, 12)) as pilot:
        pane = app.query_one(RankHeatmap)
        pane.styles.width, pane.styles.height = width, 9
        await pilot.pause()
        pane.show(_ranks())
        await pilot.pause()
        assert tuple(pane.content_size) == (width, 9)
        strips = [pane.render_line(y) for y in range(9)]
        text = ["".join(segment.text for segment in strip) for strip in strips]
        marks = {rank: "● " if rank == 3 else "✓ " for rank in range(8)}
        if width == 40:  # every row's 8 values fit, in cells 4 wide: 5 + 32 columns, padded to 40
            rows = {rank: _cells(EVEN if rank % 2 == 0 else RANK5 if rank == 5 else ODD) for rank in range(8)}
            rows[6] = "—"
            assert text == [f"r{rank} {marks[rank]}{rows[rank]}".ljust(40) for rank in range(8)] + [" " * 40]
            for rank in (0, 1, 5):  # a segment per run of two cells, in the colour of the rank they came from
                cells = rows[rank]
                assert _runs(strips[rank], 5, 37) == [(cells[8 * i:8 * i + 8], colour)
                                                      for i, colour in enumerate(_group_colours(rank))]
        else:  # 25 columns after the label: the range, and 16 cells before it (two per element)
            ranges = {rank: "0–61" if rank % 2 == 0 else "10–171" if rank == 5 else "10–71" for rank in range(8)}
            rows = {rank: " " * 16 + f" {ranges[rank]}" for rank in range(8)}
            rows[6] = "—"
            assert text == [f"r{rank} {marks[rank]}{rows[rank]}".ljust(30) for rank in range(8)] + [" " * 30]
            for rank in (0, 1, 5):
                assert _runs(strips[rank], 5, 21) == [("    ", colour) for colour in _group_colours(rank)]
        assert pane.colours == DrawnColours(ranks=frozenset(range(8)))
        # the strips are those of the lines joined (and a blank under them)
        width, height = pane.content_size
        base = pane.visual_style.rich_style
        built.clear()
        assert strips == [line_to_strip(line, width, base) for line in pane.build_lines(width, height)] + [strips[-1]]
        # the cells of equal data were built once: rank 0's for 2 and 4, rank 1's for 3 and 7
        assert sorted(built) == [0, 1, 5, 6]


class _Drawn(LineWidget):
    """Draws :data:`_LINES`, as pieces where ``pieces``, else as lines; reports colours."""

    REPORTS_COLOURS = True

    def __init__(self, pieces: bool) -> None:
        super().__init__()
        self.pieces = pieces

    def build_lines(self, width: int, height: int) -> list[list[Segment]]:
        return [[segment for part in line for segment in part] for line in _LINES]

    def build_pieces(self, width: int, height: int):
        if not self.pieces:
            return None
        shared = {id(part): piece(part) for line in _LINES for part in line}
        return [[shared[id(part)] for part in line] for line in _LINES]


_CELLS = (Segment("  ", rank_style(1)), Segment("  ", rank_style(2)))
_LABEL = (Segment("r1 ", Style(bold=True)), Segment("", None, ((1,),)))  # a control segment
_LINES = [
    [_LABEL, _CELLS, (Segment(" 3.5"),)],  # 11 cells
    [_LABEL, _CELLS, _CELLS],  # 11 cells: the same piece twice on a line
    [_CELLS, (Segment("x" * 20, Style(italic=True)),)],  # 24 cells: wider than the widget, cut
    [(Segment("宽字"),), _CELLS],  # wide characters: 8 cells
]


class _Both(App[None]):
    CSS = "_Drawn { width: 16; height: 5; }"

    def compose(self) -> ComposeResult:
        yield _Drawn(pieces=True)
        yield _Drawn(pieces=False)


async def test_lines_drawn_as_pieces_make_the_strips_and_colours_of_the_lines_joined():
    app = _Both()
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        pieces, lines = app.query(_Drawn)
        assert tuple(pieces.content_size) == (16, 5)
        made = [pieces.render_line(y) for y in range(5)]
        assert made == [lines.render_line(y) for y in range(5)]
        assert [strip.cell_length for strip in made] == [16] * 5
        assert "".join(segment.text for segment in made[2]) == "    " + "x" * 12
        assert pieces.colours == lines.colours == colours_drawn(lines.build_lines(16, 5))
        assert pieces.colours == DrawnColours(ranks=frozenset({1, 2}))
