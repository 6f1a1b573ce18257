"""Rich ``Text`` as Textual's ``Content``, each span's style converted once per pane."""

from __future__ import annotations

import re

from rich.console import Console
from rich.style import Style as RichStyle
from rich.terminal_theme import TerminalTheme
from rich.text import Text
from textual.content import Content, Span
from textual.style import Style

__all__ = ["TextToContent", "STYLES_KEPT"]

STYLES_KEPT = 256
"""Converted styles a converter keeps (all are dropped when it would keep more)."""

_CONTROL = re.compile("[\x07\x08\x0b\x0c\r]")
"""The control codes Textual's ``Content`` strips (bell, backspace, vertical tab, form feed,
carriage return): the same as Rich strips from every ``Text`` it builds."""


class TextToContent:
    """Makes :meth:`textual.content.Content.from_rich_text`'s ``Content`` of a ``Text``, without
    its two costs per frame: each span's Rich style converted to a Textual style again (a 64-line
    transfers listing has 131 spans: half a millisecond), and the whole text scanned for control
    codes character by character (a Rich ``Text`` holds none: Rich strips them as text comes in;
    a regular expression looks, in C, and where one is found Textual's own stripping runs).

    A style's conversion is kept by the style's identity (the panes draw with shared style
    objects, and an equal but distinct one only converts again), with the style itself, so the
    identity cannot pass to another object while it is kept; for one terminal theme, as Textual
    maps ANSI colours through it.
    """

    def __init__(self) -> None:
        self._styles: dict[int, tuple[str | RichStyle, Style]] = {}
        self._theme: TerminalTheme | None = None

    def content(self, text: Text, console: Console, theme: TerminalTheme | None) -> Content:
        """``Content.from_rich_text(text, console)`` under ``theme``, the app's ANSI theme."""
        if text.style:  # a whole-text style (a one-line quiet text): Textual's own way, seldom taken
            return Content.from_rich_text(text, console)
        styles = self._styles
        if theme is not self._theme or len(styles) > STYLES_KEPT:
            styles.clear()
            self._theme = theme
        spans = []
        for start, end, style in text.spans:
            found = styles.get(id(style))
            if found is None or found[0] is not style:
                rich = console.get_style(style) if isinstance(style, str) else style
                found = styles[id(style)] = (style, Style.from_rich_style(rich, theme))
            spans.append(Span(start, end, found[1]))
        plain = text.plain
        return Content(plain, spans, strip_control_codes=_CONTROL.search(plain) is not None)
