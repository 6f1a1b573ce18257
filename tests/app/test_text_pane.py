"""The text panes' overflow hint counts wrapped lines a line at a time, as Rich wraps them."""

from __future__ import annotations

import random

from rich.text import Text
from textual.app import App, ComposeResult

from collviz.app.widgets.text_pane import TextPane


class _OnePane(App[None]):
    def compose(self) -> ComposeResult:
        yield TextPane(id="pane")


async def test_the_wrapped_height_is_richs_whole_text_wrap():
    """Counted line by line and remembered, the height equals Rich's wrap of the whole text:
    blank and trailing lines, wide characters, words longer than the width, no_wrap with ellipsis."""
    rng = random.Random(23)
    words = ["r1→r2", "output[0:2]", "8 B", "hop 3", "logical data movement", "x" * 30, "·", "…", "世界", "✓"]
    app = _OnePane()
    async with app.run_test():
        pane = app.query_one(TextPane)
        for case in range(400):
            lines = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 12))) for _ in range(rng.randint(0, 8))]
            plain = "\n".join(lines) + rng.choice(["", "\n", "\n\n"])
            text = Text(plain, "bold") if case % 3 else Text(plain, no_wrap=True, overflow="ellipsis")
            width = rng.randint(5, 60)
            assert pane._wrapped_height(text, width) == len(text.wrap(app.console, width)), (plain, width)
