"""The provenance legend: one colour per source rank, one shade per count of ranks summed, the
placeholder."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from .render import PLACEHOLDER_STYLE, REDUCED_SHADES, rank_style, reduced_style

__all__ = ["Legend", "legend_text"]


def legend_text(world_size: int, labelled_rows: bool = False) -> Text:
    """The legend of a run of ``world_size`` ranks (see :class:`Legend`): the last shade, which
    every sum of 8 or more ranks shares, is labelled with the counts it stands for (``Σ8–16``)."""
    text = Text()
    if labelled_rows:
        text.append("colour = the rank whose data a cell holds, as each row's label\n")
    else:
        for rank in range(world_size):
            # no-break spaces inside a swatch: lines wrap between swatches, never through one
            text.append(f"\u00a0r{rank}\u00a0", rank_style(rank))
            text.append(" ")
        if world_size > 1:
            text.append("\n")
    if world_size > 1:
        last = len(REDUCED_SHADES) + 1
        for count in range(2, min(world_size, last) + 1):
            counts = f"{count}–{world_size}" if count == last and world_size > last else str(count)
            text.append(f"\u00a0Σ{counts}\u00a0", reduced_style(count))
        text.append(" summed over k ranks (named under the grid)\n")
    text.append(" · ", PLACEHOLDER_STYLE)
    text.append(" no data")
    return text


class Legend(Static):
    """Swatches explaining cell colours for a run of ``world_size`` ranks: every rank (or, where
    the heatmap's row labels are the swatches, a line saying so), each count of ranks summed, the
    placeholder."""

    def show(self, world_size: int, labelled_rows: bool = False) -> None:
        """Render the legend for ``world_size`` ranks; ``labelled_rows``: the ranks are drawn as
        rows of one heatmap, each row's label in its rank's colour, so that label is the rank's
        swatch (64 swatches would take the lines the transfers pane needs on a short screen)."""
        self.update(legend_text(world_size, labelled_rows))
