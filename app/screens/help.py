"""The ? help screen: every key the app binds, with its description."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["HelpScreen", "scroll_hint"]

INTRO = (
    "Each rank panel shows that rank's buffers; a cell's colour says which rank's data it holds. "
    "Steps are the scenario's phases: ←/→ move between them in every mode, even while a live run "
    "goes on. Click a rank panel for its full detail; ctrl+p opens Textual's command palette."
)


class HelpScreen(ModalScreen[None]):
    """Keys and what they do, taken from the app's bindings, under ``intro`` (the viewer's by
    default): any of collviz's apps opens it on ``?``."""

    BINDINGS = [
        Binding("escape", "dismiss", "close"),
        Binding("question_mark", "dismiss", "close", show=False),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    #help-box { width: 80; max-width: 95%; height: auto; max-height: 90%; border: thick $primary;
                background: $surface; padding: 1 2; }
    #help-intro { margin-bottom: 1; }
    """

    def __init__(self, intro: str = INTRO) -> None:
        super().__init__()
        self.intro = intro

    def compose(self) -> ComposeResult:
        """A table of keys under a short introduction."""
        table = Table(box=None, show_header=False, padding=(0, 2))
        table.add_column(style="bold cyan")
        table.add_column()
        for binding in self.app.BINDINGS:
            if isinstance(binding, Binding) and binding.description:
                table.add_row(binding.key_display or binding.key, binding.tooltip or binding.description)
        with VerticalScroll(id="help-box"):
            yield Static(Text(self.intro), id="help-intro")
            yield Static(table)

    def on_mount(self) -> None:
        """Title the box; its subtitle follows its scrolling and is set once its size is known."""
        box = self.query_one("#help-box", VerticalScroll)
        box.border_title = Text("keys")
        self.watch(box, "scroll_y", lambda _: self.note_what_is_below(), init=False)
        self.call_after_refresh(self.note_what_is_below)

    def on_resize(self) -> None:
        """A new terminal size may hide keys, or show them all."""
        self.call_after_refresh(self.note_what_is_below)

    def note_what_is_below(self) -> None:
        """Say how to close the box and, where it is too short for every key, how to see the rest."""
        box = self.query_one("#help-box", VerticalScroll)
        box.border_subtitle = scroll_hint(box.max_scroll_y, box.scroll_y)


def scroll_hint(max_scroll_y: float, scroll_y: float) -> str:
    """The help box's subtitle: how to close it and, if lines are hidden, in which direction."""
    if max_scroll_y <= 0:
        return "esc: close"
    below = max_scroll_y - scroll_y >= 1
    above = scroll_y >= 1
    direction = "↓ more below" if below and not above else "↑ more above" if above and not below else "↑↓ more"
    return f"{direction} · esc: close"
