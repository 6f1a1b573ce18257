"""The transfers pane: what moved between ranks in the current step."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate
from operator import attrgetter

from rich.cells import cell_len
from rich.text import Span, Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.visual import Visual

from collviz.runtime.wire.protocol import Collective, Transfer

from ..model.panes import TransferFields
from ..model.transfer_ends import range_inputs, source_range
from ..model.view import MAX_TRANSFERS
from .render import format_bytes, palette, rank_style
from .text_content import TextToContent
from .text_pane import PaneFrame, PaneRows

__all__ = ["Listing", "TransfersPane", "transfers_title"]

MAX_LINES = MAX_TRANSFERS
"""Most transfers listed (the pane scrolls, saying so) before the rest are only counted: all the
view carries."""

KIND_LABELS = {"logical": "logical data movement", "p2p": "p2p send/recv"}
"""How each transfer kind is labelled: logical is what the collective moved, p2p a real send/recv."""

_DRAWN = attrgetter("kind", "bytes", "src", "dst", "buffer", "start", "length", "hop")
"""What a transfer's line is drawn from (with its call's :func:`~..model.transfer_ends.range_inputs`):
not its number, time or step, which differ from one step's transfers to the next step's alike."""


def transfers_title(fields: TransferFields) -> str:
    """``transfers · N``, and where a flood was put in order among only its first arrivals, that;
    ``transfers · not recorded`` for a step without any in a run that records none."""
    if not fields.count and fields.not_recorded:
        return "transfers · not recorded"
    among = fields.sorted_among
    partly = f" · listed in order among the first {among:,} to arrive" if 0 < among < fields.count else ""
    return f"transfers · {fields.count}{partly}"


@dataclass(frozen=True)
class Listing:
    """The transfers pane's lines, unstyled, and where their styles go: ``lines[0]`` heads the
    list (italic, in two parts: the kinds, up to ``kinds``, and where they went), a line per transfer listed follows, its sender's and receiver's labels at
    ``ends[i]`` (``(start, stop, rank)`` of each), and the lines after those are dim (``… N more``,
    and the blank row the listing ends in). A ``quiet`` listing is one dim line saying why nothing
    is listed. ``colours``: the rank palette its labels are drawn in (a listing in other colours
    is another listing).

    The lines are kept as strings, each styled and rendered only as it comes into view: of a
    64-line listing a pane shows about five rows, and a styled ``Text`` of all of it, made
    Textual's ``Content`` and wrapped, cost 2.5 M instructions a new step (callgrind)."""

    lines: tuple[str, ...]
    ends: tuple[tuple[int, int, int, int, int, int], ...] = ()
    kinds: int = 0
    quiet: bool = False
    colours: tuple[str, ...] = ()

    def line_text(self, index: int) -> Text:
        """Line ``index``, styled."""
        line = self.lines[index]
        if self.quiet:
            return Text(line, "dim")
        if index == 0:
            return Text(line, spans=[Span(0, self.kinds, "italic"), Span(self.kinds, len(line), "italic")])
        if index <= len(self.ends):
            sender, sent, src, receiver, received, dst = self.ends[index - 1]
            return Text(line, spans=[Span(sender, sent, rank_style(src)), Span(receiver, received, rank_style(dst))])
        return Text(line, spans=[Span(0, len(line), "dim")] if line else [])


