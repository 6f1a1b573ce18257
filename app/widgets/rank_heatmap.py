"""The compact view of many ranks: one row per rank, a buffer's elements as provenance-coloured cells.

Above :data:`~collviz.app.screens.viewer.COMPACT_ABOVE` ranks a panel per rank cannot show
anything readable, so every rank gets one row: its number, its status, and the chosen buffer as
cells coloured by the rank(s) whose data each holds, as in the panels and with the same legend.
Where the buffer's values all fit the row (over the lines a row grows to) the cells are its
values, as in a panel; else each cell is a range of elements, and the row ends with the lowest and
highest value (``241–272``) where that leaves the cells room, so no row is colour alone. Where no
rank has a value or a call to show (an NCCL log's topology steps), the rows keep their marks and
one line under them says so. Rows that do not fit one column continue in the next. The buffer
shown is the one most recently updated in the step (ties: the largest); the title names it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from functools import lru_cache
from itertools import repeat
from typing import NamedTuple

import msgspec
from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.message import Message

from collviz.runtime.wire.protocol import Buffer, ProvenanceRun

from ..model import RankView
from .line_widget import LineWidget, Piece, joined, piece
from .rank_panel import collective_line
from .render import (
    DIM,
    content_size,
    PLACEHOLDER_STYLE,
    Line,
    fit_cells,
    palette,
    provenance_style,
    rank_label_style,
    value_cell_lines,
    value_cell_width,
    value_extremes,
    value_range,
)

__all__ = ["RankHeatmap", "shown_buffer", "heatmap_cells"]

_STATE_MARKS = {"pending": ("·", DIM), "running": ("●", Style(color="green")), "waiting": ("⏸", Style(bold=True)),
                "done": ("✓", Style(color="cyan")), "error": ("✗", Style(color="red", bold=True))}
_SAID = ("error", "waiting")
"""States whose status a row without the shown buffer says."""
NO_VALUES = "no values recorded for this step"
"""What the pane says once, under the marks, where no rank has a value or a call to show."""
_NOT_OBSERVED = Style(color="#9a9a9a", bgcolor="#3a3a3a")
_GAP = 2
"""Columns between two columns of rows."""
MAX_ROW_HEIGHT = 3
"""Most lines one rank's row grows to when the pane has room."""
LEAST_CELLS = 8
"""Columns of cells a row keeps beside its values' range (else the range is left out)."""


def shown_buffer(ranks: Sequence[RankView]) -> str | None:
    """The buffer name the heatmap shows: updated in the latest phase by any rank, largest first."""
    best: tuple[int, int] | None = None  # (phase, size) of the buffer named
    name = None
    for rank in ranks:
        for buffer in rank.buffers:
            values = buffer.values
            key = (buffer.phase, len(values) if values is not None else _numel(buffer.shape))
            if best is None or key > best:
                best, name = key, buffer.name
    return name


def _named(rank: RankView, name: str | None) -> Buffer | None:
    """``rank``'s buffer called ``name`` (a loop: a generator per rank cost more than the search)."""
    for buffer in rank.buffers:
        if buffer.name == name:
            return buffer
    return None


def _valueless(ranks: Sequence[RankView], shown: Sequence[Buffer | None]) -> bool:
    """No row has anything to show after its mark: no rank holds the buffer shown, makes a call in
    the step or is in a state whose status a row says (an NCCL log's topology steps)."""
    return all(buffer is None for buffer in shown) and not any(
        rank.collective is not None or rank.state in _SAID for rank in ranks)


def _numel(shape: Sequence[int]) -> int:
    total = 1
    for dim in shape:
        total *= dim
    return total


def _row_input(rank: RankView, name: str | None) -> tuple:
    """Everything :meth:`RankHeatmap._row` draws ``rank``'s row from (the shown buffer's size,
    provenance, values and their extremes), to compare with the last frame's."""
    buffer = _named(rank, name)
    status = rank.status if rank.state in _SAID else ""  # a row names no other state's status
    if buffer is None:
        return rank.rank, rank.state, status, rank.collective  # the row may give the rank's call
    count = len(buffer.values) if buffer.values is not None else _numel(buffer.shape)
    extremes = (buffer.summary.min, buffer.summary.max) if buffer.summary is not None else None
    # the values as msgpack: comparing the last frame's 64 lists of 128 floats, long out of the
    # CPU's caches, cost more than encoding this frame's, just decoded, and comparing bytes
    values = _encode(buffer.values) if buffer.values is not None else None
    return rank.rank, rank.state, status, count, buffer.provenance, values, extremes


