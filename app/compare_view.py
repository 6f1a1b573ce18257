"""``collviz compare`` in the viewer: both runs' memory, stacked by category, on one scale.

Each run's memory chart is the viewer's own (:class:`~.widgets.MemoryTimeline`), drawn from the
run's whole event log with the scale shared, so the two heights compare directly; the measured
peaks and the theory follow as the table ``--headless`` prints.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from collviz.runtime.wire.protocol import AnyEvent

from .model import EventLog, view_at
from .model.panes import MemoryFields
from .screens.help import HelpScreen
from .widgets import MemoryTimeline
from .widgets.memory_timeline import PEAK_KEY, categories_seen, category_keys
from .widgets.render import format_bytes

__all__ = ["CompareApp", "run_compare_viewer"]

COMPARE_INTRO = (
    "Each run's memory, live bytes stacked by category, on one scale: the same height is the same "
    "bytes in both charts. Under them, the measured peaks beside what theory predicts. ↑/↓ or the "
    "mouse wheel scroll."
)


class CompareApp(App[None]):
    """Two runs' memory charts on one scale, above the comparison table."""

    CSS = """
    #compare-title { height: 1; padding: 0 1; background: $boost; text-style: bold; }
    #compare-legend { height: auto; padding: 0 1; }
    MemoryTimeline { height: auto; border: round $panel-lighten-2; border-title-align: left; padding: 0 1; }
    #compare-table { padding: 0 1; }
    """
    BINDINGS = [
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "quit", "quit"),
        Binding("escape", "quit", "quit", show=False),
    ]

    def __init__(self, runs: Sequence[tuple[str, Sequence[AnyEvent]]], table: str) -> None:
        super().__init__()
        self.views = [(name, MemoryFields.of(view_at(EventLog(events), len(events)))) for name, events in runs]
        self.top = max((track.top for _, memory in self.views for track in memory.tracks), default=0)
        self.table = table

    def compose(self) -> ComposeResult:
        """A title, one chart per run, the table, the footer."""
        names = " vs ".join(name for name, _ in self.views)
        yield Static(Text(f"collviz compare · {names} · the same model · one scale: full height = "
                          f"{format_bytes(self.top)}"), id="compare-title")
        # one legend for every chart: the categories any run held, said once above them
        seen = set().union(*(categories_seen(memory) for _, memory in self.views))
        legend = Text()
        for segment in [*category_keys(seen), *PEAK_KEY]:
            legend.append(segment.text, segment.style)
        yield Static(legend, id="compare-legend")
        with VerticalScroll():
            for index, _ in enumerate(self.views):
                yield MemoryTimeline(screen_share=3, top=self.top, legend=False, id=f"memory-{index}")
            yield Static(Text(self.table), id="compare-table")
        yield Footer()

    def on_mount(self) -> None:
        """Draw each run's memory over its whole run, naming the run in its border (the scale
        they share is said once, above them)."""
        for chart, (name, memory) in zip(self.query(MemoryTimeline), self.views):
            chart.show(memory)
            chart.set_title(f"{name} · live bytes by category")


    def action_help(self) -> None:
        """Say what the screen shows and which keys work."""
        self.push_screen(HelpScreen(COMPARE_INTRO))


def run_compare_viewer(runs: Sequence[tuple[str, Sequence[AnyEvent]]], table: str) -> None:
    """Show the comparison until the user quits."""
    CompareApp(runs, table).run()
