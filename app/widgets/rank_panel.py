"""One rank's panel: every named buffer as provenance-coloured cells, its last collective, its status."""

from __future__ import annotations

import textwrap

import msgspec

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.message import Message

from collviz.runtime.wire.protocol import SIZES_NOT_READ, Buffer, Freed

from ..model import RankView
from .line_widget import LineWidget
from .render import (
    BOLD,
    DIM,
    Line,
    buffer_lines,
    format_bytes,
    lines_to_text,
    provenance_lines,
    rank_colour,
    short_blocks,
)

__all__ = ["RankPanel", "rank_lines", "rank_body", "collective_line", "fitted_title", "MAX_GRID_ROWS", "MIN_NAME"]

MAX_GRID_ROWS = 16
"""Most grid lines a buffer gets in a panel; fewer (the most that fit) on a shorter panel."""

_STATE_STYLES = {
    "pending": Style(dim=True),
    "running": Style(color="green"),
    "waiting": Style(bold=True, italic=True),  # neutral: every hue is some rank's
    "done": Style(color="cyan"),
    "error": Style(color="red", bold=True),
}
_IN_FLIGHT = Style(color="yellow")
_WAITED_FOR = Style(color="red", bold=True)
"""A rank others wait for: what the stall says of it (where it is instead)."""
_FREED = Style(dim=True, strike=True)


def _call_parts(view: RankView, mask_volatile: bool) -> tuple[Line, Line, Line, Line]:
    """The op, `` (reduce op)``, `` bytes-in→bytes-out`` and `` time`` of the rank's call."""
    collective = view.collective
    assert collective is not None
    reduce_op = [Segment(f" ({collective.reduce_op})")] if collective.reduce_op else []
    sizes = [] if collective.dtype == SIZES_NOT_READ else \
        [Segment(f" {format_bytes(collective.bytes_in)}→{format_bytes(collective.bytes_out)}")]
    if collective.edge == "begin":
        timing = [Segment(" in flight…", _IN_FLIGHT)]
    elif collective.duration_ns is not None:
        took = "‒.‒‒ ms" if mask_volatile else f"{collective.duration_ns / 1e6:.2f} ms"
        timing = [Segment(f" {took}", DIM)]
    else:
        timing = []
    return [Segment(collective.op, BOLD)], reduce_op, sizes, timing


def _fits(line: Line, width: int | None) -> bool:
    return width is None or sum(cell_len(segment.text) for segment in line) <= width


def collective_line(view: RankView, mask_volatile: bool = False, width: int | None = None) -> Line:
    """``op (reduce op) bytes-in→bytes-out time`` of the rank's collective in this step, on one
    line: where ``width`` is too narrow, whole parts are left out (reduce op, then time, then
    bytes), so no number ever loses its unit to the edge."""
    op, reduce_op, sizes, timing = _call_parts(view, mask_volatile)
    for line in ([*op, *reduce_op, *sizes, *timing], [*op, *sizes, *timing], [*op, *sizes]):
        if _fits(line, width):
            return line
    return op


def _collective_lines(view: RankView, mask_volatile: bool, width: int | None = None) -> list[Line]:
    """The rank's call as :func:`collective_line` says it, on one line where it fits; in a panel
    too narrow for it, its parts (the op with its reduce op, the bytes, the time) are packed on
    as few lines as hold them whole, so the bytes and time stay on screen, each with its unit."""
    op, reduce_op, sizes, timing = _call_parts(view, mask_volatile)
    lines: list[Line] = [[*op, *reduce_op] if _fits([*op, *reduce_op], width) else op]
    for part in (sizes, timing):
        if not part:
            continue
        if _fits([*lines[-1], *part], width):
            lines[-1] = [*lines[-1], *part]
        else:  # a part starting a line loses its leading space
            lines.append([Segment(part[0].text.lstrip(), part[0].style), *part[1:]])
    return lines


MAX_PARTIAL_RUNS = 4
"""Partial sums named under a buffer's grid before the rest are counted."""


def _partial_sums_lines(buffer: Buffer, width: int) -> list[Line]:
    """Under a grid holding sums of some but not all of the ranks in it (a ring's partial sums):
    which ranks each range holds, ``Σ [0:2] r0+r3 · [2:4] r1+r2``. The shade says how many; this
    line says which. A range that would pass ``width`` starts a line of its own, indented under
    the first, so no rank's name is cut at the panel's edge."""
    runs = buffer.provenance or []
    summed = [run for run in runs if len(run.ranks) > 1]
    widest = max((len(run.ranks) for run in runs), default=0)
    partial = [run for run in summed if len(run.ranks) < widest or len({tuple(r.ranks) for r in summed}) > 1]
    if not partial:
        return []
    parts: list[Line] = [[Segment(f" [{run.start}:{run.start + run.length}] ", DIM),
                          Segment("+".join(f"r{r}" for r in run.ranks), BOLD)] for run in partial[:MAX_PARTIAL_RUNS]]
    if len(partial) > MAX_PARTIAL_RUNS:
        parts.append([Segment(f" … {len(partial) - MAX_PARTIAL_RUNS} more", DIM)])
    lines: list[Line] = [[Segment(" Σ", DIM)]]
    for part in parts:
        if len(lines[-1]) > 1 and not _fits([*lines[-1], *part], width if width > 0 else None):
            lines.append([Segment("  ", DIM)])
        lines[-1] = [*lines[-1], *part]
    return lines


