"""One rank at full detail: every value of every buffer and the ranks each run came from.

Each row of a matrix is one line, however wide (the box scrolls sideways, with the arrow keys or
shift+wheel), so a 64-wide row never wraps into ragged lines."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.screen import ModalScreen
from textual.widgets import Static

from collviz.runtime.wire.protocol import Buffer

from ..model import Labels, ViewState
from ..widgets.rank_panel import rank_body
from ..widgets.render import format_values

__all__ = ["RankDetailScreen"]


def _row_width(buffer: Buffer) -> int:
    """Columns one row of ``buffer``'s matrix takes as cells (0 for a summarised buffer)."""
    if buffer.values is None:
        return 0
    cell = max(map(len, format_values(buffer.values)), default=1) + 1
    columns = buffer.shape[-1] if len(buffer.shape) >= 2 else len(buffer.values)
    return cell * columns + 2


class RankDetailScreen(ModalScreen[None]):
    """The focused rank; follows the cursor while open (the app calls :meth:`show_view`)."""

    BINDINGS = [Binding("escape", "dismiss", "back"), Binding("enter", "dismiss", "back", show=False),
                Binding("question_mark", "app.help", "help", key_display="?", show=False)]

    def __init__(self, rank: int, view: ViewState, *, mask_volatile: bool = False) -> None:
        super().__init__()
        self.rank = rank
        self.mask_volatile = mask_volatile
        self._view = view

    def compose(self) -> ComposeResult:
        """A scrolling body inside a bordered box."""
        with ScrollableContainer(id="detail-box"):
            yield Static(id="detail-body")

    def on_mount(self) -> None:
        """Render the view the screen was opened with."""
        self.show_view(self._view, Labels("", "", False))

    def show_view(self, view: ViewState, labels: Labels) -> None:
        """Display this rank of ``view`` (the header's ``labels`` are unused here)."""
        self._view = view
        box = self.query_one("#detail-box")
        box.border_title = Text(f"rank {self.rank} · step {view.step + 1}/{max(view.step_count, 1)} {view.phase_name}")
        box.border_subtitle = "esc: back"
        if self.rank < len(view.ranks):
            rank = view.ranks[self.rank]
            width = max(20, box.content_size.width or 80, *(_row_width(b) for b in rank.buffers))
            body = rank_body(rank, width, detail=True, mask_volatile=self.mask_volatile)
            body.no_wrap = True  # a matrix row stays one line; the box scrolls sideways
        else:
            body = Text(f"rank {self.rank} is not in this run")
        self.query_one("#detail-body", Static).update(body)
