"""The provenance legend: one colour per source rank, the reduced style, the placeholder."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from .render import PLACEHOLDER_STYLE, REDUCED_STYLE, rank_style

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
        text.append(" Σ ", REDUCED_STYLE)
        text.append(" reduced  ")
        text.append(" · ", PLACEHOLDER_STYLE)
        text.append(" no data")
        self.update(text)
