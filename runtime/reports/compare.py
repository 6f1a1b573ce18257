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

__all__ = ["RunFigures", "ModelSizes", "figures_of", "state_theory", "render_comparison", "comparison_document"]

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
    state: dict[int, int]
    """rank → its params + grads + optimizer bytes when the optimizer step ended (absent if not seen)."""
    kind: str = "fsdp"
    """The scenario's kind: ddp, fsdp, hsdp, fsdp-tp or pp."""
    replicas: int = 1
    """hsdp: the replica groups (each shards one copy of the model)."""
    tp: int = 1
    """fsdp-tp: the tensor-parallel degree."""
    data: str = ""
    """What one step trains on, in words (batch per rank, per pair, or per pipeline)."""


@dataclass(frozen=True)
class ModelSizes:
    """Parameter counts of the compared model that the theory needs."""

    params: int
    unit: int
    """The largest FSDP unit (a block)."""
    split: int
    """Parameters tensor parallelism splits (every block's fc1 weight and bias, fc2 weight)."""
    stages: tuple[int, ...]
    """Parameters of each pipeline stage at this world size (stage 0 with the embeddings, the last
    with the head)."""


STATE = ("params", "grads", "optimizer")
"""The categories that make up training state (16 B per parameter in theory)."""


def _data_text(kind: str, options: dict, world_size: int, tp: int) -> str:
    batch = int(options.get("batch", 0) or 0)
    if kind == "pp":
        return f"{batch} sequences per step, in {options.get('microbatches', '?')} microbatches through the stages"
    if kind == "fsdp-tp":
        return f"{batch} sequences per tensor-parallel group ({batch * world_size // tp} per step)"
    return f"{batch} sequences on each rank ({batch * world_size} per step)"


def figures_of(events: list[AnyEvent], kind: str = "fsdp", replicas: int = 1, tp: int = 1) -> RunFigures:
    """Peaks per rank, rank 0's timeline and the step time, from one run's events (of a ``kind``
    scenario with ``replicas`` replica groups and tensor-parallel degree ``tp``)."""
    start = next(e for e in events if isinstance(e, RunStart))
    peaks: dict[int, int] = defaultdict(int)
    timeline: list[int] = []
    state: dict[int, int] = {}
    optimizer = {e.index for e in events if isinstance(e, Phase) and e.name.startswith("AdamW step")}
    for event in events:
        if isinstance(event, Memory):
            peaks[event.rank] = max(peaks[event.rank], event.peak_bytes)
            if event.rank == 0:
                timeline.append(event.live_bytes)
            if event.phase in optimizer and event.label == "end":
                state[event.rank] = sum(event.by_category.get(c, 0) for c in STATE)
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
                      slowest / 1e6 / steps if steps and slowest else None, end.status if end else "unfinished",
                      dict(sorted(state.items())),
                      kind, replicas, tp, _data_text(kind, start.options, start.world_size, tp))





def _sparkline(values: list[int], top: int) -> str:
    return "".join(_SPARK[min(8, round(8 * v / top))] if top else " " for v in values)


def state_theory(fig: RunFigures, world_size: int, sizes: ModelSizes, rank: int = 0) -> tuple[int, int, str]:
    """(``rank``'s training state, the same plus what it gathers while a unit runs, the formula with
    its numbers), at 16 B per parameter it keeps, for ``fig``'s kind of parallelism."""
    p, n, unit = sizes.params, world_size, sizes.unit
    if fig.kind == "ddp":
        return 16 * p, 16 * p, f"16·P = 16 × {p:,}"
    if fig.kind == "pp":
        own = sizes.stages[rank]
        return 16 * own, 16 * own, f"16·P_stage{rank} = 16 × {own:,} (stage {rank}'s own layers)"
    if fig.kind == "fsdp-tp":
        dp = n // fig.tp
        state = 16 * sizes.split // n + 16 * (p - sizes.split) // dp
        return state, state + 8 * unit // fig.tp, (f"16·(P_split/N + P_rest/{dp}) + 8·P_unit/{fig.tp} = 16 × ({sizes.split:,}/{n} + "
                                                    f"{p - sizes.split:,}/{dp}) + 8 × {unit:,}/{fig.tp}")
    shards = n // fig.replicas
    state = 16 * p // shards
    return state, state + 8 * unit, f"16·P/{shards} + 8·P_unit = 16 × {p:,}/{shards} + 8 × {unit:,}"


