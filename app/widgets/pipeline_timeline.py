"""The pipeline pane: each stage's forwards and backwards over the step, so the bubble is seen.

One row per rank, time left to right on one clock shared by all ranks (from the first span's
start to the last one's end): a cell is the forward (bright, the microbatch's digit) or backward
(dark, the same digit) of the microbatch whose colour it has, or ``·`` where the rank computed
nothing. The title gives the measured bubble beside (p − 1)/(m + p − 1), or, while the step is
shown piece by piece (→ after stepping onto it), which piece is the latest. Shown only for runs
whose events carry pipeline spans.
"""

from __future__ import annotations

from functools import lru_cache

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size

from collviz.runtime.reports.pipeline import PipelineTimeline as Timeline, ideal_bubble, timeline_cells, timeline_of

from ..model.panes import PipelineFields
from .line_widget import LineWidget
from .render import DIM, Line, palette, rank_colour, rank_label_style

__all__ = ["PipelineTimeline", "MAX_ROWS"]

MAX_ROWS = 16
"""Most ranks drawn; beyond, a line says how many more."""

_IDLE = Style(color="#5a5a5a")
_BACKWARD_BG = "#262626"


def _forward_style(microbatch: int) -> Style:
    return _span_style(microbatch, "forward", palette())


def _backward_style(microbatch: int) -> Style:
    return _span_style(microbatch, "backward", palette())


@lru_cache(maxsize=256)
def _span_style(microbatch: int, kind: str, colours: tuple[str, ...]) -> Style:
    """One shared style per microbatch, kind and palette (line widgets key strips on style identity)."""
    if kind == "forward":
        return Style(color="black", bgcolor=rank_colour(microbatch), bold=True)
    return Style(color=rank_colour(microbatch), bgcolor=_BACKWARD_BG, bold=True, underline=True)


def _title(fields: PipelineFields, timeline: Timeline) -> str:
    """The measured bubble against the formula once the schedule is whole; part-way through it
    (→ steps span by span), how far it has come and the latest piece instead."""
    if fields.hidden:
        latest = fields.spans[-1]
        return (f"pipeline · piece {len(fields.spans)} of {len(fields.spans) + fields.hidden}: r{latest.rank} "
                f"{latest.kind} of microbatch {latest.microbatch} · as recorded · → next piece · g or end: jump")
    return (f"pipeline · time → ({timeline.window_ns / 1e6:.1f} ms) · bubble measured "
            f"{timeline.mean_bubble():.2f} · ideal (p−1)/(m+p−1) = {ideal_bubble(timeline.stages, timeline.microbatches):.2f}")


class PipelineTimeline(LineWidget):
    """Every stage's forward and backward spans of the pipelined step, and the idle time between."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self._fields: PipelineFields | None = None
        self._timeline: Timeline | None = None
        self._rows = 0
        self.set_title("pipeline")

    def show(self, fields: PipelineFields) -> None:
        """Display the pipeline spans (hidden when there are none: a pane that stays hidden is not
        redrawn, as most runs have no spans and each redraw repaints it)."""
        if not fields.spans and self._fields is not None and not self._fields.spans:
            return
        self._fields = fields
        self.set_class(bool(fields.spans), "-visible")
        self._timeline = timeline = timeline_of(fields.spans)
        if timeline is not None:
            self.set_title(_title(fields, timeline))
        rows = min(fields.world_size, MAX_ROWS) + (1 if fields.world_size > MAX_ROWS else 0) + 1
        self.lines_changed(layout=rows != self._rows)
        self._rows = rows

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """The legend and a row per rank (at most :data:`MAX_ROWS`)."""
        return max(self._rows, 1)

    def build_lines(self, width: int, height: int) -> list[Line]:
        """The legend, then each rank's row with its idle fraction."""
        fields, timeline = self._fields, self._timeline
        if fields is None or timeline is None:
            return [[Segment("no pipeline spans yet", DIM)]]
        microbatches = sorted({mb for rows in timeline.spans.values() for *_, mb in rows})
        legend: Line = [Segment("colour: microbatch  ")]
        for mb in microbatches[:10]:
            legend.append(Segment(str(mb % 10), _forward_style(mb)))
        legend += [Segment(" forward  "), Segment("0", _backward_style(0)), Segment(" backward  "),
                   Segment("·", _IDLE), Segment(" idle (waiting for data, sending)")]
        lines: list[Line] = [legend]
        label_width = len(f"r{fields.world_size - 1}") + 1
        chart_width = max(8, width - label_width - len(" not started"))  # the longer of the two notes
        for rank in range(min(fields.world_size, MAX_ROWS)):
            line: Line = [Segment(f"r{rank}".ljust(label_width), rank_label_style(rank))]
            for cell in timeline_cells(timeline, rank, chart_width):
                if cell is None:
                    line.append(Segment("·", _IDLE))
                else:
                    kind, mb = cell
                    line.append(Segment(str(mb % 10), _forward_style(mb) if kind == "forward" else _backward_style(mb)))
            idle = f" idle {timeline.bubble(rank):.0%}" if rank in timeline.spans else " not started"
            line.append(Segment(idle, DIM))
            lines.append(line)
        if fields.world_size > MAX_ROWS:
            lines.append([Segment(f"{fields.world_size - MAX_ROWS} more ranks not drawn", DIM)])
        return lines
