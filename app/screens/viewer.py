"""The main screen: header, rank panels (or a bench run's plot), narration, transfers, legend,
memory, event log."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.containers import Container, Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Static

from ..model import Labels, ViewState
from ..model.panes import (
    CostFields,
    EventTailFields,
    HeaderFields,
    MemoryFields,
    NarrationFields,
    PipelineFields,
    TransferFields,
)
from ..widgets import (
    BenchPlot,
    CostPane,
    EventLogPane,
    Legend,
    MemoryTimeline,
    NarrationPane,
    PipelineTimeline,
    RankHeatmap,
    RankPanel,
    RunHeader,
    SideColumn,
    TransfersPane,
    WorkProgress,
)
from ..widgets.line_widget import LineWidget
from ..widgets.render import DrawnColours
from .rank_detail import RankDetailScreen

__all__ = ["ViewerScreen", "MIN_SIZE"]

MIN_SIZE = (100, 30)
"""The smallest terminal (columns, rows) the layout stays legible in."""

SHORT_BELOW = 34
"""Below this many rows the event log gives four of its lines to the panes above (``-short``)."""


COMPACT_ABOVE = 8
"""Beyond this many ranks one heatmap (a row per rank) replaces the panels."""


def grid_class(world_size: int) -> str:
    """The CSS class laying out ``world_size`` rank panels (2×2 for 4, 2×4 for 8, compact beyond)."""
    if world_size <= 1:
        return "-ranks-1"
    if world_size <= 4:
        return "-ranks-4"
    if world_size <= COMPACT_ABOVE:
        return "-ranks-8"
    return "-ranks-many"


class ViewerScreen(Screen[None]):
    """Everything about the run at the app's cursor; the app calls :meth:`show_view` per frame,
    and each pane is handed only its own fields (:mod:`~..model.panes`).

    A ``collviz bench`` run (many phases, trivial buffers) shows its busbw plot in place of the
    rank panels: the screen gets the ``-bench`` class and the stylesheet swaps the two.
    """

    def __init__(self, *, mask_volatile: bool = False) -> None:
        super().__init__()
        self.mask_volatile = mask_volatile
        self._world = -1
        self._view: ViewState | None = None
        self._labels = Labels("", "", False)
        self._ready = False
        # the panes a frame updates, kept rather than looked up in the DOM every frame (nine
        # queries walked the widget tree: half a millisecond of each 64-rank frame)
        self._header = RunHeader(id="header")
        self._bench = BenchPlot(id="bench")
        self._narration = NarrationPane(id="narration")
        self._cost = CostPane(id="cost", mask_volatile=mask_volatile)
        self._transfers = TransfersPane(id="transfers")
        self._pipeline = PipelineTimeline(id="pipeline")
        self._memory = MemoryTimeline(id="memory")
        self._log = EventLogPane(id="log")
        self._side = SideColumn(id="side")
        self._heatmap: RankHeatmap | None = None
        self._panels: list[RankPanel] = []
        self._legend = Legend(id="legend")

    def compose(self) -> ComposeResult:
        """Lay out the panes; rank panels are mounted once the world size is known."""
        yield self._header
        with Horizontal(id="body"):
            yield Container(id="ranks")
            yield self._bench
            with self._side:
                yield self._narration
                yield self._cost
                yield self._transfers
                yield self._legend
        yield self._pipeline
        yield self._memory
        yield self._log
        yield Static(f"terminal too small (need {MIN_SIZE[0]}x{MIN_SIZE[1]})", id="too-small")
        yield WorkProgress(id="work")
        yield Footer(compact=True, show_command_palette=False)  # every key's word uncut at 100 columns

    def on_mount(self) -> None:
        """Check the size, then show any view that arrived before the panes existed."""
        self._ready = True
        self._check_size(self.app.size.width, self.app.size.height)
        if self._view is not None:
            self.show_view(self._view, self._labels)

    def on_resize(self, event: events.Resize) -> None:
        """Switch to the too-small message below :data:`MIN_SIZE`."""
        self._check_size(event.size.width, event.size.height)

    def _check_size(self, width: int, height: int) -> None:
        self.set_class(width < MIN_SIZE[0] or height < MIN_SIZE[1], "-too-small")
        self.set_class(height < SHORT_BELOW, "-short")

    def show_progress(self, label: str, done: float, total: float) -> None:
        """Show long work's progress (a large trace opening, a bench sweep) above the footer."""
        if self._ready:
            self.query_one(WorkProgress).show(label, done, total)

    def hide_progress(self) -> None:
        """The long work is done."""
        if self._ready:
            self.query_one(WorkProgress).hide()

    def set_log_visible(self, visible: bool) -> None:
        """Show or hide the raw event log pane."""
        self._log.set_class(visible, "-visible")
        if self._view is not None:
            self._log.show(EventTailFields.of(self._view))

    def show_view(self, view: ViewState, labels: Labels) -> None:
        """Display ``view``; ``labels`` are the header's words."""
        self._view = view
        self._labels = labels
        if not self._ready:
            return
        self._header.show(HeaderFields.of(view), labels)
        if self.has_class("-bench") != (view.bench is not None):  # (set_class copies the class set each time)
            self.set_class(view.bench is not None, "-bench")
        if view.bench is not None:
            self._bench.show(view.bench)
            if len(view.bench.rows) < view.bench.cases and view.state.kind not in ("finished", "failed", "interrupted"):
                self.show_progress(f"bench sweep: {len(view.bench.rows)} of {view.bench.cases} sizes measured",
                                   len(view.bench.rows), view.bench.cases)
            else:
                self.hide_progress()
        self._ensure_panels(len(view.ranks))
        if self._heatmap is not None:
            self._heatmap.show(view.ranks)
        for panel, rank in zip(self._panels, view.ranks):
            panel.show(rank)
        self._narration.show(NarrationFields.of(view))
        self._cost.show(CostFields.of(view))
        self._transfers.show(TransferFields.of(view))
        self._pipeline.show(PipelineFields.of(view))
        empty = not any(rank.memory.length for rank in view.ranks)
        if self._memory.has_class("-empty") != empty:
            self._memory.set_class(empty, "-empty")
        self._memory.show(MemoryFields.of(view))
        if self._log.has_class("-visible"):
            self._log.show(EventTailFields.of(view))

    def _ensure_panels(self, world: int) -> None:
        if world == self._world:
            return
        self._world = world
        ranks = self.query_one("#ranks", Container)
        ranks.remove_children()
        for name in ("-ranks-1", "-ranks-4", "-ranks-8", "-ranks-many"):
            ranks.remove_class(name)
        ranks.add_class(grid_class(world))
        self._heatmap, self._panels = None, []
        if world > COMPACT_ABOVE:
            self._heatmap = RankHeatmap(id="heatmap", mask_volatile=self.mask_volatile)
            ranks.mount(self._heatmap)
        else:
            self._panels = [RankPanel(r, mask_volatile=self.mask_volatile) for r in range(world)]
            for panel in self._panels:
                panel.padding = 2 if self.has_class("-present") else 0
            ranks.mount(*self._panels)
        self._show_legend()

    def _show_legend(self, again: bool = False) -> None:
        """Explain the provenance colours the rank panels (or the heatmap) draw now, and share the
        side column again where the legend changed (``again``: redraw it, the palette changed)."""
        drawers: list[LineWidget] = [self._heatmap] if self._heatmap is not None else [*self._panels]
        colours = DrawnColours()
        for drawer in drawers:
            colours |= drawer.colours
        if self._legend.show(colours, labelled_rows=self._heatmap is not None, again=again):
            self._side.share()

    def on_line_widget_colours_drawn(self, message: LineWidget.ColoursDrawn) -> None:
        """A rank panel (or the heatmap) draws other provenance colours: the legend follows."""
        message.stop()
        self._show_legend()

    def set_present(self, present: bool) -> None:
        """The projector layout: memory and event log hidden, the cost pane's headline alone, wider
        cells (see app.tcss)."""
        self.set_class(present, "-present")
        self._cost.compact = present
        if self._view is not None and self._ready:
            self._cost.show(CostFields.of(self._view))
        self._side.share()
        for panel in self.query(RankPanel):
            panel.padding = 2 if present else 0

    def refresh_palette(self) -> None:
        """Redraw what caches rank colours (the legend) after the palette changed."""
        if self._world > 0:
            self._show_legend(again=True)

    def on_rank_heatmap_selected(self, message: RankHeatmap.Selected) -> None:
        """Open the detail view of the clicked row's rank."""
        self.on_rank_panel_selected(message)

    def on_rank_panel_selected(self, message: RankPanel.Selected | RankHeatmap.Selected) -> None:
        """Open the detail view of the clicked rank."""
        if self._view is not None:
            self.app.push_screen(RankDetailScreen(message.rank, self._view, mask_volatile=self.mask_volatile))
