"""The ``collviz compare`` report: two runs' memory side by side, from their events.

Each rank's measured peak of live tensor bytes side by side, their ratio, the ratio the parameter
counts predict (:mod:`.estimate`), the state after the step, the step times and a memory timeline
of each run. Running the two sessions is :mod:`collviz.runtime.compare`'s job.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ..observation.metrics import human_bytes
from ..wire.protocol import AnyEvent, Memory, Phase, RunEnd, RunStart
from .estimate import theory_ratio

__all__ = ["RunFigures", "figures_of", "render_comparison"]

_SPARK = " ▁▂▃▄▅▆▇█"
TIMED_MARK = "unobserved: step time"
"""Part of the name of the phase :func:`.common.timed_steps` opens."""


@dataclass(frozen=True)
class RunFigures:
    """What a comparison needs from one run's events."""

    scenario: str
    peaks: dict[int, int]
    """rank → highest peak_bytes of its Memory events."""
    timeline: list[int]
    """rank 0's live bytes at each of its Memory events, in order."""
    step_ms: float | None
    """Slowest rank's "timed" phase duration ÷ timed steps, or None without that phase."""
    status: str
    state: int
    """Rank 0's params + grads + optimizer bytes when the optimizer step ended (0 if not seen)."""


STATE = ("params", "grads", "optimizer")
"""The categories that make up training state (16 B per parameter in theory)."""


def figures_of(events: list[AnyEvent]) -> RunFigures:
    """Peaks per rank, rank 0's timeline and the step time, from one run's events."""
    start = next(e for e in events if isinstance(e, RunStart))
    peaks: dict[int, int] = defaultdict(int)
    timeline, state = [], 0
    optimizer = {e.index for e in events if isinstance(e, Phase) and e.name.startswith("AdamW step")}
    for event in events:
        if isinstance(event, Memory):
            peaks[event.rank] = max(peaks[event.rank], event.peak_bytes)
            if event.rank == 0:
                timeline.append(event.live_bytes)
                if event.phase in optimizer and event.label == "end":
                    state = sum(event.by_category.get(c, 0) for c in STATE)
    begins, slowest = {}, 0
    for event in events:
        if isinstance(event, Phase) and TIMED_MARK in event.name:
            if event.edge == "begin":
                begins[event.rank] = event.t_ns
            elif event.rank in begins:
                slowest = max(slowest, event.t_ns - begins[event.rank])
    steps = int(start.options.get("timed_steps", 0) or 0)
    end = next((e for e in events if isinstance(e, RunEnd)), None)
    return RunFigures(start.scenario, dict(sorted(peaks.items())), timeline,
                      slowest / 1e6 / steps if steps and slowest else None, end.status if end else "unfinished", state)





def _sparkline(values: list[int], top: int) -> str:
    return "".join(_SPARK[min(8, round(8 * v / top))] if top else " " for v in values)


def render_comparison(figures: list[RunFigures], world_size: int, params: int, unit: int) -> str:
    """The side-by-side table, ratios with their arithmetic, step times and timelines.

    ``params`` is the model's parameter count and ``unit`` the largest FSDP unit's (both runs train
    the same model).
    """
    left, right = figures
    lines = [f"MEASURED: {left.scenario} then {right.scenario}, the same tiny GPT ({params:,} parameters), "
             f"{world_size} ranks; peak = highest live tensor bytes the storage tracker saw on the rank",
             f"  rank  {left.scenario:>12}  {right.scenario:>12}  ratio"]
    for rank in sorted(left.peaks):
        a, b = left.peaks[rank], right.peaks.get(rank, 0)
        lines.append(f"  r{rank:<4} {human_bytes(a):>12}  {human_bytes(b):>12}  {a / b:.2f}" if b else f"  r{rank:<4} {a}")
    measured = max(left.peaks.values()) / max(right.peaks.values())
    lines.append(f"  measured ratio (largest peaks): {max(left.peaks.values()):,} B / {max(right.peaks.values()):,} B = {measured:.2f}")
    state, state_text = theory_ratio(params, world_size)
    unit_ratio, unit_text = theory_ratio(params, world_size, unit)
    lines.append(f"THEORY (from parameter counts, activations excluded): P = {params:,}, N = {world_size}, "
                 f"largest unit P_unit = {unit:,}")
    lines.append(f"  state only, 16·P / (16·P/N) = N: {state_text}")
    lines.append(f"  with the gathered unit, 16·P / (16·P/N + 8·P_unit): {unit_text}")
    lines.append("  (activations are the same in both runs and not sharded, so they pull the measured ratio down)")
    if left.state and right.state:
        lines.append(f"MEASURED state after the step (rank 0, {' + '.join(STATE)}): {left.scenario} {left.state:,} B, "
                     f"{right.scenario} {right.state:,} B, ratio {left.state / right.state:.2f} "
                     f"(theory 16·P = {16 * params:,} B and 16·P/N = {16 * params // world_size:,} B)")
    for fig in figures:
        step = f"{fig.step_ms:.1f} ms per step (timed phase, slowest rank)" if fig.step_ms else "step time not measured"
        lines.append(f"  {fig.scenario}: {step}; run {fig.status}")
    top = max(max(f.timeline, default=0) for f in figures)
    lines.append(f"TIMELINES (rank 0 live bytes at each Memory event, full height = {human_bytes(top)})")
    for fig in figures:
        lines.append(f"  {fig.scenario:>6} |{_sparkline(fig.timeline, top)}|")
    return "\n".join(lines)
