"""The side column: narration, cost, transfers and legend, sharing the column's height by priority.

Textual's ``fr`` heights with a least height cannot share a short column: once every flexible
pane is held at its least height, Textual 8 sizes ``1fr`` as all the space left, and the panes
below are laid out past the screen's edge (at 100×30 the transfers pane and the legend were never
seen). So the column sets its panes' heights itself, from its own height and the rows each pane's
text wants (:class:`~.text_pane.PaneRows`), whenever one of them changes: the cost pane's headline
(the call's S, t, algbw and busbw) first, whatever the height; a pane with one line to say (no
transfers, none recorded) gets that line; the legend (none where no cell is coloured) goes first
when rows run short (above 8 ranks the heatmap's row labels carry the rank colours anyway); the cost pane grows towards its whole
text up to a share of the column; then the narration gets two thirds of what is left and the
transfers one third (no more than their text needs, the narration taking the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.containers import Vertical
from textual.geometry import Size

from .cost import CostPane
from .legend import Legend
from .narration import NarrationPane
from .text_pane import PaneFrame, PaneRows
from .transfers import TransfersPane

__all__ = ["SideColumn", "SideShares", "side_shares"]

BORDER = 2
"""Rows a pane's border takes."""

COST_ROWS = (9, 0)
"""The most the cost pane grows to (borders included) in a column of at least
:data:`COST_ROWS_FROM` rows; its headline it keeps whatever the column's height (in a column
shorter than 24 rows, only its headline)."""
COST_ROWS_FROM = (24, 0)

LEAST_NARRATION = 5
LEAST_TRANSFERS = 5
"""Rows the narration and the transfers (when they list any) need beside the legend: else the
legend is hidden; with fewer left the transfers get one line."""


@dataclass(frozen=True)
class SideShares:
    """Each pane's height in rows, borders included (0: hidden)."""

    narration: int
    cost: int
    transfers: int
    legend: int


def side_shares(height: int, legend_lines: int, cost: PaneRows, transfers: PaneRows) -> SideShares:
    """How a column of ``height`` rows is shared, the legend needing ``legend_lines``, the cost and
    transfers panes' texts the rows they say."""
    cap = next(rows for rows, least in zip(COST_ROWS, COST_ROWS_FROM) if height >= least)
    cost_rows = min(height, max(cost.least, min(cost.full, cap - BORDER)) + BORDER)
    one_line = transfers.full <= 1
    least_text = LEAST_NARRATION + (1 + BORDER if one_line else LEAST_TRANSFERS)
    legend = legend_lines if height - cost_rows - legend_lines >= least_text else 0
    rest = max(0, height - cost_rows - legend)
    if not one_line and rest >= LEAST_NARRATION + LEAST_TRANSFERS:
        shown = min(max(LEAST_TRANSFERS, rest // 3), transfers.full + BORDER)
    else:
        shown = min(1 + BORDER, rest)
    return SideShares(narration=rest - shown, cost=cost_rows, transfers=shown, legend=legend)


class SideColumn(Vertical):
    """Holds the narration, cost, transfers and legend panes and sizes them (:func:`side_shares`)
    whenever its height, the legend's text or the rows a pane's text wants change."""

    def on_resize(self, event: events.Resize) -> None:
        """Share the new height."""
        self.share()

    def on_pane_frame_rows_changed(self, message: PaneFrame.RowsChanged) -> None:
        """A pane's text changed shape: share the height again."""
        message.stop()
        self.share()

    def share(self) -> None:
        """Set each pane's height from the column's (nothing before the column has a size)."""
        height, width = self.size.height, self.size.width
        if not height:
            return
        legend, cost, transfers = self.query_one(Legend), self.query_one(CostPane), self.query_one(TransfersPane)
        text_width = max(1, width - legend.styles.gutter.width)
        lines = legend.get_content_height(Size(width, height), Size(width, height), text_width) if legend.has_rows else 0
        shares = side_shares(height, lines, cost.rows_wanted(_text_width(cost, width)),
                             transfers.rows_wanted(_text_width(transfers, width)))
        self.query_one(NarrationPane).styles.height = shares.narration
        transfers.styles.height = shares.transfers
        cost.styles.height = shares.cost
        legend.display = shares.legend > 0


def _text_width(pane: PaneFrame, width: int) -> int:
    """The columns ``pane``'s text wraps at in a column ``width`` wide (a text pane scrolls
    without drawing a scroll bar)."""
    return width - pane.styles.gutter.width
