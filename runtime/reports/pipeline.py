"""A pipeline step's timeline from its Span events: who computed what when, and the bubble.

Shared by the headless summary and the viewer's timeline pane. Spans of different ranks are
compared on one clock: workers on one host read the same monotonic clock, so the step's window
runs from the first span's start on any rank to the last span's end on any rank.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..observation.metrics import human_bytes
from ..wire.protocol import Memory, Span

__all__ = ["PipelineTimeline", "timeline_of", "ideal_bubble", "paced_bubble", "bubble_reasons", "timeline_cells",
           "activation_rise", "pipeline_lines", "Cell"]

Cell = tuple[str, int] | None
"""One column of a rank's timeline row: (kind, microbatch) of the span drawn there, or None: idle."""


def ideal_bubble(stages: int, microbatches: int) -> float:
    """The idle fraction of a GPipe or 1F1B step whose stages take equal time and whose messages
    cost nothing: (p − 1) / (m + p − 1)."""
    return (stages - 1) / (microbatches + stages - 1) if stages and microbatches else 0.0


@dataclass(frozen=True)
class PipelineTimeline:
    """The spans of one pipelined step, by rank, on the shared clock (ns)."""

    spans: dict[int, list[tuple[int, int, str, int]]]
    """rank → (start, end, kind, microbatch) in start order."""
    start: int
    end: int

    @property
    def window_ns(self) -> int:
        """From the first span's start to the last span's end, on any rank."""
        return max(1, self.end - self.start)

    @property
    def stages(self) -> int:
        """Ranks that computed something."""
        return len(self.spans)

    @property
    def microbatches(self) -> int:
        """Distinct microbatches seen."""
        return len({mb for rows in self.spans.values() for *_, mb in rows})

    def busy_ns(self, rank: int) -> int:
        """Time ``rank`` spent computing forwards and backwards."""
        return sum(end - start for start, end, _, _ in self.spans.get(rank, ()))

    def bubble(self, rank: int) -> float:
        """The fraction of the window ``rank`` was not computing."""
        return 1.0 - self.busy_ns(rank) / self.window_ns

    def mean_bubble(self) -> float:
        """The bubble averaged over the stages."""
        return sum(self.bubble(rank) for rank in self.spans) / max(1, self.stages)

    def most_in_flight(self, rank: int) -> int:
        """The most microbatches whose forward had ended and backward not yet, at once, on ``rank``:
        whose activations the stage was keeping."""
        level = most = 0
        for _, _, kind, _ in sorted(self.spans.get(rank, ()), key=lambda s: s[1]):
            level += 1 if kind == "forward" else -1
            most = max(most, level)
        return most


def paced_bubble(timeline: PipelineTimeline) -> tuple[float, dict[int, float]]:
    """The idle fraction this step would have had if nothing but its stages' own computing took
    time, and each stage's computing per microbatch (forward + backward, ns, averaged).

    Stages with unequal costs idle more than (p − 1)/(m + p − 1): the slowest stage sets the pace,
    and a schedule that waited for nothing else would take (m − 1) × the slowest stage's time per
    microbatch plus one microbatch's way through every stage (``Σ stages``)."""
    m = max(1, timeline.microbatches)
    per_microbatch = {rank: timeline.busy_ns(rank) / m for rank in timeline.spans}
    ideal_window = (m - 1) * max(per_microbatch.values()) + sum(per_microbatch.values())
    busy = sum(m * t for t in per_microbatch.values()) / max(1, timeline.stages)
    return (1.0 - busy / ideal_window if ideal_window else 0.0), per_microbatch


def bubble_reasons(timeline: PipelineTimeline) -> list[str]:
    """Why the measured bubble exceeds (p − 1)/(m + p − 1), in the step's own figures: the part
    unequal stages explain, and the rest, spent between computations."""
    paced, per_microbatch = paced_bubble(timeline)
    p, m = timeline.stages, timeline.microbatches
    slowest = max(per_microbatch, key=per_microbatch.__getitem__)
    stages = ", ".join(f"r{rank} {ns / 1e6:.2f}" for rank, ns in per_microbatch.items())
    measured = timeline.mean_bubble()
    return [
        f"why more than ({p}−1)/({m}+{p}−1): the formula assumes equal stages and free messages. Forward + "
        f"backward per microbatch took {stages} ms: the slowest stage (r{slowest}) sets the pace, so with "
        f"these stages and nothing else the bubble would be {paced:.3f}.",
        f"the other {max(0.0, measured - paced):.3f} went between computations: activations and gradients in "
        f"flight between stages, collviz's own events and memory samples, and ranks waiting for a free core.",
    ]


