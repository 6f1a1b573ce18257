"""The side column: narration, cost, transfers and legend, sharing the column's height by priority.

Textual's ``fr`` heights with a least height cannot share a short column: once every flexible
pane is held at its least height, Textual 8 sizes ``1fr`` as all the space left, and the panes
below are laid out past the screen's edge (at 100×30 the transfers pane and the legend were never
seen). So the column sets its panes' heights itself, from its own height, whenever that changes:
the cost pane keeps room for its figures, the legend goes first when rows run short (above 8 ranks
the heatmap's row labels carry the rank colours anyway), then the narration gets two thirds of
what is left and the transfers one third.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.containers import Vertical
from textual.geometry import Size

from .cost import CostPane
from .legend import Legend
from .narration import NarrationPane
from .transfers import TransfersPane

__all__ = ["SideColumn", "SideShares", "side_shares"]

COST_ROWS = (9, 7, 5)
"""The cost pane's height (borders included) in a column of at least :data:`COST_ROWS_FROM` rows."""
COST_ROWS_FROM = (24, 18, 0)

LEAST_TEXT_ROWS = 9
"""Rows the narration and transfers need together beside the legend: else the legend is hidden."""


@dataclass(frozen=True)
class SideShares:
    """Each pane's height in rows, borders included (0: hidden)."""

    narration: int
    cost: int
    transfers: int
    legend: int


def side_shares(height: int, legend_lines: int, with_cost: bool = True) -> SideShares:
    """How a column of ``height`` rows is shared, the legend needing ``legend_lines``;
    ``with_cost`` False when the cost pane is hidden (the projector layout)."""
    cost = next(rows for rows, least in zip(COST_ROWS, COST_ROWS_FROM) if height >= least) if with_cost else 0
    legend = legend_lines if height - cost - legend_lines >= LEAST_TEXT_ROWS else 0
    rest = max(0, height - cost - legend)
    transfers = max(4, rest // 3) if rest >= LEAST_TEXT_ROWS else min(3, rest)
    return SideShares(narration=rest - transfers, cost=cost, transfers=transfers, legend=legend)


class SideColumn(Vertical):
    """Holds the narration, cost, transfers and legend panes and sizes them (:func:`side_shares`)
    whenever its height, the legend's text or the cost pane's display changes."""

    def on_resize(self, event: events.Resize) -> None:
        """Share the new height."""
        self.share()

    def share(self) -> None:
        """Set each pane's height from the column's (nothing before the column has a size)."""
        height, width = self.size.height, self.size.width
        if not height:
            return
        legend, cost = self.query_one(Legend), self.query_one(CostPane)
        text_width = max(1, width - legend.styles.gutter.width)
        lines = legend.get_content_height(Size(width, height), Size(width, height), text_width)
        shares = side_shares(height, lines, with_cost=cost.display)
        self.query_one(NarrationPane).styles.height = shares.narration
        self.query_one(TransfersPane).styles.height = shares.transfers
        if shares.cost:
            cost.styles.height = shares.cost
        legend.display = shares.legend > 0
