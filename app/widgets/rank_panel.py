"""One rank's panel: every named buffer as provenance-coloured cells, its last collective, its status."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.message import Message

from collviz.runtime.wire.protocol import Freed

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
)

__all__ = ["RankPanel", "rank_lines", "rank_body", "ROW_BUDGETS"]

ROW_BUDGETS: tuple[int, ...] = (8, 4, 2, 1)
"""Grid lines per buffer tried in turn until a panel's body fits its height."""

_STATE_STYLES = {
    "pending": Style(dim=True),
    "running": Style(color="green"),
    "waiting": Style(bold=True, italic=True),  # neutral: every hue is some rank's
    "done": Style(color="cyan"),
    "error": Style(color="red", bold=True),
}
_IN_FLIGHT = Style(color="yellow")
_FREED = Style(dim=True, strike=True)


def _collective_line(view: RankView, mask_volatile: bool, width: int | None = None) -> Line:
    """``op (reduce op) bytes-in→bytes-out time`` of the rank's collective in this step; where
    ``width`` is too narrow, whole parts are left out (reduce op, then time, then bytes), so no
    number ever loses its unit to the panel's edge."""
    collective = view.collective
    assert collective is not None
    reduce_op = [Segment(f" ({collective.reduce_op})")] if collective.reduce_op else []
    sizes = [Segment(f" {format_bytes(collective.bytes_in)}→{format_bytes(collective.bytes_out)}")]
    if collective.edge == "begin":
        timing = [Segment(" in flight…", _IN_FLIGHT)]
    elif collective.duration_ns is not None:
        took = "‒.‒‒ ms" if mask_volatile else f"{collective.duration_ns / 1e6:.2f} ms"
        timing = [Segment(f" {took}", DIM)]
    else:
        timing = []
    op = [Segment(collective.op, BOLD)]
    for line in ([*op, *reduce_op, *sizes, *timing], [*op, *sizes, *timing], [*op, *sizes], op):
        if width is None or sum(len(segment.text) for segment in line) <= width:
            return line
    return op


MAX_PARTIAL_RUNS = 4
"""Partial sums named under a buffer's grid before the rest are counted."""


def _partial_sums_line(buffer) -> list[Line]:
    """Under a grid holding sums of some but not all of the ranks in it (a ring's partial sums):
    which ranks each range holds, ``Σ [0:2] r0+r3 · [2:4] r1+r2``. The shade says how many; this
    line says which."""
    summed = [run for run in buffer.provenance if len(run.ranks) > 1]
    widest = max((len(run.ranks) for run in buffer.provenance), default=0)
    partial = [run for run in summed if len(run.ranks) < widest or len({tuple(r.ranks) for r in summed}) > 1]
    if not partial:
        return []
    line: Line = [Segment(" Σ", DIM)]
    for run in partial[:MAX_PARTIAL_RUNS]:
        line += [Segment(f" [{run.start}:{run.start + run.length}] ", DIM),
                 Segment("+".join(f"r{r}" for r in run.ranks), BOLD)]
    if len(partial) > MAX_PARTIAL_RUNS:
        line.append(Segment(f" … {len(partial) - MAX_PARTIAL_RUNS} more", DIM))
    return [line]


def _freed_line(freed: Freed) -> Line:
    """``gathered freed in step 4 (64 B)``, struck through: a buffer this rank released."""
    size = f" ({format_bytes(freed.bytes)})" if freed.bytes else ""
    return [Segment(freed.name, _FREED), Segment(f" freed in step {freed.phase + 1}{size}", DIM)]


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
    """The lines of a rank panel: status, buffers (with provenance lists in ``detail``), collective.

    ``status`` puts the rank's status first; ``padding`` widens every cell (projector layout);
    ``max_rows`` limits each buffer's grid; ``mask_volatile`` hides the collective's duration.
    """
    lines: list[Line] = [[Segment(view.status, _STATE_STYLES[view.state])]] if status else []
    for buffer in view.buffers:
        shown = buffer_lines(buffer, width, max_rows=max_rows, detail=detail, padding=padding)
        if view.step >= 0 and buffer.phase != view.step:  # held since an earlier step: say which
            shown[0] = [*shown[0], Segment(f" · step {buffer.phase + 1}", DIM)]
        lines.extend(shown)
        if detail and buffer.provenance:
            lines.extend(provenance_lines(buffer))
            lines.append([])
        elif buffer.provenance and max_rows != 1:
            lines.extend(_partial_sums_line(buffer))
    lines.extend(_freed_line(freed) for freed in view.freed)
    if view.collective is not None:
        lines.append(_collective_line(view, mask_volatile, width))
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

    class Selected(Message):
        """The user clicked the panel of ``rank``."""

        def __init__(self, rank: int) -> None:
            super().__init__()
            self.rank = rank

    def __init__(self, rank: int, *, mask_volatile: bool = False, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.rank = rank
        self.padding = 0
        """Extra columns per cell: 2 in the projector layout."""
        self.mask_volatile = mask_volatile
        self._view: RankView | None = None
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
        """The body at this size: grids shrink (see :data:`ROW_BUDGETS`) until it fits ``height``;
        if even one row per buffer is too long, the latest step's buffers come first and the cut
        is said."""
        view = self._view
        if view is None:
            return [[Segment("waiting for the worker…", DIM)]]
        lines: list[Line] = []
        for rows in ROW_BUDGETS:
            lines = rank_lines(view, width, status=False, max_rows=rows,
                               mask_volatile=self.mask_volatile, padding=self.padding)
            if len(lines) <= height:
                return lines
        # Still too long: this step's buffers come first (see RankView), so say what is cut.
        lines = rank_lines(view, width, status=False, max_rows=ROW_BUDGETS[-1], mask_volatile=self.mask_volatile,
                           padding=self.padding)
        if height and len(lines) > height:
            lines = [*lines[: height - 1], [Segment(f"… {len(lines) - height + 1} more lines: click for all", DIM)]]
        return lines

    def body(self) -> Text:
        """The panel's body as it is drawn now, as text."""
        return lines_to_text(self.build_lines(*self.content_size))

    def on_click(self, event: events.Click) -> None:
        """Ask the screen to focus this rank."""
        event.stop()
        self.post_message(self.Selected(self.rank))
