"""The side panes' frame (a title fitted to whole words, a hint where the text runs past the
bottom, the rows wanted said to whoever shares the height), and a ``Static`` in it that repaints
only when what it shows changed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.content import Content
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from .render import fit_words
from .text_content import TextToContent

__all__ = ["PaneFrame", "TextPane", "PaneRows", "LINE_COUNTS_KEPT", "BORDER_TITLE_MARGIN"]

BORDER_TITLE_MARGIN = 6
"""Columns of a bordered pane's top line that are not its title's: the corners, the rules beside
the title and a space each side."""

LINE_COUNTS_KEPT = 4096
"""Lines a pane remembers the wrapped height of (all are dropped when it would keep more)."""


@dataclass(frozen=True)
class PaneRows:
    """Rows of text a pane wants at some width: ``least``, its headline's (what must be on screen
    without scrolling); ``full``, all of its text's."""

    least: int
    full: int


class PaneFrame(Widget):
    """What the side panes share around their text: the border's title, set as the whole words of
    it that fit; the border's subtitle saying when the text runs past the pane's bottom; and
    :class:`RowsChanged`, posted by a pane whose text changed shape, so whatever shares out its
    height can ask :meth:`rows_wanted` again. A pane says how many rows its text takes
    (:meth:`text_rows`) and how many it has scrolled past (:meth:`rows_above`)."""

    class RowsChanged(Message):
        """The lines of ``pane``'s text changed in number or length: the rows it wants may have."""

        def __init__(self, pane: PaneFrame) -> None:
            super().__init__()
            self.pane = pane

        def can_replace(self, message: Message) -> bool:
            """A newer change of the same pane stands for this one."""
            return isinstance(message, PaneFrame.RowsChanged) and message.pane is self.pane

    FIXED_ROWS: ClassVar[bool] = False
    """Whether the pane keeps the rows its style gives it, without a border (the header): no rows
    to share (no :class:`RowsChanged`) and no border to say an overflow in."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._title: str | None = None
        self._fitted: str | None = None

    def set_title(self, title: str) -> None:
        """Set the border title, unless it already is ``title`` (setting it repaints the pane);
        as plain text, never markup, since titles carry phase names and other text from the run."""
        if title != self._title:
            self._title = title
            self._fit_title()

    def _fit_title(self) -> None:
        """Title the border with the whole words of the title that fit it (:func:`~.render.fit_words`:
        a cut title never ends in a number without its unit, as Textual's own cut did: ``4…``);
        set only where the words differ from those set last, and as ``Content`` (Textual's own
        type: a ``Text`` is converted to it, and ``border_title`` reads back as markup, each time)."""
        fitted = fit_words(self._title or "", self.outer_size.width - BORDER_TITLE_MARGIN)
        if self._title is not None and fitted != self._fitted:
            self._fitted = fitted
            self.border_title = Content(fitted)

    def rows_wanted(self, width: int) -> PaneRows:
        """The rows the text shown takes at ``width`` columns, and its headline's."""
        raise NotImplementedError

    def text_rows(self, width: int) -> int:
        """The rows the text shown takes at ``width`` columns (0: none shown)."""
        raise NotImplementedError

    def hint_overflow(self) -> None:
        """After the next refresh, say in the border's subtitle whether the text runs past the
        pane's bottom (the pane scrolls)."""
        self.call_after_refresh(self._hint_overflow)

    def on_resize(self) -> None:
        """The pane's size changed: whether its text overflows may have too, and how much of its
        title fits."""
        if not self.FIXED_ROWS:
            self.hint_overflow()
        self._fit_title()

    def rows_above(self) -> int:
        """Rows of the text scrolled past, above the pane's top."""
        return round(self.scroll_y)

    def _hint_overflow(self) -> None:
        width, height = self.content_size
        lines = self.text_rows(width) if width else 0
        hint = "↓ more: scroll" if lines > height + self.rows_above() else ""
        if hint != self.border_subtitle:
            self.border_subtitle = hint


class TextPane(PaneFrame, Static):
    """Base of the text panes: :meth:`show_text` skips the repaint when the text is unchanged.

    The app renders up to 40 frames per second while events flood in; most panes show the same
    text from one frame to the next, and an unneeded repaint costs as much as a needed one.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._shown: Text | None = None
        self._headline: Text | None = None
        self._quiet = False
        self._shape: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
        self._line_counts: dict[tuple[str, int, object, object, object, int | None], int] = {}
        self._to_content = TextToContent()
        self._above = 0
        """Wrapped rows of the shown text scrolled past (:meth:`scroll_rows`)."""

    def show_text(self, text: Text, headline: Text | None = None, *, quiet: bool = False) -> None:
        """Display ``text`` unless it is what the pane already shows (same size: no re-layout),
        and say whether it runs past the pane's bottom (a short text clears a longer one's hint);
        ``headline``: the leading lines of ``text`` that must be seen without scrolling (none: all
        of it); ``quiet``: the text only says why the pane has nothing to show, and one line
        of it is enough (the rest scrolls)."""
        if text == self._shown and headline == self._headline and quiet == self._quiet:
            return
        self._shown, self._headline, self._quiet, self._above = text, headline, quiet, 0
        self.update(self._to_content.content(text, self.app.console, self.app.ansi_theme), layout=False)
        if self.FIXED_ROWS:
            return
        self.hint_overflow()
        shape = (_line_lengths(headline), () if quiet else _line_lengths(text))
        if shape != self._shape:
            self._shape = shape
            self.post_message(self.RowsChanged(self))

    def rows_above(self) -> int:
        """Rows of the shown text scrolled past (a Static never scrolls itself: :meth:`scroll_rows`)."""
        return self._above

    def scroll_rows(self, rows: int) -> bool:
        """Scroll the shown text by ``rows`` wrapped rows (down where positive), no further than
        its last row at the pane's bottom; whether it moved. A new text starts at its top."""
        width, height = self.content_size
        if self._shown is None or not width:
            return False
        above = max(0, min(self._above + rows, self.text_rows(width) - height))
        if above == self._above:
            return False
        self._above = above
        shown = Text("\n").join(self._shown.wrap(self.app.console, width)[above:]) if above else self._shown
        self.update(self._to_content.content(shown, self.app.console, self.app.ansi_theme), layout=False)
        self.hint_overflow()
        return True

    def on_resize(self) -> None:
        """Back to the text's top where it was scrolled (its rows were cut at the old width), then
        as every pane."""
        if self._above and self._shown is not None:
            self._above = 0
            self.update(self._to_content.content(self._shown, self.app.console, self.app.ansi_theme), layout=False)
        super().on_resize()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        """The wheel scrolls the text down a row (where it runs past the bottom)."""
        if self.scroll_rows(1):
            event.stop()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        """The wheel scrolls the text up a row (where it is scrolled)."""
        if self.scroll_rows(-1):
            event.stop()

    def rows_wanted(self, width: int) -> PaneRows:
        """The rows the shown text takes at ``width`` columns, and its headline's (all of it
        without a headline; one in all for a quiet text)."""
        if self._shown is None or self._quiet or width <= 0:
            return PaneRows(1, 1)
        full = self._wrapped_height(self._shown, width)
        least = self._wrapped_height(self._headline, width) if self._headline is not None else full
        return PaneRows(min(least, full), full)

    def text_rows(self, width: int) -> int:
        """The rows the shown text takes at ``width`` columns (0: none shown)."""
        return self._wrapped_height(self._shown, width) if self._shown is not None else 0

    def _wrapped_height(self, text: Text, width: int) -> int:
        """``len(text.wrap(console, width))``, each line wrapped once and remembered: Rich wraps a
        text line by line, a pane's text changes a line or two from one frame to the next, and
        wrapping all of it after every frame cost a millisecond (a 66-line text).
        A line without tabs that fits the width is one row, unwrapped (a new step's transfers
        are 64 new lines, most of them short)."""
        counts = self._line_counts
        if len(counts) > LINE_COUNTS_KEPT:
            counts.clear()
        how = (text.justify, text.overflow, text.no_wrap, text.tab_size)
        total = 0
        for line in text.plain.split("\n"):
            if len(line) <= width and "\t" not in line and cell_len(line) <= width:
                total += 1
                continue
            key = (line, width, *how)
            found = counts.get(key)
            if found is None:
                found = counts[key] = len(Text(line, justify=text.justify, overflow=text.overflow,
                                               no_wrap=text.no_wrap, tab_size=text.tab_size).wrap(self.app.console, width))
            total += found
        return total


def _line_lengths(text: Text | None) -> tuple[int, ...]:
    """The length of each of ``text``'s lines (none: empty)."""
    return () if text is None else tuple(map(len, text.plain.split("\n")))
