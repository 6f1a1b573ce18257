"""Values, buffers, provenance colours and sparklines as lines of segments, shared by the widgets.

A :data:`Line` is a list of Rich segments; line-API widgets turn lines into strips directly
(:func:`line_to_strip`, much cheaper per frame than laying out text), ``Static`` widgets into
``Text`` (:func:`lines_to_text`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from math import prod
from operator import itemgetter
from typing import TYPE_CHECKING

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.strip import Strip

from collviz.runtime.wire.protocol import Buffer, BufferSummary

if TYPE_CHECKING:
    import numpy as np
    from textual.widget import Widget

__all__ = [
    "cells_of",
    "RANK_COLOURS",
    "HIGH_CONTRAST_COLOURS",
    "use_palette",
    "palette",
    "REDUCED_STYLE",
    "REDUCED_SHADES",
    "reduced_style",
    "PLACEHOLDER_STYLE",
    "rank_colour",
    "extended_palette",
    "oklab",
    "MAX_COLOURED_RANKS",
    "rank_style",
    "rank_label_style",
    "provenance_style",
    "DrawnColours",
    "colours_drawn",
    "format_bytes",
    "short_blocks",
    "format_value",
    "format_values",
    "summary_text",
    "fit_cells",
    "fit_words",
    "picture_segments",
    "sparkline",
    "Line",
    "buffer_lines",
    "value_cell_width",
    "value_cell_lines",
    "value_extremes",
    "value_range",
    "provenance_lines",
    "lines_to_text",
    "line_to_strip",
    "styled_segments",
    "padded_strip",
    "content_size",
]

RANK_COLOURS: tuple[str, ...] = (
    "#3b82f6", "#f59e0b", "#10b981", "#ef4444", "#a855f7", "#14b8a6", "#ec4899", "#84cc16",
)
"""Background colour of the first eight ranks' data; ranks beyond get colours chosen to stay as far
apart as possible from every earlier rank's (see :func:`extended_palette`)."""

MAX_COLOURED_RANKS = 64
"""Ranks that get a colour of their own (the most one machine runs)."""

REDUCED_SHADES = ("#6e6e6e", "#858585", "#9c9c9c", "#b3b3b3", "#cacaca", "#e0e0e0", "#f5f5f5")
"""Background of cells reduced from 2, 3, … 8 or more ranks: the more ranks a partial sum holds,
the lighter, so a ring's growing sums are seen to grow."""

REDUCED_STYLE = Style(color="black", bgcolor=REDUCED_SHADES[-1], bold=True, underline=True)
"""Cells holding data reduced from 8 or more ranks (see :func:`reduced_style`)."""

PLACEHOLDER_STYLE = Style(color="#808080", bgcolor="#262626")
"""Cells holding no rank's data yet (e.g. an output before the collective)."""


@dataclass(frozen=True)
class DrawnColours:
    """What the provenance colours drawn stand for: the ranks whose own data is drawn, the counts
    of ranks whose sums are (Σk), and whether a placeholder is (what the legend explains)."""

    ranks: frozenset[int] = frozenset()
    sums: frozenset[int] = frozenset()
    placeholder: bool = False

    def __or__(self, other: DrawnColours) -> DrawnColours:
        """The colours drawn in either."""
        return DrawnColours(self.ranks | other.ranks, self.sums | other.sums, self.placeholder or other.placeholder)

    def __bool__(self) -> bool:
        """Whether any provenance colour is drawn."""
        return bool(self.ranks or self.sums or self.placeholder)


_MEANINGS: dict[int, tuple[Style, DrawnColours]] = {}
"""What each provenance style stands for, by the style's identity (the widgets draw with shared
style objects); the style is held beside it, so its identity is never another object's."""


def _means(style: Style, meaning: DrawnColours) -> Style:
    """``style``, noted as standing for ``meaning``."""
    _MEANINGS[id(style)] = (style, meaning)
    return style


_means(PLACEHOLDER_STYLE, DrawnColours(placeholder=True))


def colours_drawn(lines: Iterable[Sequence[Segment]]) -> DrawnColours:
    """The provenance colours ``lines`` draw: cells and sparkline columns in a rank's colour or a
    Σ shade, and placeholders (read from their segments' styles, one set lookup per distinct style)."""
    styles: set[int] = set()
    for line in lines:
        styles.update(map(id, map(_STYLE, line)))
    meanings = [found[1] for found in map(_MEANINGS.get, styles) if found is not None]
    if not meanings:
        return DrawnColours()
    # one DrawnColours for all (a 64-rank row draws 64 colours: joining them two by two made 64)
    return DrawnColours(frozenset().union(*(meaning.ranks for meaning in meanings)),
                        frozenset().union(*(meaning.sums for meaning in meanings)),
                        any(meaning.placeholder for meaning in meanings))

