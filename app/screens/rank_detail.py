"""One rank at full detail: every value of every buffer and the ranks each run came from."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..model import ViewState
from ..widgets.rank_panel import rank_body

__all__ = ["RankDetailScreen"]


class RankDetailScreen(ModalScreen[None]):
    """The focused rank; follows the cursor while open (the app calls :meth:`show_view`)."""

    BINDINGS = [Binding("escape", "dismiss", "back"), Binding("enter", "dismiss", "back", show=False)]

    def __init__(self, rank: int, view: ViewState, *, mask_volatile: bool = False) -> None:
        super().__init__()
        self.rank = rank
        self.mask_volatile = mask_volatile
        self._view = view

    def compose(self) -> ComposeResult:
        """A scrolling body inside a bordered box."""
        with VerticalScroll(id="detail-box"):
            yield Static(id="detail-body")

    def on_mount(self) -> None:
        """Render the view the screen was opened with."""
        self.show_view(self._view, "", "")

    def show_view(self, view: ViewState, mode: str, playback: str) -> None:
        """Display this rank of ``view`` (``mode`` and ``playback`` are unused here)."""
        self._view = view
        box = self.query_one("#detail-box")
        box.border_title = Text(f"rank {self.rank} · step {view.step + 1}/{max(view.step_count, 1)} {view.phase_name}")
        box.border_subtitle = "esc: back"
        if self.rank < len(view.ranks):
            width = max(20, box.content_size.width or 80)
            body = rank_body(view.ranks[self.rank], width, detail=True, mask_volatile=self.mask_volatile)
        else:
            body = f"rank {self.rank} is not in this run"
        self.query_one("#detail-body", Static).update(body)
