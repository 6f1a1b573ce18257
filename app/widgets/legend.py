"""The provenance legend: one colour per source rank, one shade per count of ranks summed, the
placeholder."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from .render import PLACEHOLDER_STYLE, REDUCED_SHADES, rank_style, reduced_style

__all__ = ["Legend"]


class Legend(Static):
    """Swatches explaining cell colours for a run of ``world_size`` ranks: every rank (or, where
    the heatmap's row labels are the swatches, a line saying so), each count of ranks summed, the
    placeholder."""

    def show(self, world_size: int, labelled_rows: bool = False) -> None:
        """Render the legend for ``world_size`` ranks; ``labelled_rows``: the ranks are drawn as
        rows of one heatmap, each row's label in its rank's colour, so that label is the rank's
        swatch (64 swatches would take the lines the transfers pane needs on a short screen)."""
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
            for count in range(2, min(world_size, len(REDUCED_SHADES) + 1) + 1):
                text.append(f"\u00a0Σ{count}\u00a0", reduced_style(count))
            text.append(" summed over k ranks (named under the grid)\n")
        text.append(" · ", PLACEHOLDER_STYLE)
        text.append(" no data")
        self.update(text)