def _shared_key(row_input: tuple) -> tuple | None:
    """What a row draws after its label, from its :func:`_row_input`, as a dict key: ranks holding
    equal data (size, provenance, values, extremes) draw the same cells; None for a row without
    the buffer shown (it gives its own rank's call or status)."""
    if len(row_input) < 7:
        return None
    _, _, _, count, provenance, values, extremes = row_input
    return count, _encoded_runs(provenance) if provenance is not None else None, values, extremes


_TITLE_PARTS = ("colour = whose data", "values or their range", "click or 0–9: a rank's detail")
"""What the heatmap's title says after the ranks and the buffer, most needed first."""


def _title(world: int, name: str | None, width: int) -> str:
    """``16 ranks · grad · colour = whose data · …``: the parts of :data:`_TITLE_PARTS` that fit
    a border ``width`` columns wide (its corners and the spaces round the title aside) whole, in order."""
    parts = [f"{world} ranks", *([name] if name else [])]
    for part in _TITLE_PARTS if name else ():
        if width and cell_len(" · ".join([*parts, part])) + 6 > width:
            break
        parts.append(part)
    return " · ".join(parts)


def _grid(count: int, width: int, height: int) -> tuple[int, int, int]:
    """How ``count`` rows share ``width`` × ``height`` cells: rows per column, a column's width, and
    the lines each row takes (as many columns as it takes to fit ``height``)."""
    columns = max(1, -(-count // max(1, height)))
    per_column = -(-count // columns)
    tall = max(1, min(MAX_ROW_HEIGHT, height // per_column))
    return per_column, max(12, (width - _GAP * (columns - 1)) // columns), tall


class _Cells(NamedTuple):
    """How the rows draw the buffer shown: as values ``cell`` columns wide (0: as colours, each
    row ending with its values' range where that fits), and the ranges no row could say."""

    cell: int
    unsaid: list[tuple[float, float]]


def _cells(buffers: Sequence[Buffer | None], room: int, tall: int) -> _Cells:
    """Values, in cells of one width, where every row's fit ``room`` columns on ``tall`` lines;
    else colours, with the extremes of the rows too narrow to end with their range."""
    with_values = [buffer for buffer in buffers if buffer is not None and buffer.values]
    # a cell takes two columns at least: where even those would not fit, no value is formatted
    # (64 ranks' 128 values each cost 8 ms to format)
    if with_values and len(with_values) == sum(buffer is not None for buffer in buffers) \
            and all(len(buffer.values or ()) * 2 <= room * tall for buffer in with_values):
        cell = max(map(value_cell_width, with_values))
        if all(value_cell_lines(buffer, room, tall, cell) is not None for buffer in with_values):
            return _Cells(cell, [])
    unsaid = []
    for buffer in buffers:
        extremes = value_extremes(buffer) if buffer is not None else None
        if extremes is not None and room - len(value_range(extremes)) - 1 < LEAST_CELLS:
            unsaid.append(extremes)
    return _Cells(0, unsaid)


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


_encode = msgspec.msgpack.Encoder().encode
_decode_runs = msgspec.msgpack.Decoder(list[ProvenanceRun]).decode
_ENCODED_KEPT = 256
"""Provenance lists whose encodings are kept (by identity), four frames of 64 distinct ones."""
_encoded: dict[int, tuple[list[ProvenanceRun], bytes]] = {}
"""Each provenance list encoded lately, by its identity, held (so its identity is not reused), and its encoding."""


def _encoded_runs(provenance: list[ProvenanceRun]) -> bytes:
    """``provenance`` encoded (the memo key of its cells, and what tells equal rows apart); a list
    encoded lately is not encoded again: a stored trace's Buffers share equal provenances
    (:mod:`~collviz.runtime.wire.stored`), so a 64-rank frame's rows encode one list, not 64 (7 µs
    each), and a frame whose ranks hold 64 different ones encodes each once, for its row's key
    and then its cells."""
    found = _encoded.get(id(provenance))
    if found is None:
        if len(_encoded) >= _ENCODED_KEPT:
            _encoded.clear()
        found = _encoded[id(provenance)] = (provenance, _encode(provenance))
    return found[1]


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


_RowLine = tuple[Piece, ...]
"""One line of a rank's row: its label (or a blank as wide) and its cells, or the whole line."""


@lru_cache(maxsize=1024)
def _label(number: int, state: str, label_width: int, colours: tuple[str, ...]) -> Piece:
    """``r12 ●``: rank ``number``'s label and its ``state``'s mark, ``label_width`` + 2 columns
    wide; one object per rank, state and palette (``colours``: the label's style follows it)."""
    mark, style = _STATE_MARKS[state]
    return piece([Segment(f"r{number}".ljust(label_width), rank_label_style(number)), Segment(mark + " ", style)])


@lru_cache(maxsize=256)
def _blank(width: int) -> Piece:
    """``width`` blank columns (none where ``width`` is not positive), one object per width."""
    return piece([Segment(" " * width)])


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
        self._inputs: tuple[tuple, ...] = ()  # the ranks' :func:`_row_input`
        self._drawn: tuple | None = None

    def show(self, ranks: tuple[RankView, ...]) -> None:
        """Display the ranks at the cursor; nothing is rebuilt when the rows would be the last frame's
        (a live run's ranks report new Buffers of the same provenance every call, and a run's
        steps often repeat: at 64 ranks the rows cost 1.4 ms a frame)."""
        self._ranks = ranks
        name = shown_buffer(ranks)
        self._retitle(name)
        self._inputs = tuple(map(_row_input, ranks, repeat(name)))
        drawn = (content_size(self), palette(), name, self._inputs)
        if drawn != self._drawn:
            self._drawn = drawn
            self.lines_changed()

    def _retitle(self, name: str | None = None) -> None:
        """Title the pane for the ranks shown (``name``: their :func:`shown_buffer`, where known),
        with what fits its width."""
        self.set_title(_title(len(self._ranks), name if name is not None else shown_buffer(self._ranks), self.outer_size.width))

    def on_resize(self) -> None:
        """Rebuild at the new size, titled for it."""
        super().on_resize()
        self._retitle()

    def build_lines(self, width: int, height: int) -> list[Line]:
        """Rows of ranks, in as many columns as needed to fit ``height`` (:meth:`build_pieces` joined)."""
        return list(map(joined, self.build_pieces(width, height)))

    def build_pieces(self, width: int, height: int) -> list[list[Piece]]:
        """Rows of ranks, in as many columns as needed to fit ``height``: each rank's label, then
        the cells of its buffer, built once for all the ranks holding equal data (an all-gather's
        64 outputs are one row of cells drawn after 64 labels)."""
        ranks = self._ranks
        if not ranks:
            return [[piece([Segment("waiting for the workers…", DIM)])]]
        name = shown_buffer(ranks)
        label_width = len(f"r{len(ranks) - 1}") + 1
        colours = palette()
        shown = [_named(rank, name) for rank in ranks]
        if _valueless(ranks, shown):  # every row would say "—": marks alone, and why once
            per_column, column_width, _ = _grid(len(ranks), width, max(1, height - 1))
            self._layout = (per_column, column_width + _GAP, 1)
            marks: list[list[_RowLine]] = [[(_label(rank.rank, rank.state, label_width, colours),)] for rank in ranks]
            return [*self._columns(marks, per_column, 1, label_width, column_width), [piece([Segment(NO_VALUES, DIM)])]]
        keys = list(map(_shared_key, self._inputs))
        held = {key: buffer for key, buffer in zip(keys, shown) if key is not None}  # a buffer per distinct key
        buffers = [*held.values(), *([None] if None in keys else [])]  # what :func:`_cells` tells apart
        per_column, column_width, tall = _grid(len(ranks), width, height)
        cells = _cells(buffers, column_width - label_width - 2, tall)
        if cells.unsaid and per_column * tall >= height > 1:  # the ranges' line takes the last line
            per_column, column_width, tall = _grid(len(ranks), width, height - 1)
            cells = _cells(buffers, column_width - label_width - 2, tall)
        self._layout = (per_column, column_width + _GAP, tall)
        blank = _blank(label_width + 2)
        bodies: dict[tuple, list[Piece]] = {}
        rows: list[list[_RowLine]] = []
        for rank, buffer, key in zip(ranks, shown, keys):
            if key is None:  # drawn from the rank itself: its call or status
                rows.append([(piece(line),) for line in self._row(rank, buffer, label_width, column_width, tall, cells.cell,
                                                                   self.mask_volatile)])
                continue
            body = bodies.get(key)
            if body is None:
                body = bodies[key] = list(map(piece, self._body(rank, buffer, label_width, column_width, tall, cells.cell)))
            label = _label(rank.rank, rank.state, label_width, colours)
            rows.append([(label if line == 0 else blank, part) for line, part in enumerate(body)])
        lines = self._columns(rows, per_column, tall, label_width, column_width)
        return self._with_ranges_line(lines, cells.unsaid) if cells.unsaid else lines

    @staticmethod
    def _columns(rows: list[list[_RowLine]], per_column: int, tall: int, label_width: int,
                 column_width: int) -> list[list[Piece]]:
        """``rows`` (one per rank, each at most ``tall`` lines of pieces) laid out ``per_column``
        to a column, each padded to ``column_width``."""
        lines: list[list[Piece]] = [[] for _ in range(per_column * tall)]
        blank, gap = (_blank(label_width + 2),), _blank(_GAP)
        for index, row in enumerate(rows):
            for line in range(tall):
                target = lines[(index % per_column) * tall + line]
                if index >= per_column:
                    target.append(gap)
                drawn = row[line] if line < len(row) else blank
                target.extend(drawn)
                target.append(_blank(column_width - sum(part.cells for part in drawn)))
        return lines

    @staticmethod
    def _with_ranges_line(lines: list[list[Piece]], unsaid: list[tuple[float, float]]) -> list[list[Piece]]:
        """``lines`` and under them the values' range of the rows too narrow to end with their own
        (``values 4033–4160 on every rank``, or across the ranks where they differ)."""
        lows, highs = zip(*unsaid)
        whole = value_range((min(lows), max(highs)))
        said = f"values {whole} on every rank" if len(set(unsaid)) == 1 else f"values {whole} across the ranks"
        return [*lines, [piece([Segment(said, DIM)])]]

    @staticmethod
    def _row(rank: RankView, buffer: Buffer | None, label_width: int, width: int, tall: int = 1, cell: int = 0,
             mask_volatile: bool = False) -> list[Line]:
        """``r12 ●`` then ``buffer`` (the rank's of the buffer shown) as :meth:`_body` draws it,
        within ``width`` columns, on at most ``tall`` lines (the next lines start blank)."""
        label = _label(rank.rank, rank.state, label_width, palette()).segments
        blank = _blank(label_width + 2).segments
        body = RankHeatmap._body(rank, buffer, label_width, width, tall, cell, mask_volatile)
        return [[*(label if line == 0 else blank), *cells] for line, cells in enumerate(body)]

    @staticmethod
    def _body(rank: RankView, buffer: Buffer | None, label_width: int, width: int, tall: int = 1, cell: int = 0,
              mask_volatile: bool = False) -> list[Line]:
        """What a row draws after its label ``label_width`` + 2 columns wide, within ``width``
        columns, on at most ``tall`` lines: ``buffer``'s values in cells ``cell`` columns wide
        where ``cell`` is given, else its colours on every line with its values' range at the first
        line's end where that fits (the same for every rank holding equal data); a rank without
        the buffer shown gives its call in this step instead (a script's run, an imported
        artifact), its time masked with ``mask_volatile``, or its status."""
        room = width - label_width - 2
        if buffer is None and rank.state not in _SAID and rank.collective is not None:  # a run without values
            call = collective_line(rank, mask_volatile, room)
            if sum(cell_len(segment.text) for segment in call) > room:  # even the op is too long: cut, marked
                call = [Segment(fit_cells(call[0].text, room), call[0].style)]
            return [call]
        if buffer is None:
            text = rank.status if rank.state in _SAID else "—"
            return [[Segment(fit_cells(text, room), _STATE_MARKS[rank.state][1] if rank.state == "error" else DIM)]]
        values = value_cell_lines(buffer, room, tall, cell) if cell else None
        if values is not None:
            return values
        extremes = value_range(value_extremes(buffer))
        said = f" {extremes}" if extremes and room - len(extremes) - 1 >= LEAST_CELLS else ""
        cells = heatmap_cells(buffer, room - len(said))
        return [[*cells, Segment(said, DIM)], *([*cells] for _ in range(tall - 1))]

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
