"""Memory timeline: each rank's live bytes over its samples, phase boundaries and the cursor."""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size

from ..model import MemoryTrack, ViewState
from .line_widget import LineWidget
from .render import DIM, Line, format_bytes, rank_colour

__all__ = ["MemoryTimeline", "device_figures", "NO_DEVICE_FIGURES"]

_BARS = "▁▂▃▄▅▆▇█"
_BOUNDARY = "┊"
_FUTURE = Style(color="#4a4a4a")

MAX_SAMPLE_WIDTH = 6
"""Most columns one sample is widened to when a rank has few samples."""

NA = "N/A"
NO_DEVICE_FIGURES = f"CUDA allocator {NA} · NVML {NA}"
"""The pane's subtitle when no rank's latest sample has device figures (CPU runs, no NVML)."""
WITH_DEVICE_FIGURES = "CUDA allocator allocated/reserved · NVML used/total"
"""The pane's subtitle when some rank has device figures (shown at the end of each rank's row)."""


def device_figures(track: MemoryTrack) -> str:
    """`` · CUDA 1.2 GiB/2.0 GiB · NVML 10.3 GiB/79.6 GiB`` from a rank's latest sample, N/A for
    each figure it did not carry."""
    cuda = f"{format_bytes(track.cuda.allocated)}/{format_bytes(track.cuda.reserved)}" if track.cuda else NA
    nvml = f"{format_bytes(track.nvml.used)}/{format_bytes(track.nvml.total)}" if track.nvml else NA
    return f" · CUDA {cuda} · NVML {nvml}"


class MemoryTimeline(LineWidget):
    """One row per rank: a bar per sample (resampled to fit), ┊ where the phase changes.

    Samples up to the cursor are drawn in the rank's colour, later ones dimmed, so the cursor's
    position is where the colour stops. The right-hand column gives current and peak bytes, and
    where the run has them the CUDA allocator's and NVML's figures of the rank's latest sample;
    without them (CPU, no NVML library) the subtitle says they are N/A.
    Drawn from lines of segments (see :class:`LineWidget`).
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._view: ViewState | None = None
        self._rows = -1
        self.border_title = "memory · live bytes per rank · ┊ phase boundary · grey: after the cursor"
        self.border_subtitle = f"device: {NO_DEVICE_FIGURES}"

    def show(self, view: ViewState) -> None:
        """Display the memory of ``view``'s ranks."""
        self._view = view
        device = any(r.memory.cuda is not None or r.memory.nvml is not None for r in view.ranks)
        subtitle = f"device: {WITH_DEVICE_FIGURES if device else NO_DEVICE_FIGURES}"
        if subtitle != self.border_subtitle:
            self.border_subtitle = subtitle
        self.lines_changed(layout=len(view.ranks) != self._rows)
        self._rows = len(view.ranks)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """One row per rank (one line for the placeholder)."""
        return max(1, len(self._view.ranks)) if self._view is not None else 1

    def build_lines(self, width: int, height: int) -> list[Line]:
        """One line per rank: label, bars, current and peak bytes."""
        view = self._view
        if view is None or not view.ranks:
            return [[Segment("no memory samples yet", DIM)]]
        tracks = [r.memory for r in view.ranks]
        top = max((t.top for t in tracks), default=0) or 1
        figures = [f"  {format_bytes(t.current):>9} peak {format_bytes(t.peak):>9}" for t in tracks]
        if any(t.cuda is not None or t.nvml is not None for t in tracks):
            devices = [device_figures(t) for t in tracks]
            widest = max(map(len, devices))
            figures = [figure + device.ljust(widest) for figure, device in zip(figures, devices)]
        label_width = len(f"r{len(tracks) - 1}") + 1
        bars_width = max(4, width - label_width - max(map(len, figures)))
        lines = []
        for rank, (track, figure) in enumerate(zip(tracks, figures)):
            bars = self._bars(track.live, track.phases, track.length, track.upto, top, bars_width, rank)
            used = sum(len(segment.text) for segment in bars)
            lines.append([Segment(f"r{rank}".ljust(label_width), Style(color=rank_colour(rank))), *bars,
                          Segment(" " * (bars_width - used) + figure)])
        return lines

    @staticmethod
    def _bars(live: Sequence[int], phases: Sequence[int], count: int, upto: int, top: int, width: int,
              rank: int) -> Line:
        """Bars for one rank's samples fitted to ``width`` columns, with ┊ at phase changes.

        Only the first ``count`` samples are drawn (the series may have grown since the view was
        made). Few samples are widened (up to :data:`MAX_SAMPLE_WIDTH` columns each); many are
        resampled.
        """
        out: Line = []
        if not count:
            return out
        changes = sum(1 for i in range(1, count) if phases[i] != phases[i - 1]) if count <= width else 0
        room = max(1, width - changes)
        columns = min(count, room)
        repeat = max(1, min(MAX_SAMPLE_WIDTH, room // count)) if count <= room else 1
        colour = Style(color=rank_colour(rank))
        previous_phase = None
        run: list[str] = []
        run_style = colour
        used = 0
        for column in range(columns):
            at = min(count - 1, (column * count) // columns)
            style = colour if at < upto else _FUTURE
            boundary = previous_phase is not None and phases[at] != previous_phase and used < width - repeat
            if (boundary or style is not run_style) and run:
                out.append(Segment("".join(run), run_style))
                run = []
            if boundary:
                out.append(Segment(_BOUNDARY, DIM))
                used += 1
            previous_phase = phases[at]
            run_style = style
            level = max(0, min(7, round(live[at] / top * 7)))
            run.append(_BARS[level] * repeat)
            used += repeat
        if run:
            out.append(Segment("".join(run), run_style))
        return out