_BARS = " ▁▂▃▄▅▆▇█"
_STYLE = itemgetter(1)
"""A segment's style."""

Line = list[Segment]
"""One line of a widget: segments, each a piece of text and its style."""

NO_STYLE = Style()
BOLD = Style(bold=True)
DIM = Style(dim=True)
MOMENT = Style(italic=True, dim=True)
CYAN = Style(color="cyan")
NAME = Style(bold=True, color="cyan")
"""Names of a worked example's elements (A, B, C, D), above their values."""


HIGH_CONTRAST_COLOURS: tuple[str, ...] = (
    "#56b4e9", "#e69f00", "#f0e442", "#d55e00", "#ffffff", "#009e73", "#cc79a7", "#0072b2",
)
"""The first eight ranks' colours in the projector theme: Okabe and Ito's palette, chosen to stay
apart for the common colour-vision deficiencies (white for its black, on a black background)."""

_palette: tuple[str, ...] = RANK_COLOURS


def palette() -> tuple[str, ...]:
    """The colours ranks 0–7 are drawn in now (what memoised drawings are keyed on)."""
    return _palette


def use_palette(colours: tuple[str, ...]) -> None:
    """Draw ranks 0–7 in ``colours`` from now on (:data:`RANK_COLOURS` or
    :data:`HIGH_CONTRAST_COLOURS`); the cached colours and styles are dropped."""
    global _palette
    _palette = colours
    rank_colour.cache_clear()
    rank_style.cache_clear()
    rank_label_style.cache_clear()


def oklab(colour: str) -> tuple[float, float, float]:
    """``#rrggbb`` in OKLab (Björn Ottosson's perceptual space: distances there are how different
    two colours look; about 0.02 is just noticeable)."""
    import numpy as np

    return tuple(_oklab(np.array([[int(colour[i:i + 2], 16) for i in (1, 3, 5)]], dtype=float))[0])


def _oklab(rgb: "np.ndarray") -> "np.ndarray":
    """Rows of 0–255 sRGB triples in OKLab."""
    import numpy as np

    linear = rgb / 255
    linear = np.where(linear <= 0.04045, linear / 12.92, ((linear + 0.055) / 1.055) ** 2.4)
    lms = np.cbrt(linear @ np.array([[0.4122214708, 0.5363325363, 0.0514459929],
                                     [0.2119034982, 0.6806995451, 0.1073969566],
                                     [0.0883024619, 0.2817188376, 0.6299787005]]).T)
    return lms @ np.array([[0.2104542553, 0.7936177850, -0.0040720468],
                           [1.9779984951, -2.4285922050, 0.4505937099],
                           [0.0259040371, 0.7827717662, -0.8086757660]]).T


@lru_cache(maxsize=4)
def extended_palette(base: tuple[str, ...]) -> tuple[str, ...]:
    """``base`` followed by colours for ranks ``len(base)`` … 63, each the candidate farthest (in
    OKLab) from every colour before it: light enough for black digits (L ≥ 0.6), never grey (the
    reduced shades are grey). Sixteen ranks stay at least 0.14 apart, sixty-four 0.07 (tested)."""
    import numpy as np

    levels = np.arange(0, 256, 15)
    grid = np.array(np.meshgrid(levels, levels, levels, indexing="ij"), dtype=float).reshape(3, -1).T
    lab = _oklab(grid)
    keep = (lab[:, 0] >= 0.6) & (lab[:, 0] <= 0.93) & (np.hypot(lab[:, 1], lab[:, 2]) >= 0.05)
    candidates, points = grid[keep], lab[keep]
    nearest = np.full(len(points), np.inf)
    for colour in base:
        nearest = np.minimum(nearest, np.linalg.norm(points - np.array(oklab(colour)), axis=1))
    chosen = list(base)
    while len(chosen) < MAX_COLOURED_RANKS:
        best = int(np.argmax(nearest))
        chosen.append("#" + "".join(f"{int(v):02x}" for v in candidates[best]))
        nearest = np.minimum(nearest, np.linalg.norm(points - points[best], axis=1))
    return tuple(chosen)