def timeline_of(spans: Iterable[Span]) -> PipelineTimeline | None:
    """The timeline of ``spans`` (one phase's), or None when there are none."""
    rows: dict[int, list[tuple[int, int, str, int]]] = {}
    for span in spans:
        rows.setdefault(span.rank, []).append((span.t_ns - span.duration_ns, span.t_ns, span.kind, span.microbatch))
    if not rows:
        return None
    for row in rows.values():
        row.sort()
    return PipelineTimeline(dict(sorted(rows.items())), min(r[0][0] for r in rows.values()),
                            max(s[1] for r in rows.values() for s in r))


def timeline_cells(timeline: PipelineTimeline, rank: int, width: int) -> list[Cell]:
    """``width`` columns of ``rank``'s row: each shows the span covering most of its time slice
    (when it covers at least half of it), else idle."""
    slice_ns = timeline.window_ns / max(1, width)
    cells: list[Cell] = []
    spans = timeline.spans.get(rank, [])
    for column in range(width):
        left = timeline.start + column * slice_ns
        right = left + slice_ns
        best, best_overlap = None, 0.0
        for start, end, kind, mb in spans:
            overlap = min(end, right) - max(start, left)
            if overlap > best_overlap:
                best, best_overlap = (kind, mb), overlap
        cells.append(best if best_overlap >= slice_ns / 2 else None)
    return cells


def _text_row(cells: Sequence[Cell]) -> str:
    """Forward of microbatch k as the digit k, its backward as the letter a + k, idle as ·."""
    return "".join("·" if c is None else (str(c[1] % 10) if c[0] == "forward" else chr(ord("a") + c[1] % 26))
                   for c in cells)


def activation_rise(memory: Iterable[Memory], rank: int, phase: int) -> int:
    """How far ``rank``'s activation bytes rose in ``phase`` above its first sample there (0: no samples)."""
    samples = [m.by_category.get("activations", 0) for m in memory if m.rank == rank and m.phase == phase]
    return max(0, max(samples) - samples[0]) if samples else 0


def pipeline_lines(spans: Sequence[Span], memory: Sequence[Memory], width: int = 64) -> list[str]:
    """The summary's account of one pipelined phase (``spans``'; ``memory``: the run's samples): a
    text timeline per rank, the measured bubble beside (p − 1)/(m + p − 1), and each stage's
    activations kept at once."""
    timeline = timeline_of(spans)
    if timeline is None:
        return []
    p, m = timeline.stages, timeline.microbatches
    lines = [f"  pipeline timeline ({timeline.window_ns / 1e6:.1f} ms; digit k: forward of microbatch k, "
             f"letter: its backward (a = 0), ·: idle)"]
    for rank in timeline.spans:
        lines.append(f"    r{rank} {_text_row(timeline_cells(timeline, rank, width))}  "
                     f"idle {timeline.bubble(rank):.0%}")
    lines.append(f"  bubble: measured {timeline.mean_bubble():.3f} (mean over {p} stages of the time not "
                 f"computing, collviz's own events included) · ideal (p−1)/(m+p−1) = ({p}−1)/({m}+{p}−1) = "
                 f"{ideal_bubble(p, m):.3f}")
    lines.extend(f"  {reason}" for reason in bubble_reasons(timeline))
    phase = spans[0].phase
    for rank in timeline.spans:
        kept = timeline.most_in_flight(rank)
        lines.append(f"  r{rank} kept the activations of up to {kept} microbatch{'es' if kept != 1 else ''} at once: "
                     f"+{human_bytes(activation_rise(memory, rank, phase))} of activations at most")
    return lines
