"""The compact view of many ranks: one row per rank, a buffer's elements as provenance-coloured cells.

Above :data:`~collviz.app.screens.viewer.COMPACT_ABOVE` ranks a panel per rank cannot show
anything readable, so every rank gets one row: its number, the chosen buffer as a heatmap (each
cell a range of elements, coloured by the rank(s) whose data it holds, as in the panels and with
the same legend), and its status. Rows that do not fit one column continue in the next. The
buffer shown is the one most recently updated in the step (ties: the largest); the title names it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from functools import lru_cache
from itertools import repeat
from operator import itemgetter

import msgspec
from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.message import Message

from collviz.runtime.wire.protocol import Buffer, ProvenanceRun

from ..model import RankView
from .line_widget import LineWidget
from .rank_panel import collective_line
from .render import DIM, PLACEHOLDER_STYLE, Line, fit_cells, palette, provenance_style, rank_label_style

__all__ = ["RankHeatmap", "shown_buffer", "heatmap_cells"]

_STATE_MARKS = {"pending": ("·", DIM), "running": ("●", Style(color="green")), "waiting": ("⏸", Style(bold=True)),
                "done": ("✓", Style(color="cyan")), "error": ("✗", Style(color="red", bold=True))}
_SAID = ("error", "waiting")
"""States whose status a row without the shown buffer says."""
_NOT_OBSERVED = Style(color="#9a9a9a", bgcolor="#3a3a3a")
_TEXT = itemgetter(0)
"""A segment's text."""
_GAP = 2
"""Columns between two columns of rows."""
MAX_ROW_HEIGHT = 3
"""Most lines one rank's row grows to when the pane has room."""


def shown_buffer(ranks: Sequence[RankView]) -> str | None:
    """The buffer name the heatmap shows: updated in the latest phase by any rank, largest first."""
    best: tuple[int, int, str] | None = None
    for rank in ranks:
        for buffer in rank.buffers:
            size = len(buffer.values) if buffer.values is not None else _numel(buffer.shape)
            key = (buffer.phase, size, buffer.name)
            if best is None or key[:2] > best[:2]:
                best = key
    return best[2] if best else None


def _numel(shape: Sequence[int]) -> int:
    total = 1
    for dim in shape:
        total *= dim
    return total


def _row_input(rank: RankView, name: str | None) -> tuple:
    """Everything :meth:`RankHeatmap._row` draws ``rank``'s row from (the shown buffer's size and
    provenance, not its values), to compare with the last frame's."""
    buffer = next((b for b in rank.buffers if b.name == name), None)
    status = rank.status if rank.state in _SAID else ""  # a row names no other state's status
    if buffer is None:
        return rank.rank, rank.state, status, rank.collective  # the row may give the rank's call
    count = len(buffer.values) if buffer.values is not None else _numel(buffer.shape)
    return rank.rank, rank.state, status, count, buffer.provenance


