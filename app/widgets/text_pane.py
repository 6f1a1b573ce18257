"""A ``Static`` that repaints only when what it shows changed."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

__all__ = ["TextPane", "LINE_COUNTS_KEPT"]

LINE_COUNTS_KEPT = 4096
"""Lines a pane remembers the wrapped height of (all are dropped when it would keep more)."""


class TextPane(Static):
    """Base of the text panes: :meth:`show_text` skips the repaint when the text is unchanged.

    The app renders up to 40 frames per second while events flood in; most panes show the same
    text from one frame to the next, and an unneeded repaint costs as much as a needed one.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._shown: Text | None = None
        self._title: str | None = None
        self._line_counts: dict[tuple[str, int, object, object, object, int | None], int] = {}

    def set_title(self, title: str) -> None:
        """Set the border title, unless it already is ``title`` (setting it repaints the pane);
        as plain Text, since titles carry phase names and other text from the run."""
        if title != self._title:
            self._title = title
            self.border_title = Text(title)

    def show_text(self, text: Text) -> None:
        """Display ``text`` unless it is what the pane already shows (same size: no re-layout),
        and say whether it runs past the pane's bottom (a short text clears a longer one's hint)."""
        if text == self._shown:
            return
        self._shown = text
        self.update(text, layout=False)
        self.hint_overflow()

    def hint_overflow(self) -> None:
        """After the next refresh, say in the border's subtitle whether the text runs past the
        pane's bottom (the pane scrolls)."""
        self.call_after_refresh(self._hint_overflow)

    def on_resize(self) -> None:
        """The pane's size changed: whether its text overflows may have too."""
        self.hint_overflow()

    def _hint_overflow(self) -> None:
        width, height = self.content_size
        lines = self._wrapped_height(self._shown, width) if self._shown is not None and width else 0
        hint = "↓ more: scroll" if lines > height + self.scroll_y else ""
        if hint != self.border_subtitle:
            self.border_subtitle = hint

    def _wrapped_height(self, text: Text, width: int) -> int:
        """``len(text.wrap(console, width))``, each line wrapped once and remembered: Rich wraps a
        text line by line, a pane's text changes a line or two from one frame to the next, and
        wrapping all of it after every frame cost a millisecond (the transfers pane's 66 lines)."""
        counts = self._line_counts
        if len(counts) > LINE_COUNTS_KEPT:
            counts.clear()
        how = (text.justify, text.overflow, text.no_wrap, text.tab_size)
        total = 0
        for line in text.plain.split("\n"):
            key = (line, width, *how)
            found = counts.get(key)
            if found is None:
                found = counts[key] = len(Text(line, justify=text.justify, overflow=text.overflow,
                                               no_wrap=text.no_wrap, tab_size=text.tab_size).wrap(self.app.console, width))
            total += found
        return total
