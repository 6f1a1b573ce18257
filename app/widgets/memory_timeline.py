"""Memory chart: live bytes per rank over the run, stacked by category, on one shared scale.

Ranks whose samples are identical share a row (labelled ``r0–r3``); beyond :data:`MAX_GROUPS`
distinct rows only the ranks with the lowest, median and highest peak are drawn, and the pane
says how many are not. Each row marks its peak (▼) and names the phase it was reached in; the
axis under the rows names the phases (abbreviated); samples after the cursor are grey.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size

from ..model import MemoryTrack
from ..model.panes import NO_SAMPLES, MemoryFields
from .line_widget import LineWidget
from .memory_chart import (
    CATEGORY_ORDER,
    Cell,
    RankGroup,
    SeriesDigests,
    category_style,
    group_ranks,
    phase_label,
    representative_groups,
    sample_columns,
    stacked_cells,
)
from .render import DIM, Line, format_bytes, rank_label_style

__all__ = ["MemoryTimeline", "device_figures", "ranks_sharing", "NO_DEVICE_FIGURES", "MAX_GROUPS"]

NA = "N/A"
NO_DEVICE_FIGURES = f"CUDA allocator {NA} · NVML {NA}"
"""The pane's subtitle when no rank's latest sample has device figures (CPU runs, no NVML)."""
WITH_DEVICE_FIGURES = "CUDA allocator allocated/reserved · NVML used/total"
"""The pane's subtitle when some rank has device figures (shown after each row's current bytes)."""

MAX_GROUPS = 6
"""Most distinct rows drawn; beyond, the min, median and max ranks by peak stand for the rest."""

MAX_CHART_ROWS = 4
"""Tallest chart (text rows) of one row of ranks; fewer when the screen is short or rows many."""

SHORT_SCREEN = 40
"""Screens shorter than this give the memory pane only :data:`MIN_LINES` lines."""

MIN_LINES = 5
"""Lines the pane may always use, however short the screen (otherwise about 1/screen_share of it)."""

_MARK = Style(color="white", bold=True)


def device_figures(track: MemoryTrack, sharing: int = 1) -> str:
    """`` · CUDA 1.2 GiB/2.0 GiB · NVML 10.3 GiB/79.6 GiB`` from a rank's latest sample, N/A for
    each figure it did not carry. NVML's figure is the whole GPU's: where ``sharing`` ranks use
    the rank's GPU it says so (``NVML whole GPU, 4 ranks: …``), not to be read as the rank's own."""
    cuda = f"{format_bytes(track.cuda.allocated)}/{format_bytes(track.cuda.reserved)}" if track.cuda else NA
    nvml = f"{format_bytes(track.nvml.used)}/{format_bytes(track.nvml.total)}" if track.nvml else NA
    whole = f" whole GPU, {sharing} ranks:" if track.nvml and sharing > 1 else ""
    return f" · CUDA {cuda} · NVML{whole} {nvml}"


def category_keys(names: Iterable[str]) -> Line:
    """The legend's swatches: each memory category in ``names`` in its colour, in the charts' order."""
    line: Line = []
    for name in sorted(set(names), key=lambda c: (CATEGORY_ORDER.index(c) if c in CATEGORY_ORDER else 99, c)):
        line += [Segment("■ ", category_style(name)), Segment(f"{name}  ")]
    return line


def categories_seen(fields: MemoryFields) -> set[str]:
    """Every category any rank held up to the cursor ("other" where live bytes exceeded what the
    categories account for), for a legend shared by several charts."""
    seen: set[str] = set()
    for track in fields.tracks:
        for live, categories in zip(track.live[: track.upto], track.categories[: track.upto]):
            seen.update(categories)
            if live > sum(categories.values()):
                seen.add("other")
    return seen


PEAK_KEY: Line = [Segment("▼ ", _MARK), Segment("peak  ")]
"""The legend's key to the peak marker."""


def ranks_sharing(devices: tuple[str, ...], rank: int) -> int:
    """How many ranks use ``rank``'s CUDA device (1 on CPU or when unknown); ``devices``: each
    rank's, by rank."""
    device = devices[rank] if 0 <= rank < len(devices) else ""
    if not device.startswith("cuda"):
        return 1
    return devices.count(device)


def _with_rest(categories: dict[str, int], live: int) -> dict[str, int]:
    """``categories`` plus any live bytes they do not account for, as "other" (a sample without
    categories, from an older trace, is all "other")."""
    rest = live - sum(categories.values())
    return {**categories, "other": categories.get("other", 0) + rest} if rest > 0 else categories


