"""Bench plot: busbw versus message size, one series per operation, as braille lines and markers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

from rich.segment import Segment
from rich.style import Style

from ..model import BenchSeries, BenchView
from .line_widget import LineWidget
from .render import BOLD, DIM, Line

__all__ = ["BenchPlot", "SERIES_COLOURS", "SERIES_MARKERS", "short_bytes", "nice_top"]

SERIES_COLOURS: tuple[str, ...] = (
    "#22d3ee", "#f472b6", "#facc15", "#4ade80", "#fb923c", "#a78bfa", "#f87171", "#60a5fa",
)
"""Colour of each operation's series, in the order the run declared the operations."""

SERIES_MARKERS = "●▲■◆✚✖★◉"
"""Marker drawn at each measured point of a series (cycled like the colours)."""

_BRAILLE_BITS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
"""Bit of the braille dot in row ``dy`` (0 = top) and column ``dx`` of a cell."""

X_TITLE = "message size S (bytes, log₂ scale; K, M, G binary)"
Y_TITLE = "busbw (GB/s = 10⁹ B/s)"


def short_bytes(count: int) -> str:
    """A tick label: ``512``, ``1K``, ``64K``, ``16M``, ``1.5K`` (binary units, as ``--sizes`` takes)."""
    for unit, scale in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if count >= scale:
            value = count / scale
            return f"{value:g}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return str(count)


