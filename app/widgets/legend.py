"""The provenance legend: one colour per source rank, one shade per count of ranks summed, the
placeholder."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from .render import PLACEHOLDER_STYLE, REDUCED_SHADES, rank_style, reduced_style

__all__ = ["Legend"]

NAMED_SWATCHES = 16
"""Up to this many ranks the swatches say ``r3``; beyond, just the number, so 64 fit in a few lines."""


class Legend(Static):
    """Swatches explaining cell colours for a run of ``world_size`` ranks: every rank, each count
    of ranks summed, the placeholder."""

    def show(self, world_size: int) -> None:
        """Render the legend for ``world_size`` ranks."""
        text = Text()
        named = world_size <= NAMED_SWATCHES
        for rank in range(world_size):
            # no-break spaces inside a swatch: lines wrap between swatches, never through one
            text.append(f"\u00a0r{rank}\u00a0" if named else f"{rank:>2}".replace(" ", "\u00a0"), rank_style(rank))
            text.append(" ")
        if world_size > 1:
            text.append("\n")
            for count in range(2, min(world_size, len(REDUCED_SHADES) + 1) + 1):
                text.append(f"\u00a0Σ{count}\u00a0", reduced_style(count))
            text.append(" summed over k ranks (named under the grid)\n")
        text.append(" · ", PLACEHOLDER_STYLE)
        text.append(" no data")
        self.update(text)