def _freed_line(freed: Freed, width: int) -> Line:
    """``gathered freed in step 4 (64 B)``, struck through: a buffer this rank released; in a
    narrow panel the size goes first, then the name's first words."""
    size = f" ({format_bytes(freed.bytes)})" if freed.bytes else ""
    when = f" freed in step {freed.phase + 1}"
    if width > 0 and cell_len(freed.name) + len(when) + len(size) > width:
        size = ""
    name = _shortened(freed.name, width - len(when)) if width > 0 else freed.name
    return [Segment(name, _FREED), Segment(f"{when}{size}", DIM)]


def _shortened(name: str, room: int) -> str:
    """``name`` in ``room`` columns (at least :data:`MIN_NAME`): with its blocks short
    (``b0 W_query shard``: four blocks' shards stay apart), else losing its first words
    (``…W_query shard``; a number stays with the word it counts, "block 0")."""
    if cell_len(name) <= room:
        return name
    if cell_len(short := short_blocks(name)) <= room:
        return short
    keep = max(MIN_NAME, room - 1)
    words = name.split(" ")
    tails = [" ".join(words[i:]) for i in range(1, len(words)) if not words[i].isdigit()]
    return "…" + next((tail for tail in tails if cell_len(tail) <= keep), _last_cells(name, keep))


def _last_cells(text: str, cells: int) -> str:
    """The end of ``text`` that fits in ``cells`` terminal cells."""
    tail = ""
    for char in reversed(text):
        if cell_len(char + tail) > cells:
            break
        tail = char + tail
    return tail


MIN_NAME = 8
"""Columns a buffer's name keeps when its title is shortened to fit."""


def fitted_title(title: Line, width: int) -> Line:
    """A buffer's title line (name, ``[shape]``, moment, maybe ``· step k``) within ``width``
    columns. What goes first: the step note, then the shape (the grid below shows it), then the
    name's first words (``…grad (averaged)``), then the moment."""
    def length(line: Line) -> int:
        return sum(cell_len(segment.text) for segment in line)

    if width <= 0 or length(title) <= width:
        return title
    name, shape, moment = title[0], title[1], title[2] if len(title) > 2 else Segment("")
    line = [name, shape, moment]  # without the step note
    if length(line) > width:
        line = [name, Segment(" "), moment]
    if length(line) > width:
        line = [Segment(_shortened(name.text, width - length(line[1:])), name.style), *line[1:]]
    if length(line) > width:
        line = line[:1]
    return line


def _previous_lines(buffer: Buffer, step: int, width: int, max_rows: int | None, detail: bool,
                    padding: int) -> list[Line]:
    """A buffer's value before step ``step`` changed it: its lines titled ``before``, whatever
    moment it was reported at, and ``(from step k)`` where an earlier step reported it."""
    shown = buffer_lines(msgspec.structs.replace(buffer, moment="before"), width, max_rows=max_rows, detail=detail,
                         padding=padding)
    shown[0] = fitted_title(shown[0], width)
    if buffer.phase != step:
        shown[0:1] = _with_step_mark(shown[0], buffer.phase, width)
    return shown


def _with_step_mark(title: Line, phase: int, width: int) -> list[Line]:
    """A fitted ``title`` of a buffer held since step ``phase + 1`` with ``(from step k)`` after
    it, or where that would not fit, on a line of its own below it: never at the cost of the name."""
    mark = f" (from step {phase + 1})"
    if _fits([*title, Segment(mark)], width):
        return [[*title, Segment(mark, DIM)]]
    return [title, [Segment(mark.strip(), DIM)]]


def rank_lines(
    view: RankView,
    width: int,
    *,
    detail: bool = False,
    status: bool = True,
    max_rows: int | None = None,
    mask_volatile: bool = False,
    padding: int = 0,
) -> list[Line]:
    """The lines of a rank panel: status, what a lasting stall says of the rank (others wait for it),
    what this step freed, buffers (with provenance lists in ``detail``; a buffer this step changed
    after its value before), what earlier steps freed, collective.

    ``status`` puts the rank's status first; ``padding`` widens every cell (projector layout);
    ``max_rows`` limits each buffer's grid; ``mask_volatile`` hides the collective's duration.
    """
    lines: list[Line] = [[Segment(view.status, _STATE_STYLES[view.state])]] if status else []
    lines.extend([Segment(part, _WAITED_FOR)] for part in textwrap.wrap(view.note, max(width, 8)))
    now_freed = [freed for freed in view.freed if freed.phase == view.step]  # this step's story: first
    lines.extend(_freed_line(freed, width) for freed in now_freed)
    before = {buffer.name: buffer for buffer in view.previous}
    for buffer in view.buffers:
        if buffer.name in before:  # changed in this step: its value before, then after
            lines.extend(_previous_lines(before[buffer.name], view.step, width, max_rows, detail, padding))
        shown = buffer_lines(buffer, width, max_rows=max_rows, detail=detail, padding=padding)
        shown[0] = fitted_title(shown[0], width)
        if view.step >= 0 and buffer.phase != view.step:  # held since an earlier step: say which
            shown[0:1] = _with_step_mark(shown[0], buffer.phase, width)
        lines.extend(shown)
        if detail and buffer.provenance:
            lines.extend(provenance_lines(buffer))
            lines.append([])
        elif buffer.provenance and max_rows != 1:
            lines.extend(_partial_sums_lines(buffer, width))
    lines.extend(_freed_line(freed, width) for freed in view.freed if freed not in now_freed)
    if view.collective is not None:
        lines.extend(_collective_lines(view, mask_volatile, width))
    if detail and view.memory.upto:
        memory = view.memory
        lines.append([Segment(f"memory {format_bytes(memory.current)} live, peak {format_bytes(memory.peak)}")])
    return lines