@lru_cache(maxsize=1024)
def rank_colour(rank: int) -> str:
    """The colour of ``rank``'s data: one of the palette's (:func:`use_palette`) for ranks 0–7,
    beyond that :func:`extended_palette`'s (ranks beyond 63 reuse its colours)."""
    if rank < len(_palette):
        return _palette[rank]
    colours = extended_palette(_palette)
    return colours[rank % len(colours)]


@lru_cache(maxsize=1024)
def rank_style(rank: int) -> Style:
    """Cell style for data that came from exactly ``rank`` (one shared object per rank)."""
    return _means(Style(color="black", bgcolor=rank_colour(rank), bold=rank >= len(_palette)),
                  DrawnColours(ranks=frozenset({rank})))


@lru_cache(maxsize=1024)
def rank_label_style(rank: int, bold: bool = True) -> Style:
    """Text in ``rank``'s colour (a rank's label: ``r12``), one shared object per rank: line
    widgets keep a line's strip by its styles' identities."""
    return Style(color=rank_colour(rank), bold=bold or None)


@lru_cache(maxsize=64)
def reduced_style(count: int) -> Style:
    """Cell style for data reduced from ``count`` ≥ 2 ranks (one shade per count up to 8)."""
    shade = REDUCED_SHADES[min(count, len(REDUCED_SHADES) + 1) - 2]
    return _means(Style(color="black", bgcolor=shade, bold=True, underline=True), DrawnColours(sums=frozenset({count})))


def provenance_style(ranks: Sequence[int] | None) -> Style:
    """The style of a cell whose data came from ``ranks`` (``None``: not observed)."""
    if ranks is None:
        return NO_STYLE
    if not ranks:
        return PLACEHOLDER_STYLE
    if len(ranks) == 1:
        return rank_style(ranks[0])
    return reduced_style(len(ranks))


def format_bytes(count: int) -> str:
    """``1536`` → ``"1.5 KiB"``."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def format_value(value: int | float, whole: bool = True) -> str:
    """A compact cell label: integers as such, other floats to three significant digits; a float
    with no fraction as an integer when ``whole`` (else ``1.0``: see :func:`format_values`)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e6:
        return str(int(value)) if whole else f"{value:.1f}"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def format_values(values: Sequence[int | float]) -> list[str]:
    """Cell labels for one buffer's values. Floats with no fraction print as integers only where
    every value of the buffer is one and there are several (the worked examples' grids of small
    integers stay narrow); a lone ``1.0``, or one beside ``1.4``, keeps its ``.0``, so a float
    result is never read as an integer."""
    whole = len(values) > 1 and all(not isinstance(v, float) or v.is_integer() for v in values)
    return [format_value(v, whole) for v in values]


