"""The transfers pane: what moved between ranks in the current step."""

from __future__ import annotations

from rich.text import Text

from ..model import ViewState
from .render import format_bytes, rank_style
from .text_pane import TextPane

__all__ = ["TransfersPane"]

MAX_LINES = 64
"""Most transfers listed (fewer when the pane is shorter) before the rest are counted."""

KIND_LABELS = {"logical": "logical data movement", "p2p": "p2p send/recv"}
"""How each transfer kind is labelled: logical is what the collective moved, p2p a real send/recv."""


class TransfersPane(TextPane):
    """One line per transfer: src → dst, elements, bytes, then the buffer chunk; the kind heads the list."""

    def show(self, view: ViewState) -> None:
        """Render the transfers of ``view``'s step."""
        transfers = view.transfers
        self.set_title(f"transfers · {view.transfer_count}")
        if not transfers:
            self.show_text(Text("no transfers in this step", "dim"))
            return
        text = Text(no_wrap=True, overflow="ellipsis")
        kinds = sorted({t.kind for t in transfers})
        text.append(" · ".join(KIND_LABELS.get(k, k) for k in kinds) + "\n", "italic")
        lines = min(MAX_LINES, max(1, self.content_size.height - 1)) if self.content_size.height else MAX_LINES
        if view.transfer_count > lines:
            lines -= 1  # room for the "… more" line
        for transfer in transfers[:lines]:
            text.append(f"r{transfer.src}", rank_style(transfer.src))
            text.append("→")
            text.append(f"r{transfer.dst}", rank_style(transfer.dst))
            hop = f" hop {transfer.step}" if transfer.step else ""
            text.append(f" {transfer.length} el {format_bytes(transfer.bytes)}{hop}"
                        f" {transfer.buffer}[{transfer.start}:{transfer.start + transfer.length}]\n")
        if view.transfer_count > lines:
            text.append(f"… {view.transfer_count - lines} more\n", "dim")
        self.show_text(text)