def rank_body(view: RankView, width: int, **options: object) -> Text:
    """:func:`rank_lines` as one ``Text`` (same options)."""
    return lines_to_text(rank_lines(view, width, **options))  # type: ignore[arg-type]


class RankPanel(LineWidget):
    """What one rank holds at the cursor; clicking it asks for the rank's detail view.

    Drawn from lines of segments (see :class:`LineWidget`); the rank's status is the border's
    subtitle.
    """

    REPORTS_COLOURS = True

    class Selected(Message):
        """The user clicked the panel of ``rank``."""

        def __init__(self, rank: int) -> None:
            super().__init__()
            self.rank = rank

    def __init__(self, rank: int, *, mask_volatile: bool = False, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.rank = rank
        self.padding = 0
        """Extra columns per cell: 2 in the projector layout."""
        self.mask_volatile = mask_volatile
        self._view: RankView | None = None
        self._grid_rows = MAX_GRID_ROWS
        """The grid lines the last body fitted with: tried first, as frames mostly repeat it."""
        self._title = f"rank {rank}"
        self._status = ""
        self.border_title = Text(self._title)
        self.styles.border_title_color = rank_colour(rank)

    def show(self, view: RankView) -> None:
        """Display ``view`` (refreshes only when it changed)."""
        if view == self._view:
            return
        self._view = view
        device = f" · {view.device}" if view.device else ""
        title = f"rank {view.rank}{device}"
        if title != self._title:  # plain Text: a device name or error from the run is never markup
            self._title = title
            self.border_title = Text(title)
        if view.status != self._status:
            self._status = view.status
            self.border_subtitle = Text(view.status)
        self.set_class(view.state == "error", "-error")
        self.set_class(view.state == "waiting", "-waiting")
        self.lines_changed()

    def build_lines(self, width: int, height: int) -> list[Line]:
        """The body at this size: each grid gets the most lines (up to :data:`MAX_GRID_ROWS`)
        with which the body fits ``height`` (the last frame's number checked first, else found by
        bisection: more lines never make it shorter); if even one line per buffer is too long,
        the latest step's buffers come first and the cut is said."""
        view = self._view
        if view is None:
            return [[Segment("waiting for the worker…", DIM)]]

        def body(rows: int) -> list[Line]:
            return rank_lines(view, width, status=False, max_rows=rows, mask_volatile=self.mask_volatile,
                              padding=self.padding)

        last = self._grid_rows  # frames mostly repeat the last fit: two calls confirm it
        lines = body(last)
        fitting: list[Line] | None
        if len(lines) <= height:
            fitting, low, high = lines, last + 1, MAX_GRID_ROWS
            if low <= high and len(body(low)) > height:
                high = low - 1
        else:
            fitting, low, high = None, 1, last - 1
        while low <= high:
            middle = (low + high) // 2
            lines = body(middle)
            if len(lines) <= height:
                fitting, low, self._grid_rows = lines, middle + 1, middle
            else:
                high = middle - 1
        if fitting is not None:
            return fitting
        self._grid_rows = 1
        # Still too long: this step's buffers come first (see RankView), so say what is cut; the
        # step's call (its last lines) stays, with its bytes and time.
        lines = body(1)
        call = len(_collective_lines(view, self.mask_volatile, width)) if view.collective is not None else 0
        if call >= height:
            call = 0
        if height and len(lines) > height:
            more = len(lines) - height + 1
            note = next((text for text in (f"… {more} more lines: click for all", f"… {more} more (click)")
                         if len(text) <= width), f"…+{more}")
            lines = [*lines[: height - 1 - call], [Segment(note, DIM)], *lines[len(lines) - call:]]
        return lines

    def body(self) -> Text:
        """The panel's body as it is drawn now, as text."""
        return lines_to_text(self.build_lines(*self.content_size))

    def on_click(self, event: events.Click) -> None:
        """Ask the screen to focus this rank."""
        event.stop()
        self.post_message(self.Selected(self.rank))