def picture_segments(buffer: Buffer, width: int) -> Line:
    """A summarised buffer's picture as a sparkline in ``width`` columns, each column in the colour
    of the rank its elements came from (Σ shades where reduced; cyan where provenance was not
    observed). The picture's points are the means of ``len(picture)`` near-equal chunks of the
    flattened tensor (``torch.tensor_split``): a column takes the provenance of its chunk's middle."""
    summary = buffer.summary
    assert summary is not None
    bars = sparkline(summary.picture, width)
    if not buffer.provenance or not bars:
        return [Segment(bars, CYAN)]
    count, points = prod(buffer.shape) if buffer.shape else 1, len(summary.picture)
    columns, repeat = min(width, points), max(1, width // points)
    runs = sorted(buffer.provenance, key=lambda run: run.start)
    starts = [run.start for run in runs]
    chunk, extra = divmod(count, points)  # the first ``extra`` chunks hold one element more
    line: Line = []
    for column in range(columns):
        point = (column * points) // columns
        first = point * chunk + min(point, extra)
        middle = first + (chunk + (1 if point < extra else 0)) // 2
        at = bisect_right(starts, middle) - 1
        run = runs[at] if at >= 0 and middle < runs[at].start + runs[at].length else None
        cell = provenance_style(run.ranks if run is not None else [])
        text = bars[column * repeat:(column + 1) * repeat]
        style = _picture_style(cell.bgcolor.name if cell.bgcolor is not None else "grey50", id(cell))
        if line and line[-1].style is style:
            line[-1] = Segment(line[-1].text + text, style)
        else:
            line.append(Segment(text, style))
    return line


@lru_cache(maxsize=256)
def _picture_style(colour: str, cell: int) -> Style:
    """A sparkline column in ``colour``, the colour of the cell style of identity ``cell``, and
    standing for what that style does (one shared object per colour and cell style)."""
    found = _MEANINGS.get(cell)
    style = Style(color=colour)
    return _means(style, found[1]) if found is not None else style


def sparkline(values: Sequence[float], width: int, top: float | None = None) -> str:
    """``values`` as block characters in at most ``width`` columns (resampled when there are more
    values, widened when fewer), scaled from min(0, lowest) to ``top`` (default: the highest)."""
    if not values or width <= 0:
        return ""
    count = len(values)
    columns = min(width, count)
    picked = [values[min(count - 1, (i * count) // columns)] for i in range(columns)]
    repeat = max(1, width // count)
    low = min(0.0, min(picked))
    high = top if top is not None else max(picked)
    span = (high - low) or 1.0
    return "".join(_BARS[max(0, min(8, round((v - low) / span * 8)))] * repeat for v in picked)


def _append_cells(line: Line, labels: list[str], styles: list[Style], indexes: range, cell: int) -> None:
    """Append cells to ``line``, one segment per run of equally styled cells (fewer, faster)."""
    run: list[str] = []
    style = None
    for i in indexes:
        if styles[i] is not style and run:
            line.append(Segment("".join(run), style))
            run = []
        style = styles[i]
        run.append(labels[i].rjust(cell - 1) + " ")
    if run:
        line.append(Segment("".join(run), style))


def _cell_styles(buffer: Buffer, count: int) -> list[Style]:
    if buffer.provenance is None:
        return [NO_STYLE] * count
    styles = [PLACEHOLDER_STYLE] * count
    for run in buffer.provenance:
        style = provenance_style(run.ranks)
        for i in range(run.start, min(count, run.start + run.length)):
            styles[i] = style
    return styles


def _title(buffer: Buffer, detail: bool) -> Line:
    """``name [shape] moment``; ``detail`` adds the role and the dtype."""
    shape = "×".join(map(str, buffer.shape)) or "scalar"
    role = f" ({buffer.role})" if detail and buffer.role not in buffer.name.split() else ""
    dtype = f" {buffer.dtype}" if detail else ""
    return [Segment(buffer.name, BOLD), Segment(f"{role} [{shape}]{dtype} "), Segment(buffer.moment, MOMENT)]


def fit_cells(text: str, width: int) -> str:
    """``text`` in at most ``width`` terminal cells, cut with an ellipsis where it is longer:
    measured in cells (an emoji takes two), never in characters."""
    if cell_len(text) <= width:
        return text
    return set_cell_size(text, max(0, width - 1)) + "…" if width > 0 else ""


_NUMBER = re.compile(r"[(\[]?[-+−]?\d[\d.,]*")
"""A word that is a number (``4``, ``(211.8``): it says nothing without the word after it."""
_SEPARATORS = frozenset(("", "·", "+", "=", "→", "×", "−", "-", "("))
"""Words that join others (``h = x · W1 +``): a cut text does not end on one."""


def fit_words(text: str, room: int) -> str:
    """``text``, or as many of its words as fit in ``room`` cells followed by "…": never half a
    word, never a number whose next word is cut (its unit or what it counts: ``211.8 KiB``, ``4
    tensors``), no dangling separator or operator; an emoji counts its two cells; nothing where no word fits.
    Unknown room (0 or less, before the first layout): all of it."""
    if room <= 0 or cell_len(text) <= room:
        return text
    words = text.split(" ")
    while words and (cell_len(" ".join(words)) + 1 > room or words[-1] in _SEPARATORS or _NUMBER.fullmatch(words[-1])):
        words.pop()
    return " ".join(words) + "…" if words else ""


def summary_text(summary: BufferSummary, width: int) -> str:
    """``  min … max … mean … crc …``, the figures that fit in ``width`` columns whole, the rest
    left to an ellipsis (a checksum is never cut into a different number)."""
    figures = [f"min {summary.min:.3g}", f"max {summary.max:.3g}", f"mean {summary.mean:.3g}", f"crc {summary.crc32}"]
    for shown in range(len(figures), 0, -1):
        text = "  " + " ".join(figures[:shown]) + (" …" if shown < len(figures) else "")
        if cell_len(text) <= width:
            return text
    return "  …"


def buffer_lines(buffer: Buffer, width: int, max_rows: int | None = None, detail: bool = False,
                 padding: int = 0) -> list[Line]:
    """A buffer as a title line and a grid of provenance-coloured value cells (or its summary).

    ``max_rows`` limits the grid's lines; ``detail`` adds the buffer's role and dtype to the title.
    Named elements (``Buffer.labels``) get their names on a line above their values; ``padding``
    widens every cell (the projector layout).
    """
    lines = [_title(buffer, detail)]
    if buffer.values is None:
        summary = buffer.summary
        if summary is None:
            lines.append([Segment("  (no values)", DIM)])
            return lines
        lines.append([Segment(summary_text(summary, width))])
        lines.append([Segment("  "), *picture_segments(buffer, max(1, width - 2))])
        return lines
    labels = format_values(buffer.values)
    styles = _cell_styles(buffer, len(labels))
    names = buffer.labels if buffer.labels is not None and len(buffer.labels) == len(labels) else None
    cell = max(map(len, [*labels, *(names or ())]), default=1) + 1 + padding
    columns = (buffer.shape[-1] if len(buffer.shape) >= 2 else len(labels)) or 1
    per_line = max(1, min(columns, (width - 1) // cell))
    lines_per_row = 2 if names is not None else 1
    for row_start in range(0, len(labels), columns):
        row_end = min(len(labels), row_start + columns)
        for line_start in range(row_start, row_end, per_line):
            shown = range(line_start, min(row_end, line_start + per_line))
            last = max_rows is not None and len(lines) + lines_per_row > max_rows and shown.stop < len(labels)
            if last:  # the last line allowed, with more to come: make room for " …+N" on it
                marker_room = len(f" …+{len(labels)}")
                shown = range(line_start, line_start + min(len(shown), max(0, (width - 1 - marker_room) // cell)))
            if names is not None:  # the elements' names above their values
                lines.append([Segment(" " + "".join(names[i].rjust(cell - 1) + " " for i in shown), NAME)])
            line: Line = [Segment(" ")]
            _append_cells(line, labels, styles, shown, cell)
            lines.append(line)
            if last:
                line.append(Segment(f"{' ' if shown else ''}…+{prod(buffer.shape) - shown.stop}", DIM))
                return lines
    return lines


def value_cell_width(buffer: Buffer) -> int:
    """The columns a cell of ``buffer``'s values takes (its widest label and a space; 0 where it
    has no values)."""
    return max(map(len, format_values(buffer.values))) + 1 if buffer.values else 0


def value_cell_lines(buffer: Buffer, width: int, most: int, cell: int = 0) -> list[Line] | None:
    """``buffer``'s values as provenance-coloured cells ``cell`` columns wide (default: as
    :func:`value_cell_width`), as many a line as ``width`` columns hold, on at most ``most``
    lines; None where they would not all fit (or it has no values)."""
    if not buffer.values or width <= 0:
        return None
    labels = format_values(buffer.values)
    cell = max(cell, max(map(len, labels)) + 1)
    per_line = width // cell
    if per_line == 0 or -(-len(labels) // per_line) > most:
        return None
    styles = _cell_styles(buffer, len(labels))
    lines: list[Line] = []
    for start in range(0, len(labels), per_line):
        line: Line = []
        _append_cells(line, labels, styles, range(start, min(len(labels), start + per_line)), cell)
        lines.append(line)
    return lines


def value_extremes(buffer: Buffer) -> tuple[float, float] | None:
    """The lowest and highest of ``buffer``'s values, from its values or its summary; None where
    it has neither."""
    if buffer.values:
        return min(buffer.values), max(buffer.values)
    if buffer.summary is not None:
        return buffer.summary.min, buffer.summary.max
    return None


def value_range(extremes: tuple[float, float] | None) -> str:
    """``241–272`` for ``extremes`` (one number where they are equal; empty for None)."""
    if extremes is None:
        return ""
    low, high = extremes
    return format_value(low) if low == high else f"{format_value(low)}–{format_value(high)}"


def provenance_lines(buffer: Buffer) -> list[Line]:
    """Which ranks each run of elements came from, one run per line."""
    lines = []
    for run in buffer.provenance or ():
        if not run.ranks:
            who = "no rank's data (placeholder)"
        elif len(run.ranks) == 1:
            who = f"rank {run.ranks[0]}"
        else:
            who = "reduced from ranks " + ", ".join(map(str, run.ranks))
        lines.append([Segment(f"  [{run.start}:{run.start + run.length}) ", DIM),
                      Segment("  ", provenance_style(run.ranks)), Segment(f" {who}")])
    return lines


def lines_to_text(lines: list[Line]) -> Text:
    """Lines of segments as one Rich ``Text`` (for ``Static`` widgets)."""
    text = Text()
    for number, line in enumerate(lines):
        if number:
            text.append("\n")
        for segment in line:
            text.append(segment.text, segment.style)
    return text


def cells_of(texts: Sequence[str]) -> int:
    """The cells ``texts`` take together: Rich's :func:`~rich.cells.cell_len` of each, summed; one
    cell a character, counted in C, where all are printable ASCII (most lines are: measuring a
    64-rank heatmap's lines segment by segment cost a Python call each)."""
    together = "".join(texts)
    if together.isascii() and together.isprintable():
        return len(together)
    return sum(map(cell_len, texts))


def line_to_strip(line: Line, width: int, base: Style) -> Strip:
    """One line of segments as a strip exactly ``width`` cells wide, over the ``base`` style.

    A line that fits is styled and padded in one pass, as Textual's ``Strip(line).crop(0, width)
    .adjust_cell_length(width).apply_style(base)`` would make it (each step there builds a Strip
    and its seven caches, and styles every segment through a generator); a line too long is cut
    by that chain."""
    length = cells_of(list(map(_TEXT, line)))
    if length > width or not base:
        return Strip(line).crop(0, width).adjust_cell_length(width).apply_style(base)
    return padded_strip(styled_segments(line, base), length, width, base)


def styled_segments(segments: Iterable[Segment], base: Style) -> list[Segment]:
    """``segments`` over the ``base`` style, as :func:`line_to_strip` puts them in a strip (control
    segments unstyled): a line's pieces styled once each make its strip's segments by concatenation."""
    find, base_id = _OVER.get, id(base)
    styled = []
    for text, style, control in segments:
        if control:
            styled.append(_segment((text, None, control)))
            continue
        found = find((base_id, id(style)))
        if found is None or found[0] is not base or found[1] is not style:
            found = _over(base, style)
        styled.append(_segment((text, found[2], control)))
    return styled


def padded_strip(styled: list[Segment], length: int, width: int, base: Style) -> Strip:
    """A strip of ``styled`` segments (:func:`styled_segments`, ``length`` cells, at most ``width``)
    padded with ``base`` to ``width`` cells; ``styled`` becomes the strip's own list."""
    if length < width:
        styled.append(_segment((" " * (width - length), base, None)))
    return Strip(styled, width)


_OVER: dict[tuple[int, int], tuple[Style, Style | None, Style]] = {}
"""``base + style`` by the two styles' identities, each entry holding both (so neither identity is
reused while it is kept): Rich's own cache of ``Style.__add__`` hashes and compares Styles in
Python, ~6,000 instructions a segment, which a 64-rank heatmap's ~130-segment lines paid each."""


def _over(base: Style, style: Style | None) -> tuple[Style, Style | None, Style]:
    """The :data:`_OVER` entry of ``base + style``, made (and kept, unless it carries a link: Rich
    gives each use of a linked style its own copy)."""
    entry = (base, style, base + style)
    if not entry[2].link:
        if len(_OVER) >= 4096:
            _OVER.clear()
        _OVER[(id(base), id(style))] = entry
    return entry


_TEXT = itemgetter(0)
"""A segment's text."""

_segment = partial(tuple.__new__, Segment)
"""A Segment of its ``(text, style, control)``, made in C (``Segment(...)`` runs Python code)."""


_BLOCK = re.compile(r"\bblock (\d+)")


def short_blocks(text: str) -> str:
    """``block 0`` → ``b0`` in ``text``: how a short label names a transformer block (the memory
    axis's ``b0 fwd``, a narrow panel's ``b0 W_query shard``)."""
    return _BLOCK.sub(r"b\1", text)


def content_size(widget: Widget) -> Size:
    """``widget.content_size``, from the size its last layout gave it less its gutter: the same
    figures without looking the widget up in its screen's compositor (three panes asked at every
    seek, ~15 µs each there); (0, 0) where it is not displayed."""
    if not widget.display or not widget.outer_size:
        return Size(0, 0)
    gutter = widget.styles.gutter
    width, height = widget.outer_size
    return Size(max(0, width - gutter.width), max(0, height - gutter.height))