def render_comparison(figures: list[RunFigures], world_size: int, sizes: ModelSizes) -> str:
    """The side-by-side table, ratios with their arithmetic, step times and timelines.

    Every run trains the same model (``sizes``). Each run's state is estimated at 16 B per
    parameter rank 0 keeps (all of them for DDP, a 1/N shard for FSDP, its stage for a pipeline),
    plus what a sharded run gathers while a unit runs (see :func:`state_theory`).
    """
    params = sizes.params
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
    lines.append("DATA per step (activations grow with it): "
                 + "; ".join(f"{fig.scenario} {fig.data}" for fig in figures if fig.data))
    lines.append(f"THEORY (from parameter counts, activations excluded): P = {params:,}, N = {world_size}, "
                 f"largest unit P_unit = {sizes.unit:,}")
    kinds = [fig.kind for fig in figures]
    if "ddp" in kinds and "fsdp" in kinds:
        _, state_text = theory_ratio(params, world_size)
        _, unit_text = theory_ratio(params, world_size, sizes.unit)
        lines.append(f"  state only, 16·P / (16·P/N) = N: {state_text}")
        lines.append(f"  with the gathered unit, 16·P / (16·P/N + 8·P_unit): {unit_text}")
    theories = [state_theory(fig, world_size, sizes) for fig in figures]
    for fig, (_, peak, formula) in zip(figures, theories):
        lines.append(f"  {fig.scenario}: {formula} = {peak:,} B on rank 0")
    lines.append("  (activations are not sharded by data, fully sharded or tensor parallelism, so they pull the "
                 "measured ratios down; a pipeline keeps several microbatches' activations per stage)")
    if all(fig.state for fig in figures):
        lines.append(f"MEASURED state after the step ({' + '.join(STATE)}), and its theory, per rank")
        for rank in sorted(figures[0].state):
            cells = [f"{fig.state[rank]:,} B ({state_theory(fig, world_size, sizes, rank)[0]:,})"
                     if rank in fig.state else "not seen" for fig in figures]
            lines.append(f"  r{rank:<4} " + "  ".join(f"{fig.scenario} {cell}" for fig, cell in zip(figures, cells)))
        if len(figures) == 2 and figures[1].state.get(0):
            lines.append(f"  rank 0 ratio {figures[0].state.get(0, 0) / figures[1].state[0]:.2f}")
    for fig in figures:
        step = f"{fig.step_ms:.1f} ms per step (timed phase, slowest rank)" if fig.step_ms else "step time not measured"
        lines.append(f"  {fig.scenario}: {step}; run {fig.status}")
    top = max(max(f.timeline, default=0) for f in figures)
    lines.append(f"TIMELINES (rank 0 live bytes at each Memory event, full height = {human_bytes(top)})")
    width = max(len(fig.scenario) for fig in figures)
    for fig in figures:
        lines.append(f"  {fig.scenario:>{width}} |{_sparkline(fig.timeline, top)}|")
    return "\n".join(lines)


def comparison_document(figures: list[RunFigures], world_size: int, sizes: ModelSizes) -> dict:
    """The comparison as a JSON-ready dict: per run, each rank's measured peak and state after the
    step beside its theory (:func:`state_theory`), the step time and the outcome."""
    runs = []
    for fig in figures:
        state, with_unit, formula = state_theory(fig, world_size, sizes)
        runs.append({
            "scenario": fig.scenario, "kind": fig.kind, "status": fig.status, "step_ms": fig.step_ms, "data": fig.data,
            "peak_live_bytes": fig.peaks, "state_bytes": fig.state,
            "state_theory_bytes": {rank: state_theory(fig, world_size, sizes, rank)[0] for rank in fig.state},
            "theory_rank0": {"state_bytes": state, "with_gathered_unit_bytes": with_unit, "formula": formula},
        })
    return {"format": "collviz-compare", "version": 1, "world_size": world_size,
            "model": {"params": sizes.params, "largest_unit": sizes.unit, "tensor_parallel_split": sizes.split,
                      "stage_params": list(sizes.stages)},
            "runs": runs}
