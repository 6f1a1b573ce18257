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
    kind: str = "fsdp"
    """The scenario's kind: ddp, fsdp or hsdp."""
    replicas: int = 1
    """hsdp: the replica groups (each shards one copy of the model)."""


STATE = ("params", "grads", "optimizer")
"""The categories that make up training state (16 B per parameter in theory)."""


def figures_of(events: list[AnyEvent], kind: str = "fsdp", replicas: int = 1) -> RunFigures:
    """Peaks per rank, rank 0's timeline and the step time, from one run's events (of a ``kind``
    scenario with ``replicas`` replica groups)."""
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
                      slowest / 1e6 / steps if steps and slowest else None, end.status if end else "unfinished", state,
                      kind, replicas)





def _sparkline(values: list[int], top: int) -> str:
    return "".join(_SPARK[min(8, round(8 * v / top))] if top else " " for v in values)


def _sharded_over(fig: RunFigures, world_size: int) -> int:
    """How many ranks share one copy of the model's state in this run (1: every rank has it all)."""
    if fig.kind == "ddp":
        return 1
    return world_size // fig.replicas


def render_comparison(figures: list[RunFigures], world_size: int, params: int, unit: int) -> str:
    """The side-by-side table, ratios with their arithmetic, step times and timelines.

    ``params`` is the model's parameter count and ``unit`` the largest FSDP unit's (every run
    trains the same model). Each run's state is estimated as 16·P over the ranks that shard it,
    plus 8·P_unit for a gathered unit where it shards.
    """
    names = [fig.scenario for fig in figures]
    lines = [f"MEASURED: {' then '.join(names)}, the same tiny GPT ({params:,} parameters), "
             f"{world_size} ranks; peak = highest live tensor bytes the storage tracker saw on the rank",
             "  rank  " + "".join(f"{name:>12}  " for name in names) + ("ratio" if len(figures) == 2 else "")]
    for rank in sorted(figures[0].peaks):
        values = [fig.peaks.get(rank, 0) for fig in figures]
        ratio = f"{values[0] / values[1]:.2f}" if len(values) == 2 and values[1] else ""
        lines.append(f"  r{rank:<4} " + "".join(f"{human_bytes(v):>12}  " for v in values) + ratio)
    if len(figures) == 2:
        a, b = (max(fig.peaks.values()) for fig in figures)
        lines.append(f"  measured ratio (largest peaks): {a:,} B / {b:,} B = {a / b:.2f}")
    lines.append(f"THEORY (from parameter counts, activations excluded): P = {params:,}, N = {world_size}, "
                 f"largest unit P_unit = {unit:,}")
    kinds = [fig.kind for fig in figures]
    if "ddp" in kinds and "fsdp" in kinds:
        _, state_text = theory_ratio(params, world_size)
        _, unit_text = theory_ratio(params, world_size, unit)
        lines.append(f"  state only, 16·P / (16·P/N) = N: {state_text}")
        lines.append(f"  with the gathered unit, 16·P / (16·P/N + 8·P_unit): {unit_text}")
    for fig in figures:
        shards = _sharded_over(fig, world_size)
        gathered = 0 if shards == 1 else 8 * unit
        formula = "16·P" if shards == 1 else f"16·P/{shards} + 8·P_unit"
        lines.append(f"  {fig.scenario}: {formula} = {16 * params // shards + gathered:,} B per rank "
                     f"(state sharded over {shards} rank{'s' if shards > 1 else ''})")
    lines.append("  (activations are the same in every run and not sharded, so they pull the measured ratios down)")
    if all(fig.state for fig in figures):
        measured = ", ".join(f"{fig.scenario} {fig.state:,} B (theory 16·P/{_sharded_over(fig, world_size)} = "
                             f"{16 * params // _sharded_over(fig, world_size):,} B)" for fig in figures)
        lines.append(f"MEASURED state after the step (rank 0, {' + '.join(STATE)}): {measured}")
        if len(figures) == 2:
            lines[-1] += f"; ratio {figures[0].state / figures[1].state:.2f}"
    for fig in figures:
        step = f"{fig.step_ms:.1f} ms per step (timed phase, slowest rank)" if fig.step_ms else "step time not measured"
        lines.append(f"  {fig.scenario}: {step}; run {fig.status}")
    top = max(max(f.timeline, default=0) for f in figures)
    lines.append(f"TIMELINES (rank 0 live bytes at each Memory event, full height = {human_bytes(top)})")
    for fig in figures:
        lines.append(f"  {fig.scenario:>6} |{_sparkline(fig.timeline, top)}|")
    return "\n".join(lines)
