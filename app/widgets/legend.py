"""The provenance legend: one colour per source rank, one shade per count of ranks summed, the
placeholder."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from .render import PLACEHOLDER_STYLE, REDUCED_SHADES, rank_style, reduced_style

__all__ = ["Legend"]

MAX_RANKS_LISTED = 16
"""Ranks given their own swatch before the legend abbreviates."""


class Legend(Static):
    """Swatches explaining cell colours for a run of ``world_size`` ranks."""

    def show(self, world_size: int) -> None:
        """Render the legend for ``world_size`` ranks."""
        text = Text()
        for rank in range(min(world_size, MAX_RANKS_LISTED)):
            text.append(f" r{rank} ", rank_style(rank))
            text.append(" ")
        if world_size > MAX_RANKS_LISTED:
            text.append("… ")
        if world_size > 1:
            text.append("\n")
            for count in range(2, min(world_size, len(REDUCED_SHADES) + 1) + 1):
                text.append(f" Σ{count} ", reduced_style(count))
            text.append(" summed over k ranks\n")
        text.append(" · ", PLACEHOLDER_STYLE)
        text.append(" no data")
        self.update(text)
