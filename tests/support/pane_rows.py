"""The rows a line-API pane shows as its user scrolls through it: what the tests read of a pane
that draws only the rows in view (the transfers pane), instead of a text it no longer builds."""

from __future__ import annotations

from textual.scroll_view import ScrollView
from textual.strip import Strip


def pane_strips(pane: ScrollView) -> list[Strip]:
    """Every row of ``pane``'s content, top to bottom, each rendered with the pane scrolled so
    the row is in view (the pane is left scrolled back to its top)."""
    height, rows = pane.size.height, []
    for row in range(pane.virtual_size.height):
        if not pane.scroll_offset.y <= row < pane.scroll_offset.y + height:
            pane.scroll_to(y=row, animate=False)
        rows.append(pane.render_line(row - pane.scroll_offset.y))
    pane.scroll_to(y=0, animate=False)
    return rows


def pane_rows(pane: ScrollView) -> list[str]:
    """The text of each of :func:`pane_strips`' rows."""
    return [strip.text for strip in pane_strips(pane)]