def _largest_category(categories: dict[str, int], near: bool) -> str:
    """`` · largest: params 204.4 KiB``: the category holding the most at the peak's sample
    (``near``: the peak fell between samples, so the figure is the sample's, and says so); '' where
    the sample has none."""
    if not categories:
        return ""
    name, held = max(categories.items(), key=lambda item: (item[1], item[0]))
    return f" · largest{' near it' if near else ''}: {name} {format_bytes(held)}"


def _peak_sample(track: MemoryTrack) -> int:
    """The first sample at or before the cursor whose running peak is the peak so far (-1: none;
    a bisection, the running peaks never decreasing)."""
    if not track.upto:
        return -1
    return bisect_left(track.peaks, track.peaks[track.upto - 1], 0, track.upto)


def _column_of(sample: int, count: int, width: int) -> int:
    """The first column drawing ``sample`` (see :func:`sample_columns`)."""
    return min(width - 1, -(-sample * width // count)) if count < width else sample * width // count


_Run = tuple[int, str, Style | None]
"""One run of a chart row's neighbouring cells of one style: the column after it, its text, its style."""


def _runs(stacks: list[list[Cell]], rows: int) -> list[list[_Run]]:
    """The chart's text rows, top first, from one stack of cells (bottom first) per column:
    neighbouring cells of one style share a run (the cells' styles are shared objects, memoised)."""
    drawn = []
    for row in range(rows - 1, -1, -1):
        runs: list[_Run] = []
        chars: list[str] = []
        current = None
        for column, stack in enumerate(stacks):
            char, style = stack[row]
            if style is not current:
                if chars:
                    runs.append((column, "".join(chars), current))
                chars, current = [], style
            chars.append(char)
        if chars:
            runs.append((len(stacks), "".join(chars), current))
        drawn.append(runs)
    return drawn


def _cut_at(bright: list[_Run], grey: list[_Run], cut: int) -> Line:
    """One chart row: ``bright``'s runs before column ``cut``, ``grey``'s from it on (the two runs
    meeting there one segment where they share a style, as cells drawn one by one would be)."""
    line: Line = []
    start = 0
    for end, text, style in bright:
        if start >= cut:
            break
        line.append(Segment(text[: min(end, cut) - start], style))
        start = end
    start = 0
    for end, text, style in grey:
        if end > cut:
            piece = text[max(cut - start, 0):]
            if line and line[-1].style is style:
                line[-1] = Segment(line[-1].text + piece, style)
            else:
                line.append(Segment(piece, style))
        start = end
    return line


class MemoryTimeline(LineWidget):
    """Rows of ranks (identical ranks share one), their memory stacked by category over the run.

    Drawn from lines of segments (see :class:`LineWidget`).
    """

    def __init__(self, *, screen_share: int = 4, top: int | None = None, legend: bool = True, **kwargs: object) -> None:
        """``screen_share``: the pane takes about 1/``screen_share`` of the screen's height;
        ``top``: a scale shared with other charts (bytes at full height), else this run's peak;
        ``legend``: whether the chart opens with its categories' legend (charts side by side share one)."""
        super().__init__(**kwargs)
        self.legend = legend
        self.screen_share = screen_share
        self.shared_top = top
        self._fields: MemoryFields | None = None
        self._rows = -1
        self._sized_for = (-1, -1)  # (ranks, screen height) the sticky height was found for
        self._digests = SeriesDigests()
        self._grouped: tuple[MemoryFields | None, list[RankGroup]] = (None, [])
        self._columns: dict[tuple[int, int, int], tuple[object, list[int]]] = {}
        self._live_tops: dict[int, tuple[object, int, int]] = {}
        self._drawn: dict[tuple[int, int, int, int], tuple[object, list[int], list[list[_Run]], list[list[_Run]]]] = {}
        self.set_title("memory")
        self.border_subtitle = f"device: {NO_DEVICE_FIGURES}"

    def show(self, fields: MemoryFields) -> None:
        """Display the ranks' memory."""
        self._fields = fields
        device = any(track.cuda is not None or track.nvml is not None for track in fields.tracks)
        subtitle = f"device: {WITH_DEVICE_FIGURES if device else NO_DEVICE_FIGURES}"
        if subtitle != self.border_subtitle:
            self.border_subtitle = subtitle
        top = self._top(fields)
        title = (f"memory · live bytes by category · one scale: full height = {format_bytes(top)}" if top
                 else "memory · live bytes by category")
        self.set_title(title)
        same = (len(fields.tracks), self.app.size.height) == self._sized_for
        rows = max(self._rows, self._height(fields)) if same else self._height(fields)
        self._sized_for = (len(fields.tracks), self.app.size.height)
        self.lines_changed(layout=rows != self._rows)  # the height only grows: no re-layout per frame
        self._rows = rows

    def _top(self, fields: MemoryFields) -> int:
        """Bytes at the chart's full height: the shared scale, else the highest peak of any rank."""
        return self.shared_top if self.shared_top is not None else max((t.top for t in fields.tracks), default=0)

    def _layout(self, fields: MemoryFields, lines: int | None = None) -> tuple[list[RankGroup], int, int]:
        """The rows to draw, the ranks left out, and the chart's text rows per row: sizing the
        pane, within a budget of about 1/screen_share of the screen's height (a short screen's
        rank panels need the rows more: MIN_LINES there); drawing, within the ``lines`` the pane
        has (its height never shrinks, so when rows of ranks merge the charts grow into it)."""
        height = self.app.size.height
        sizing = lines is None
        if lines is None:
            lines = max(MIN_LINES, height // self.screen_share if height >= SHORT_SCREEN else 0)
        budget = lines - (2 if self.legend else 1)  # less the legend and the axis
        groups, hidden = representative_groups(self._groups(fields), MAX_GROUPS)
        if len(groups) + (1 if hidden else 0) > budget:
            groups, hidden = representative_groups(groups, 3)
        room = budget - (1 if hidden else 0)
        per_group = room // max(1, len(groups))
        cap = MAX_CHART_ROWS if sizing else max(MAX_CHART_ROWS, per_group - 1)
        chart_rows = min(cap, per_group - 1) if per_group >= 3 else 1
        return groups, hidden, chart_rows

    def _groups(self, fields: MemoryFields) -> list[RankGroup]:
        """The ranks of ``fields`` grouped (:func:`group_ranks`), once per frame: sizing the pane and
        drawing it both ask (64 ranks: a fifth of a millisecond each)."""
        if self._grouped[0] is not fields:
            self._grouped = (fields, group_ranks(list(fields.tracks), self._digests))
        return self._grouped[1]

    def _height(self, fields: MemoryFields) -> int:
        if not fields.tracks:
            return 1
        groups, hidden, chart_rows = self._layout(fields)
        per_group = chart_rows + 1 if chart_rows > 1 else 1
        return (2 if self.legend else 1) + len(groups) * per_group + (1 if hidden else 0)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """Legend, each row's chart, the axis (one line for the placeholder): the most lines any
        frame of this run has needed, so rows of ranks merging and splitting never re-lay out."""
        return max(self._rows, 1)

    def build_lines(self, width: int, height: int) -> list[Line]:
        """Legend, then per row a peak line and its stacked chart, then the phase axis."""
        fields = self._fields
        if fields is None or not fields.tracks or not any(t.length for t in fields.tracks):
            return [[Segment(fields.no_samples if fields is not None else NO_SAMPLES, DIM)]]
        groups, hidden, chart_rows = self._layout(fields, lines=max(self._rows, MIN_LINES))
        top = self._top(fields) or 1
        label_width = max(len(g.label) for g in groups) + 1
        # one text row per rank leaves the figures beside the chart: every chart (and the axis
        # under them) keeps the same share of the width, and the figures fit in the rest
        chart_width = max(8, width - label_width if chart_rows > 1 else (width - label_width) * 3 // 5)
        lines: list[Line] = [self._legend(groups, width)] if self.legend else []
        for group in groups:
            lines.extend(self._group_lines(group, fields, top, chart_rows, label_width, chart_width, width))
        if hidden:
            lines.append([Segment(f"{hidden} more ranks between the min and max shown", DIM)])
        longest = max(groups, key=lambda g: g.track.length).track
        lines.append([Segment(" " * label_width), *self._axis(longest, fields.phase_names, chart_width)])
        return lines

    def _live_top(self, track: MemoryTrack) -> int:
        """The most live bytes of any sample up to the cursor, kept per series and extended as
        the cursor moves on (a live run's series are long, and asked every frame)."""
        owner, upto, top = self._live_tops.get(id(track.live), (None, 0, 0))
        if owner is not track.live or upto > track.upto:
            upto, top = 0, 0
        if upto < track.upto:
            top = max(top, max(track.live[upto : track.upto]))
        self._live_tops[id(track.live)] = (track.live, track.upto, top)
        return top

    def _sample_columns(self, track: MemoryTrack, width: int) -> list[int]:
        """:func:`sample_columns` of ``track``, memoised per series, length and width: the chart
        and its axis ask for it every frame, and a replay's series never change length."""
        key = (id(track.live), track.length, width)
        found = self._columns.get(key)
        if found is None or found[0] is not track.live:
            if len(self._columns) > 256:
                self._columns.clear()
            found = self._columns[key] = (track.live, sample_columns(track.live, track.length, width))
        return found[1]

    def _legend(self, groups: list[RankGroup], width: int) -> Line:
        line = category_keys(name for g in groups for name in self._digests.digest(g.track)[1])
        extras: list[Line] = [PEAK_KEY]
        if any(g.track.upto < g.track.length for g in groups):  # a whole run (compare) has nothing after its cursor
            extras.append([Segment("grey: after the cursor", DIM)])
        room = width - sum(len(segment.text) for segment in line)
        for extra in extras:  # the categories' colours always; the marks' keys where they fit
            if sum(len(segment.text) for segment in extra) <= room:
                line += extra
                room -= sum(len(segment.text) for segment in extra)
        return line

    def _group_lines(self, group: RankGroup, fields: MemoryFields, top: int, rows: int, label_width: int,
                     chart_width: int, width: int) -> list[Line]:
        track = group.track
        now = f"now {format_bytes(track.current)}"
        if track.cuda is not None or track.nvml is not None:
            now += device_figures(track, ranks_sharing(fields.devices, group.ranks[0]))
        label = Segment(group.label.ljust(label_width), rank_label_style(group.ranks[0], bold=False))
        peak_at = _peak_sample(track)
        peak_texts: list[str] = []  # longest first: the marker line uses the first that fits
        if peak_at >= 0:
            phase = track.phases[peak_at]
            between = " (between samples)" if track.peak > self._live_top(track) else ""
            peak = f"peak {format_bytes(track.peak)}"
            where = f" in {fields.phase_names.get(phase, f'phase {phase + 1}')}"
            largest = _largest_category(track.categories[peak_at], near=bool(between))
            peak_texts = [f"{peak}{between}{where}{largest}", f"{peak}{between}{largest}", f"{peak}{largest}",
                          f"{peak}{between}{where}", f"{peak}{between}", peak]
        if rows == 1:  # one text row: the chart, then the longest figures that fit beside it
            room = width - label_width - chart_width
            choices = [f" {now} · {text}" for text in peak_texts] + [f" {now}"]
            figures = next((f for f in choices if len(f) <= room), choices[-1][:max(room, 0)])
            cells = self._cells(track, top, 1, self._sample_columns(track, chart_width))
            return [[label, *cells[0], Segment(figures)]]
        marker: Line = [label]
        if peak_at >= 0:
            column = _column_of(peak_at, track.length, chart_width)
            left, right = " " * column, ""
            for text in peak_texts:  # after the marker if it fits, else before it, else shorter
                if column + 2 + len(text) <= chart_width:
                    right = f" {text}"
                    break
                if len(text) + 1 <= column:
                    left = f"{text} ".rjust(column)
                    break
            used = len(left) + 1 + len(right)
            marker += [Segment(left), Segment("▼", _MARK), Segment(right)]
            room = chart_width - used
            if room > len(now) + 1:
                marker.append(Segment(now.rjust(room), DIM))
        else:
            marker.append(Segment(now.rjust(chart_width), DIM))
        chart = self._cells(track, top, rows, self._sample_columns(track, chart_width))
        return [marker, *([Segment(" " * label_width), *row] for row in chart)]

    def _cells(self, track: MemoryTrack, top: int, rows: int, columns: list[int]) -> list[Line]:
        """The chart's text rows, top first: one stacked column per chart column (``columns``:
        the sample each draws, in order), grey from the first column after the cursor on. The
        rows are drawn all bright and all grey once per series, scale, height and columns (the
        chart covers the whole run: a seek moves only where the grey begins) and cut there."""
        key = (id(track.live), top, rows, id(columns))
        found = self._drawn.get(key)
        if found is None or found[0] is not track.live or found[1] is not columns:
            if len(self._drawn) > 256:
                self._drawn.clear()
            drawn = [_runs([stacked_cells(_with_rest(track.categories[i], track.live[i]), top, rows, dim=dim)
                            for i in columns], rows) for dim in (False, True)]
            found = self._drawn[key] = (track.live, columns, drawn[0], drawn[1])
        cut = bisect_left(columns, track.upto)  # the first column drawing a sample after the cursor
        return [_cut_at(bright, grey, cut) for bright, grey in zip(found[2], found[3])]

    def _axis(self, track: MemoryTrack, names: dict[int, str], width: int) -> Line:
        """Phase labels under the chart, each at the column where its run of phases begins (at the
        right edge, the boundary mark alone where its label would not fit whole)."""
        columns = self._sample_columns(track, width)
        text = [" "] * width
        previous = None
        next_free = 0
        phases = track.phases
        previous_phase = None
        for column, sample in enumerate(columns):
            phase = phases[sample]
            if phase == previous_phase:  # most columns: the one before's phase, whose label is said
                continue
            previous_phase = phase
            label = phase_label(names.get(phase, str(phase + 1)))
            if label == previous:
                continue
            previous = label
            if column < next_free:
                continue
            room = width - column
            piece = "┊" + label if len(label) < room else "┊"[:room]  # a label whole, or none: not "hop" for "hop 30"
            text[column:column + len(piece)] = piece
            next_free = column + len(piece) + 1
        return [Segment("".join(text), DIM)]
