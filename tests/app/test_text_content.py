"""A text pane's Content is Textual's own ``Content.from_rich_text`` of its Text, made without
converting every span's style again: the same text and spans (what a Content draws), in either
ANSI theme."""

from __future__ import annotations

from rich.style import Style
from rich.text import Span, Text
from textual.app import App
from textual.content import Content
from textual.style import Style as TextualStyle

from collviz.app.widgets.text_content import TextToContent

_RANK = Style(color="black", bgcolor="#1f77b4", bold=True)


def _texts() -> list[Text]:
    """Texts as the panes make them: shared style objects, style names, a style given twice as
    equal but distinct objects, a whole-text style, ANSI colours (mapped through the theme),
    wide characters, and control codes Rich stripped on the way in."""
    plain = "logical data movement: input → output\n8 B r3[0:2]→r1[2:4]\n世界 ✓ r0 grads equal\n"
    spans = [Span(0, 21, "italic"), Span(42, 44, _RANK), Span(50, 52, Style(color="black", bgcolor="#1f77b4", bold=True)),
             Span(58, 65, "green"), Span(66, 69, Style(color="magenta", dim=True))]
    return [Text(plain, spans=spans), Text("no transfers in this step", "dim"), Text("bell\x07 and cr\r gone", spans=[Span(0, 4, _RANK)]),
            Text(), Text.assemble(("step 3/8", "bold"), " ", ("running", "bold reverse green"))]


def _reference_spans(content: Content) -> list[tuple[int, int, TextualStyle | str]]:
    return [(span.start, span.end, span.style) for span in content.spans]


async def test_the_content_is_textuals_own_conversion_in_either_theme():
    app = App[None]()
    async with app.run_test():
        convert = TextToContent()
        for dark in (True, False, True):  # the theme changes between frames: ANSI colours map anew
            app.theme = "textual-dark" if dark else "textual-light"
            for text in _texts():
                for _ in range(2):  # a second time from the kept conversions
                    made = convert.content(text, app.console, app.ansi_theme)
                    reference = Content.from_rich_text(text, app.console)
                    assert made.plain == reference.plain and "\r" not in made.plain and "\x07" not in made.plain
                    assert _reference_spans(made) == _reference_spans(reference)
