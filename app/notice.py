"""A one-message viewer: says something to a browser tab (or terminal) and waits for q."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Footer, Static

__all__ = ["NoticeApp", "show_notice"]


class NoticeApp(App[int]):
    """Shows ``message`` centred until the user presses q; exits with status 0."""

    BINDINGS = [("q", "quit", "quit")]
    CSS = "Static { width: 1fr; height: 1fr; content-align: center middle; text-style: bold; }"

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def compose(self) -> ComposeResult:
        """The message, then the footer."""
        yield Static(Text(self.message))
        yield Footer()


def show_notice(message: str) -> int:
    """Run the notice until q; its exit status (0)."""
    NoticeApp(message).run()
    return 0