class TransfersPane(PaneFrame, ScrollView, can_focus=False):
    """One line per transfer: bytes, the sender and the range of its input it sent, where that is
    known (:mod:`~..model.transfer_ends`), → the receiver and the range it arrived in (and the hop
    of a p2p step).

    The kind and, when every transfer moves the same buffer, its name head the list, so each line
    stays short; a line too long for the pane wraps rather than being cut mid-range. The pane
    scrolls (the mouse wheel; it takes no focus, so the viewer's keys stay the viewer's), drawing
    only the rows in view (:class:`Listing`).
    """

    DEFAULT_CSS = """
    TransfersPane {
        height: auto;
        overflow-x: hidden;
        overflow-y: auto;
        scrollbar-size-vertical: 0;
    }
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._drawn: tuple[object, ...] | None = None
        self._listing = Listing(())
        self._laid_out: tuple[int, object] | None = None
        self._starts: list[int] = [0]
        self._rendered: dict[int, list[Strip]] = {}
        self._to_content = TextToContent()

    def show(self, fields: TransferFields) -> None:
        """Show the transfers of the step shown; the listing is built only where it would differ
        from the one shown (a live step's first transfers stay the same frame after frame, and a
        run's steps repeat theirs), its senders and receivers in the rank colours of the palette
        in use."""
        transfers, call = fields.transfers, fields.call
        self.set_title(transfers_title(fields))
        if not transfers:
            self._drawn = None
            self._show(Listing((fields.not_recorded or "no transfers in this step",), quiet=True))
            return
        drawn = (palette(), fields.count, range_inputs(call) if call is not None else None, tuple(map(_DRAWN, transfers)))
        if drawn != self._drawn:
            self._drawn = drawn
            self._show(_listing(transfers, call, fields.count))

    def _show(self, listing: Listing) -> None:
        """Show ``listing`` unless it is what the pane shows; say whether it runs past the pane's
        bottom, and whether its lines changed shape (the rows it wants)."""
        if listing == self._listing:
            return
        shape = () if listing.quiet else tuple(map(len, listing.lines))
        reshaped = shape != (() if self._listing.quiet else tuple(map(len, self._listing.lines)))
        self._listing, self._laid_out = listing, None
        width = self.size.width
        if width:
            self.virtual_size = Size(width, self.text_rows(width))
        self.refresh()
        self.hint_overflow()
        if reshaped:
            self.post_message(self.RowsChanged(self))

    def rows_wanted(self, width: int) -> PaneRows:
        """The rows the listing takes at ``width`` columns (one for a quiet one)."""
        if self._listing.quiet or not self._listing.lines or width <= 0:
            return PaneRows(1, 1)
        rows = self.text_rows(width)
        return PaneRows(rows, rows)

    def text_rows(self, width: int) -> int:
        """The rows the listing takes at ``width`` columns."""
        return self._lay_out(width)[-1]

    def on_resize(self) -> None:
        """Lay the listing out at the new width (Textual calls :class:`PaneFrame`'s handler too:
        the hint, the title)."""
        width = self.size.width
        if width:
            self.virtual_size = Size(width, self.text_rows(width))

    def watch_scroll_y(self, old: float, new: float) -> None:
        """Scrolled: repaint, and say whether more is below."""
        super().watch_scroll_y(old, new)
        self.hint_overflow()

    def render_line(self, y: int) -> Strip:
        """Row ``y`` of the pane: of the listing's line in view there, rendered as it comes into
        view (a Static's own rendering of that line, wrapped as it wraps)."""
        width = self.size.width
        row = self.scroll_offset.y + y
        starts = self._lay_out(width) if width else [0]
        if row >= starts[-1]:
            return Strip.blank(width, self.visual_style.rich_style)
        index = bisect_right(starts, row) - 1
        return self._line_rows(index, width)[row - starts[index]]

    def _lay_out(self, width: int) -> list[int]:
        """The first row of each of the listing's lines at ``width`` columns, and the row after
        the last: a line that fits is one row, unrendered; a longer one takes the rows it wraps
        into."""
        style = self.visual_style
        if self._laid_out != (width, style):
            self._laid_out = (width, style)
            self._rendered.clear()
            rows = [1 if len(line) <= width and cell_len(line) <= width else len(self._line_rows(index, width))
                    for index, line in enumerate(self._listing.lines)]
            self._starts = list(accumulate(rows, initial=0))
        return self._starts

    def _line_rows(self, index: int, width: int) -> list[Strip]:
        """The rows line ``index`` renders into at ``width`` columns."""
        rows = self._rendered.get(index)
        if rows is None:
            content = self._to_content.content(self._listing.line_text(index), self.app.console, self.app.ansi_theme)
            rows = self._rendered[index] = Visual.to_strips(self, content, width, None, self.visual_style)
        return rows


def _listing(transfers: tuple[Transfer, ...], call: Collective | None, count: int) -> Listing:
    """The kinds (and the buffer, when all share one; ``input →`` where senders' ranges are
    given, those being of the sender's input), then a line per transfer listed:
    ``4 B r0[1:2]→r1[0:1]`` where the sender's range is known, ``4 B r0→r1[0:1]`` where it is not;
    then how many of the step's ``count`` are not listed, where some are."""
    kinds = sorted({t.kind for t in transfers})
    buffers = {t.buffer for t in transfers}
    shared = next(iter(buffers)) if len(buffers) == 1 else None
    sources = [source_range(t, call) if call is not None else None for t in transfers[:MAX_LINES]]
    labels = " · ".join(KIND_LABELS.get(k, k) for k in kinds)
    if any(sources):  # the sender's ranges are of its input
        into = f": input → {shared if shared is not None else 'the buffer named'}"
    else:
        into = f" into {shared}" if shared is not None else ""
    lines, ends = [labels + into], []
    sizes: dict[int, str] = {}  # a step's transfers move a few sizes, each written once
    for transfer, source in zip(transfers, sources):
        # the bytes first: a line too long for the pane wraps after them, never between a number and its unit
        size = sizes.get(transfer.bytes)
        if size is None:
            size = sizes[transfer.bytes] = f"{format_bytes(transfer.bytes)} "
        src, dst = transfer.src, transfer.dst
        sender, receiver = f"r{src}", f"r{dst}"
        sent = f"[{source[0]}:{source[1]}]" if source is not None else ""
        hop = f" hop {transfer.hop}" if transfer.hop else ""
        name = "" if shared is not None else f" {transfer.buffer}"
        lines.append(f"{size}{sender}{sent}→{receiver}{name}[{transfer.start}:{transfer.start + transfer.length}]{hop}")
        at = len(size) + len(sender)
        to = at + len(sent) + 1
        ends.append((len(size), at, src, to, to + len(receiver), dst))
    listed = min(MAX_LINES, len(transfers))
    if count > listed:
        lines.append(f"… {count - listed} more")
    lines.append("")
    return Listing(tuple(lines), tuple(ends), len(labels), colours=palette())