def nice_top(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k that is at least ``value`` (1 for nothing to show)."""
    if not value > 0 or not math.isfinite(value):
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value * (1 - 1e-12):
            return step * magnitude
    return 10 * magnitude


@lru_cache(maxsize=64)
def _colour(number: int) -> Style:
    """Series ``number``'s style (one shared object: line widgets key strips on style identity)."""
    return Style(color=SERIES_COLOURS[number % len(SERIES_COLOURS)])


class BenchPlot(LineWidget):
    """busbw (GB/s, linear from 0) against the message size S (bytes, log₂), one series per op.

    Points are the rows ``bench_report`` derives from the events up to the cursor, so the plot
    grows as a recorded sweep replays. Consecutive sizes of an operation are joined with braille
    lines; each point is the operation's marker. A legend gives each operation's busbw factor.
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self._bench: BenchView | None = None
        self.border_title = "bench · busbw versus message size, per operation"

    @property
    def series(self) -> tuple[BenchSeries, ...]:
        """The series shown (one per operation), empty before a bench view arrived."""
        return self._bench.series if self._bench is not None else ()

    def show(self, bench: BenchView) -> None:
        """Display ``bench`` (nothing is redrawn when it did not change)."""
        if bench == self._bench:
            return
        self._bench = bench
        self.border_subtitle = f"{len(bench.rows)} of {bench.cases} sizes measured · {bench.world_size} ranks"
        self.lines_changed()

    def build_lines(self, width: int, height: int) -> list[Line]:
        """Y title, plot rows with y ticks, x axis with size ticks, x title, legend."""
        bench = self._bench
        if bench is None or not bench.rows:
            return [[Segment("no size measured yet: the plot grows as each size finishes", DIM)]]
        series = list(bench.series)
        top = nice_top(max(row.busbw_gbps for row in bench.rows))
        sizes = [row.size for row in bench.rows if row.size > 0]
        if not sizes:
            return [[Segment("no size above 0 bytes measured yet", DIM)]]
        low, high = math.log2(min(sizes)), math.log2(max(sizes))
        op_width = max(len(s.op) for s in series)
        legend = [self._legend_line(number, s, op_width, width) for number, s in enumerate(series)]
        plot_height = max(3, height - 4 - len(legend))
        ticks = self._y_ticks(top, plot_height)
        label_width = max(len(text) for text in ticks.values()) + 1
        plot_width = max(8, width - label_width - 1)
        cells = self._canvas(series, top, low, high, plot_width, plot_height)
        lines: list[Line] = [[Segment(Y_TITLE, BOLD)]]
        for row in range(plot_height):
            label = ticks.get(row, "")
            line: Line = [Segment(label.rjust(label_width - 1) + " ", DIM), Segment("┤" if label else "│", DIM)]
            line.extend(cells[row])
            lines.append(line)
        axis, labels = self._x_axis(low, high, plot_width)
        lines.append([Segment(" " * label_width + "└", DIM), Segment(axis, DIM)])
        lines.append([Segment(" " * (label_width + 1)), Segment(labels)])
        lines.append([Segment(" " * (label_width + 1)), Segment(X_TITLE.center(plot_width).rstrip(), BOLD)])
        lines.extend(legend)
        return lines

    @staticmethod
    def _legend_line(number: int, series: BenchSeries, op_width: int, width: int) -> Line:
        """``● all_reduce  busbw = algbw × 2(n−1)/n = 2·3/4 = 1.5  · 16K: 0.00248 GB/s``: the factor,
        then the last point where it fits in ``width``."""
        colour = _colour(number)
        marker = SERIES_MARKERS[number % len(SERIES_MARKERS)]
        line: Line = [Segment(f"{marker} ", colour), Segment(series.op.ljust(op_width), colour + BOLD),
                      Segment(f"  busbw = algbw × {series.factor_text}")]
        if series.rows:
            last = series.rows[-1]
            tail = f"  · {short_bytes(last.size)}: {last.busbw_gbps:.3g} GB/s"
        else:
            tail = "  · not measured yet"
        if sum(len(segment.text) for segment in line) + len(tail) <= width:
            line.append(Segment(tail, DIM))
        return line

    @staticmethod
    def _y_ticks(top: float, rows: int) -> dict[int, str]:
        """Row (0 = top) → label: 0, ``top`` and round values between, at least two rows apart."""
        mantissa = round(top / 10 ** math.floor(math.log10(top)), 6)
        choices = (4, 2, 1) if mantissa == 2 else (5, 1)
        intervals = next((n for n in choices if (rows - 1) >= 2 * n), 1)
        ticks = {}
        for k in range(intervals + 1):
            ticks[round((rows - 1) * (1 - k / intervals))] = f"{top * k / intervals:.3g}"
        return ticks

    @staticmethod
    def _x_position(log_size: float, low: float, high: float, span: int) -> int:
        """Position of ``log_size`` in ``0..span-1`` (the middle when every size is the same)."""
        if high <= low:
            return (span - 1) // 2
        return round((log_size - low) / (high - low) * (span - 1))

    def _x_axis(self, low: float, high: float, width: int) -> tuple[str, str]:
        """The axis line with ┬ at each power of two that gets a label, and the labels under it."""
        axis = ["─"] * width
        labels = [" "] * width
        free_from = 0
        for power in range(math.ceil(low - 1e-9), math.floor(high + 1e-9) + 1):
            column = self._x_position(power, low, high, width * 2) // 2
            text = short_bytes(2**power)
            start = max(0, min(width - len(text), column - len(text) // 2))
            if start < free_from:
                continue
            axis[column] = "┬"
            labels[start:start + len(text)] = text
            free_from = start + len(text) + 1
        return "".join(axis), "".join(labels).rstrip()

    def _canvas(self, series: Sequence[BenchSeries], top: float, low: float, high: float, width: int,
                height: int) -> list[Line]:
        """The plot area: braille lines between consecutive points, markers at the points."""
        bits = [[0] * width for _ in range(height)]
        owner = [[-1] * width for _ in range(height)]
        marks: dict[tuple[int, int], int] = {}

        def dot(x: int, y: int, number: int) -> None:
            row, column = height - 1 - y // 4, x // 2
            if 0 <= row < height and 0 <= column < width:
                bits[row][column] |= _BRAILLE_BITS[3 - y % 4][x % 2]
                owner[row][column] = number

        for number, one in enumerate(series):
            points = [(self._x_position(math.log2(size), low, high, width * 2),
                       max(0, min(height * 4 - 1, round(busbw / top * (height * 4 - 1)))))
                      for size, busbw in one.points if size > 0]
            for (x0, y0), (x1, y1) in zip(points, points[1:]):
                steps = max(abs(x1 - x0), abs(y1 - y0), 1)
                for k in range(steps + 1):
                    dot(round(x0 + (x1 - x0) * k / steps), round(y0 + (y1 - y0) * k / steps), number)
            for x, y in points:
                marks[(height - 1 - y // 4, x // 2)] = number
        lines: list[Line] = []
        for row in range(height):
            line: Line = []
            for column in range(width):
                if (row, column) in marks:
                    number = marks[(row, column)]
                    line.append(Segment(SERIES_MARKERS[number % len(SERIES_MARKERS)], _colour(number) + BOLD))
                elif bits[row][column]:
                    line.append(Segment(chr(0x2800 + bits[row][column]), _colour(owner[row][column])))
                else:
                    line.append(Segment(" "))
            lines.append(_merged(line))
        return lines


def _merged(line: Line) -> Line:
    """``line`` with neighbouring segments of the same style joined (fewer segments to paint)."""
    out: Line = []
    for segment in line:
        if out and out[-1].style == segment.style:
            out[-1] = Segment(out[-1].text + segment.text, segment.style)
        else:
            out.append(segment)
    return out
