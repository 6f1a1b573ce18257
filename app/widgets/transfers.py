"""The transfers pane: what moved between ranks in the current step."""

from __future__ import annotations

from rich.text import Text

from collviz.runtime.wire.protocol import NOT_RECORDED_OPTION, Collective, Transfer

from ..model import ViewState
from ..model.transfer_ends import source_range, step_call
from ..model.view import MAX_TRANSFERS
from .render import format_bytes, rank_style
from .text_pane import TextPane

__all__ = ["TransfersPane", "transfers_title"]

MAX_LINES = MAX_TRANSFERS
"""Most transfers listed (the pane scrolls, saying so) before the rest are only counted: all the
view carries."""

KIND_LABELS = {"logical": "logical data movement", "p2p": "p2p send/recv"}
"""How each transfer kind is labelled: logical is what the collective moved, p2p a real send/recv."""


def not_recorded(view: ViewState) -> str:
    """Why ``view``'s run holds no transfers of data (an imported artifact, a user's script), or
    empty where it records them."""
    return str(view.run.options.get(NOT_RECORDED_OPTION, "")) if view.run is not None else ""


def transfers_title(view: ViewState) -> str:
    """``transfers · N``, and where a flood was put in order among only its first arrivals, that;
    ``transfers · not recorded`` for a step without any in a run that records none."""
    if not view.transfer_count and not_recorded(view):
        return "transfers · not recorded"
    among = view.transfers_sorted_among
    partly = f" · listed in order among the first {among:,} to arrive" if 0 < among < view.transfer_count else ""
    return f"transfers · {view.transfer_count}{partly}"


class TransfersPane(TextPane):
    """One line per transfer: the sender and the range of its input it sent, where that is known
    (:mod:`~..model.transfer_ends`), → the receiver and the range it arrived in, bytes (and the
    hop of a p2p step).

    The kind and, when every transfer moves the same buffer, its name head the list, so each line
    stays short; a line too long for the pane wraps rather than being cut mid-range.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._listed: tuple[tuple[Transfer, ...], Collective | None] = ((), None)
        self._listing = Text()

    def show(self, view: ViewState) -> None:
        """Render the transfers of ``view``'s step."""
        transfers = view.transfers
        self.set_title(transfers_title(view))
        if not transfers:
            self.show_text(Text(not_recorded(view) or "no transfers in this step", "dim"), quiet=True)
            return
        call = step_call([rank.collective for rank in view.ranks], view.step)
        if (transfers, call) != self._listed:  # a live step's first transfers stay the same frame after frame
            self._listed, self._listing = (transfers, call), _listing(transfers, call)
        text = self._listing.copy()
        lines = min(MAX_LINES, len(transfers))
        if view.transfer_count > lines:
            text.append(f"… {view.transfer_count - lines} more\n", "dim")
        self.show_text(text)


def _listing(transfers: tuple[Transfer, ...], call: Collective | None) -> Text:
    """The kinds (and the buffer, when all share one; ``input →`` where senders' ranges are
    given, those being of the sender's input), then a line per transfer listed:
    ``r0[1:2]→r1[0:1]`` where the sender's range is known, ``r0→r1[0:1]`` where it is not."""
    text = Text()
    kinds = sorted({t.kind for t in transfers})
    buffers = {t.buffer for t in transfers}
    shared = next(iter(buffers)) if len(buffers) == 1 else None
    sources = [source_range(t, call) if call is not None else None for t in transfers[:MAX_LINES]]
    text.append(" · ".join(KIND_LABELS.get(k, k) for k in kinds), "italic")
    if any(sources):  # the sender's ranges are of its input
        text.append(f": input → {shared if shared is not None else 'the buffer named'}\n", "italic")
    else:
        text.append(f" into {shared}\n" if shared is not None else "\n", "italic")
    for transfer, source in zip(transfers, sources):
        text.append(f"r{transfer.src}", rank_style(transfer.src))
        if source is not None:
            text.append(f"[{source[0]}:{source[1]}]")
        text.append("→")
        text.append(f"r{transfer.dst}", rank_style(transfer.dst))
        hop = f" hop {transfer.hop}" if transfer.hop else ""
        name = "" if shared is not None else f" {transfer.buffer}"
        text.append(f"{name}[{transfer.start}:{transfer.start + transfer.length}]"
                    f" {format_bytes(transfer.bytes)}{hop}\n")
    return text
