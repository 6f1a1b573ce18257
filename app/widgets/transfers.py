"""The transfers pane: what moved between ranks in the current step."""

from __future__ import annotations

from operator import attrgetter

from rich.text import Span, Text

from collviz.runtime.wire.protocol import Collective, Transfer

from ..model.panes import TransferFields
from ..model.transfer_ends import range_inputs, source_range
from ..model.view import MAX_TRANSFERS
from .render import format_bytes, palette, rank_style
from .text_pane import TextPane

__all__ = ["TransfersPane", "transfers_title"]

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


class TransfersPane(TextPane):
    """One line per transfer: bytes, the sender and the range of its input it sent, where that is
    known (:mod:`~..model.transfer_ends`), → the receiver and the range it arrived in (and the hop
    of a p2p step).

    The kind and, when every transfer moves the same buffer, its name head the list, so each line
    stays short; a line too long for the pane wraps rather than being cut mid-range.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._drawn: tuple[object, ...] | None = None

    def show(self, fields: TransferFields) -> None:
        """Render the transfers of the step shown; the listing is built only where it would differ
        from the one shown (a live step's first transfers stay the same frame after frame, and a
        run's steps repeat theirs: 64 lines cost ~0.3 ms to build), its senders and receivers in
        the rank colours of the palette in use."""
        transfers, call = fields.transfers, fields.call
        self.set_title(transfers_title(fields))
        if not transfers:
            self._drawn = None
            self.show_text(Text(fields.not_recorded or "no transfers in this step", "dim"), quiet=True)
            return
        drawn = (palette(), fields.count, range_inputs(call) if call is not None else None, tuple(map(_DRAWN, transfers)))
        if drawn != self._drawn:
            self._drawn = drawn
            self.show_text(_listing(transfers, call, fields.count))


def _listing(transfers: tuple[Transfer, ...], call: Collective | None, count: int) -> Text:
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
        into = f": input → {shared if shared is not None else 'the buffer named'}\n"
    else:
        into = f" into {shared}\n" if shared is not None else "\n"
    # one string and its spans, not five Text.append calls a line (each strips control codes: half
    # a millisecond a 64-line listing on a first visit)
    at = len(labels) + len(into)
    pieces, spans = [labels, into], [Span(0, len(labels), "italic"), Span(len(labels), at, "italic")]
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
        line = f"{size}{sender}{sent}→{receiver}{name}[{transfer.start}:{transfer.start + transfer.length}]{hop}\n"
        start = at + len(size)
        spans.append(Span(start, start + len(sender), rank_style(src)))
        start += len(sender) + len(sent) + 1
        spans.append(Span(start, start + len(receiver), rank_style(dst)))
        pieces.append(line)
        at += len(line)
    listed = min(MAX_LINES, len(transfers))
    if count > listed:
        more = f"… {count - listed} more\n"
        pieces.append(more)
        spans.append(Span(at, at + len(more), "dim"))
    return Text("".join(pieces), spans=spans)
