"""A ``Static`` that repaints only when what it shows changed."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

__all__ = ["TextPane"]


class TextPane(Static):
    """Base of the text panes: :meth:`show_text` skips the repaint when the text is unchanged.

    The app renders up to 40 frames per second while events flood in; most panes show the same
    text from one frame to the next, and an unneeded repaint costs as much as a needed one.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._shown: Text | None = None
        self._title: str | None = None

    def set_title(self, title: str) -> None:
        """Set the border title, unless it already is ``title`` (setting it repaints the pane);
        as plain Text, since titles carry phase names and other text from the run."""
        if title != self._title:
            self._title = title
            self.border_title = Text(title)

    def show_text(self, text: Text) -> None:
        """Display ``text`` unless it is what the pane already shows (same size: no re-layout)."""
        if text == self._shown:
            return
        self._shown = text
        self.update(text, layout=False)

    def hint_overflow(self) -> None:
        """After the next refresh, say in the border's subtitle whether the text runs past the
        pane's bottom (the pane scrolls)."""
        self.call_after_refresh(self._hint_overflow)

    def on_resize(self) -> None:
        """The pane's size changed: whether its text overflows may have too."""
        self.hint_overflow()

    def _hint_overflow(self) -> None:
        width, height = self.content_size
        lines = len(self._shown.wrap(self.app.console, width)) if self._shown is not None and width else 0
        hint = "↓ more: scroll" if lines > height + self.scroll_y else ""
        if hint != self.border_subtitle:
            self.border_subtitle = hint