def heatmap_cells(buffer: Buffer, width: int) -> Line:
    """``width`` cells for ``buffer``: cell c shows the provenance of element c·n/width (n elements;
    with fewer elements than columns each element spans a whole number of cells)."""
    count = len(buffer.values) if buffer.values is not None else _numel(buffer.shape)
    cells = min(width, count) if count >= width else count * (width // count) if count else 0
    if not cells:
        return [Segment("(empty)", DIM)]
    if buffer.provenance is None:
        return [Segment(" " * cells, _NOT_OBSERVED)]
    return list(_provenance_cells(_encoded_runs(buffer.provenance), count, cells, palette()))


_encode_runs = msgspec.msgpack.Encoder().encode
_decode_runs = msgspec.msgpack.Decoder(list[ProvenanceRun]).decode
_last_encoded: tuple[list[ProvenanceRun] | None, bytes] = (None, b"")
"""The provenance list encoded last, held (so its identity is not reused), and its encoding."""


def _encoded_runs(provenance: list[ProvenanceRun]) -> bytes:
    """``provenance`` encoded (the memo key of its cells); the same list as the last call's is not
    encoded again: a stored trace's Buffers share equal provenances (:mod:`~collviz.runtime.wire.stored`),
    so a 64-rank frame's rows encode one list, not 64 (7 µs each)."""
    global _last_encoded
    held, encoded = _last_encoded
    if held is not provenance:
        encoded = _encode_runs(provenance)
        _last_encoded = (provenance, encoded)
    return encoded


@lru_cache(maxsize=4096)
def _provenance_cells(runs: bytes, count: int, cells: int, colours: tuple[str, ...]) -> tuple[Segment, ...]:
    """The cells of a buffer of ``count`` elements whose provenance encodes to ``runs``.

    Memoised by that encoding (a few microseconds for 64 runs): 64 ranks' rows cost 4,000 cell
    lookups a frame, and a step's rows repeat those of earlier steps and frames. ``colours`` (the
    palette in use) is part of the key, as the cells' styles follow it.
    """
    decoded = _decode_runs(runs)
    starts = [run.start for run in decoded]
    line: Line = []
    for cell in range(cells):
        element = cell * count // cells
        at = bisect_right(starts, element) - 1
        run = decoded[at] if at >= 0 else None
        inside = run is not None and element < run.start + run.length
        style = provenance_style(run.ranks) if run is not None and inside else PLACEHOLDER_STYLE
        if line and line[-1].style is style:
            line[-1] = Segment(line[-1].text + " ", style)
        else:
            line.append(Segment(" ", style))
    return tuple(line)


class RankHeatmap(LineWidget):
    """Every rank on one row; clicking a row asks for that rank's detail."""

    REPORTS_COLOURS = True

    class Selected(Message):
        """The user clicked the row of ``rank``."""

        def __init__(self, rank: int) -> None:
            super().__init__()
            self.rank = rank

    def __init__(self, *, mask_volatile: bool = False, **kwargs: object) -> None:
        """``mask_volatile``: calls' times drawn masked (snapshot tests)."""
        super().__init__(**kwargs)
        self.mask_volatile = mask_volatile
        self._ranks: tuple[RankView, ...] = ()
        self._layout: tuple[int, int, int] = (1, 1, 1)  # (ranks per column, column width, lines per rank)
        self._drawn: tuple | None = None

    def show(self, ranks: tuple[RankView, ...]) -> None:
        """Display the ranks at the cursor; nothing is rebuilt when the rows would be the last frame's
        (a live run's ranks report new Buffers of the same provenance every call, and a run's
        steps often repeat: at 64 ranks the rows cost 1.4 ms a frame)."""
        self._ranks = ranks
        name = shown_buffer(ranks)
        title = (f"{len(ranks)} ranks · {name} · cell colour = whose data it holds · click or 0–9: a rank's detail"
                 if name else f"{len(ranks)} ranks")
        if str(self.border_title) != title:
            self.border_title = Text(title)
        drawn = (self.content_size, palette(), name, tuple(map(_row_input, ranks, repeat(name))))
        if drawn != self._drawn:
            self._drawn = drawn
            self.lines_changed()

    def build_lines(self, width: int, height: int) -> list[Line]:
        """Rows of ranks, in as many columns as needed to fit ``height``."""
        ranks = self._ranks
        if not ranks:
            return [[Segment("waiting for the workers…", DIM)]]
        columns = max(1, -(-len(ranks) // max(1, height)))
        per_column = -(-len(ranks) // columns)
        tall = max(1, min(MAX_ROW_HEIGHT, height // per_column))
        column_width = max(12, (width - _GAP * (columns - 1)) // columns)
        self._layout = (per_column, column_width + _GAP, tall)
        name = shown_buffer(ranks)
        label_width = len(f"r{len(ranks) - 1}") + 1
        lines: list[Line] = [[] for _ in range(per_column * tall)]
        for index, rank in enumerate(ranks):
            row = self._row(rank, name, label_width, column_width, self.mask_volatile)
            used = sum(map(cell_len, map(_TEXT, row)))
            for line in range(tall):
                target = lines[(index % per_column) * tall + line]
                if index >= per_column:
                    target.append(Segment(" " * _GAP))
                if line == 0:
                    target.extend(row)
                else:  # the same cells again, under the label's blank
                    target.append(Segment(" " * (label_width + 2)))
                    target.extend(row[2:])
                target.append(Segment(" " * (column_width - used)))
        return lines

    @staticmethod
    def _row(rank: RankView, name: str | None, label_width: int, width: int, mask_volatile: bool = False) -> Line:
        """``r12 ●`` then the heatmap, within ``width`` columns; a rank without the buffer shown
        gives its call in this step instead (a script's run, an imported artifact), its time
        masked with ``mask_volatile``."""
        mark, style = _STATE_MARKS[rank.state]
        row: Line = [Segment(f"r{rank.rank}".ljust(label_width), rank_label_style(rank.rank)),
                     Segment(mark + " ", style)]
        room = width - label_width - 2
        buffer = next((b for b in rank.buffers if b.name == name), None)
        if buffer is None and rank.state not in _SAID and rank.collective is not None:  # a run without values
            call = collective_line(rank, mask_volatile, room)
            if sum(map(cell_len, map(_TEXT, call))) > room:  # even the op is too long: cut, marked
                call = [Segment(fit_cells(call[0].text, room), call[0].style)]
            return [*row, *call]
        if buffer is None:
            text = rank.status if rank.state in _SAID else "—"
            return [*row, Segment(fit_cells(text, room), style if rank.state == "error" else DIM)]
        return [*row, *heatmap_cells(buffer, room)]

    def on_click(self, event: events.Click) -> None:
        """Ask the screen for the detail of the rank on the clicked row."""
        event.stop()
        offset = event.get_content_offset(self)
        if offset is None:  # on the border
            return
        per_column, column_width, tall = self._layout
        column = offset.x // max(1, column_width)
        row = offset.y // tall
        rank = column * per_column + row
        if 0 <= row < per_column and rank < len(self._ranks):
            self.post_message(self.Selected(rank))
