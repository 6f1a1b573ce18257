"""The ? help screen: every key the app binds, with its description."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["HelpScreen"]

INTRO = (
    "Each rank panel shows that rank's buffers; a cell's colour says which rank's data it holds. "
    "Steps are the scenario's phases: ←/→ move between them in every mode, even while a live run "
    "goes on. Click a rank panel for its full detail."
)


class HelpScreen(ModalScreen[None]):
    """Keys and what they do, taken from the app's bindings."""

    BINDINGS = [
        Binding("escape", "dismiss", "close"),
        Binding("question_mark", "dismiss", "close", show=False),
    ]

    def compose(self) -> ComposeResult:
        """A table of keys under a short introduction."""
        table = Table(box=None, show_header=False, padding=(0, 2))
        table.add_column(style="bold cyan")
        table.add_column()
        for binding in self.app.BINDINGS:
            if isinstance(binding, Binding) and binding.description:
                table.add_row(binding.key_display or binding.key, binding.tooltip or binding.description)
        with VerticalScroll(id="help-box"):
            yield Static(INTRO, id="help-intro")
            yield Static(table)
