"""The eight collectives, run for real on the process group and observed on every rank.

A collective scenario has these phases on every rank: ``setup`` (inputs allocated), the collective
itself (output allocated, the timed call(s), the observed result and its provenance, the logical
transfers it implies), an optional ``followup`` computation on the result, and ``release``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..context import RankContext
from ..errors import UsageError
from ..observation.metrics import algo_bytes, human_bytes
from ..observation.tensors import PendingTags, TagPass, observe_provenance, uniform_provenance
from ..scenario_files.schema import COLLECTIVES, REDUCE_OPS, REDUCING, ROOTED, Followup, Scenario
from ..wire.protocol import Check, Collective, ProvenanceRun
from .devices import rank_tensor
from .patterns import exact_period, pattern
from .transfers import emit_logical_transfers

__all__ = [
    "CollectiveSpec", "resolve_spec", "run_collective_scenario", "OUTPUT_NAMES", "make_input", "allocate_input",
    "make_output", "present",
    "collective_caller", "collective_fields", "timed_ns", "timed_calls", "exact_matmul", "GATHERING", "buffers_per_rank",
]

WORLD_GROUP = "world"
IN_PLACE = {"broadcast", "reduce", "all_reduce"}
PARTITIONED_INPUT = {"scatter", "reduce_scatter", "all_to_all"}
GATHERING = frozenset({"gather", "all_gather"})
"""Collectives whose output on a rank is world size × its input."""
OUTPUT_NAMES = {
    "gather": "gathered",
    "all_gather": "gathered",
    "scatter": "shard",
    "reduce_scatter": "reduced_shard",
    "all_to_all": "received",
}
"""Name of the output buffer of each out-of-place collective (in-place ones reuse the input's)."""

_REDUCE_OPS = {
    "sum": dist.ReduceOp.SUM,
    "avg": dist.ReduceOp.AVG,
    "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN,
    "product": dist.ReduceOp.PRODUCT,
}
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


@dataclass(frozen=True)
class CollectiveSpec:
    """Everything a rank needs to run one collective scenario; identical on every rank."""

    op: str
    reduce_op: str | None
    dtype: str
    root: int
    buffer_name: str
    inputs: tuple | None
    count: int
    iters: int
    followup: Followup | None
    source: str
    period: int | None = None
    """Generated inputs cycle with this period to stay exact (None: no cycle, or worked-example inputs)."""
    names: tuple[str, ...] | None = None
    """The worked example's names of a rank's input elements, in order (None: unnamed)."""

    def output_labels(self, rank: int, world_size: int) -> list[str] | None:
        """The names of ``rank``'s output elements: the part it keeps of a split, the same names
        for an in-place op, each source's part for all-to-all (None when unnamed or gathered)."""
        names = self.names
        if names is None or self.op in GATHERING:
            return None
        if self.op in IN_PLACE:
            return list(names)
        part = len(names) // world_size
        if self.op == "all_to_all":
            return [names[rank * part + i] for _ in range(world_size) for i in range(part)]
        return list(names[rank * part:(rank + 1) * part])

    @property
    def display_name(self) -> str:
        """``all_reduce (avg)``, ``broadcast from rank 0``…"""
        if self.reduce_op:
            return f"{self.op} ({self.reduce_op})" + (f" to rank {self.root}" if self.op == "reduce" else "")
        if self.op in ("broadcast", "scatter"):
            return f"{self.op} from rank {self.root}"
        if self.op == "gather":
            return f"gather to rank {self.root}"
        return self.op

    @property
    def phase_count(self) -> int:
        """Phases every rank opens: setup, the collective, the optional followup, release."""
        return 3 + (self.followup is not None)

    def run_options(self) -> dict[str, str | int | float | bool]:
        """The resolved options, as recorded in RunStart."""
        return {"dtype": self.dtype, "count": self.count, "iters": self.iters,
                "reduce_op": self.reduce_op or "", "root": self.root}

    def run(self, ctx: RankContext) -> None:
        """Run this rank's part of the scenario (see :func:`run_collective_scenario`)."""
        run_collective_scenario(ctx, self)

    def narration_values(self, world_size: int) -> dict[str, object]:
        """Values for the scenario's narration placeholders."""
        itemsize = getattr(torch, self.dtype).itemsize
        return {
            "world_size": world_size,
            "op": self.reduce_op or "",
            "root": self.root,
            "dtype": self.dtype,
            "count": self.count,
            "bytes": human_bytes(self.count * itemsize),
        }


def resolve_spec(
    scenario: Scenario,
    world_size: int,
    *,
    reduce_op: str | None = None,
    dtype: str | None = None,
    size_bytes: int | None = None,
    root: int | None = None,
    iters: int = 1,
) -> CollectiveSpec:
    """Combine a scenario with command-line overrides; raise UsageError naming what is wrong.

    Inputs come from the scenario's worked example for ``world_size`` unless ``size_bytes`` is
    given or no example matches; then they are generated (see :mod:`.patterns`): element i of rank r
    is r·count + i + 1, or cycles with the period that keeps every value and result exact.
    """
    op = scenario.collective
    if op not in COLLECTIVES:
        raise UsageError(f"scenario {scenario.name} is not a single collective")
    example = None if size_bytes is not None else scenario.example_for(world_size)
    if reduce_op is not None and op not in REDUCING:
        raise UsageError(f"--op {reduce_op}: {op} has no reduce op (only {', '.join(sorted(REDUCING))} do)")
    if reduce_op is not None and reduce_op not in REDUCE_OPS:
        raise UsageError(f"--op {reduce_op}: not a reduce op; choose one of {', '.join(REDUCE_OPS)}")
    chosen_op = reduce_op or (example.reduce_op if example and example.reduce_op else None) or scenario.reduce_op
    chosen_dtype = dtype or scenario.dtype
    torch_dtype = getattr(torch, chosen_dtype)
    if chosen_op == "avg" and not torch_dtype.is_floating_point:
        raise UsageError(f"--op avg needs a floating-point dtype, not {chosen_dtype}; use --op sum or --dtype float32")
    chosen_root = scenario.root if root is None else root
    if op in ROOTED and not 0 <= chosen_root < world_size:
        raise UsageError(f"--root {chosen_root}: must be a rank between 0 and {world_size - 1}")
    if root is not None and op not in ROOTED:
        raise UsageError(f"--root: {op} has no root")
    if iters < 1:
        raise UsageError(f"--iters {iters}: must be at least 1")
    itemsize = torch_dtype.itemsize
    period = None
    if example is not None:
        inputs = example.inputs
        shapes = [_shape_of(x) for x in inputs if x != ()]
        count = _numel(shapes[0]) if shapes else 0
        source = example.source
    else:
        inputs = None
        if size_bytes is None:
            count = 2 * world_size
        else:
            if size_bytes <= 0 or size_bytes % itemsize:
                raise UsageError(f"--size {size_bytes} B: must be a positive multiple of the {chosen_dtype} element size ({itemsize} B)")
            count = size_bytes // itemsize
        period = exact_period(chosen_dtype, world_size, count, chosen_op if op in REDUCING else None)
        source = (f"generated: element i of rank r is r·{count} + i + 1" if period is None else
                  f"generated: element i of rank r is (i + r) mod {period} + 1, so every value "
                  f"and result stays an exact integer in {chosen_dtype}")
    if op in PARTITIONED_INPUT and count % world_size:
        raise UsageError(
            f"{op} splits each input into {world_size} equal chunks, but it has {count} elements; "
            f"use a --size that is a multiple of {world_size} × {itemsize} B"
        )
    return CollectiveSpec(
        op=op,
        reduce_op=chosen_op if op in REDUCING else None,
        dtype=chosen_dtype,
        root=chosen_root,
        buffer_name=scenario.buffer_name,
        inputs=inputs,
        count=count,
        iters=iters,
        followup=scenario.followup_for(example) if example is not None else None,
        source=source,
        period=period,
        names=example.names if example is not None else None,
    )


def _shape_of(nested: tuple) -> tuple[int, ...]:
    shape = []
    level: object = nested
    while isinstance(level, (tuple, list)):
        shape.append(len(level))
        level = level[0] if level else None
    return tuple(shape)


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for dim in shape:
        total *= dim
    return total


def _has_input(spec: CollectiveSpec, rank: int) -> bool:
    """Whether ``rank`` starts with data of its own (non-roots of broadcast/scatter do not)."""
    return spec.op not in ("broadcast", "scatter") or rank == spec.root


def present(tensor: torch.Tensor | None, what: str) -> torch.Tensor:
    """``tensor``, which the collective guarantees on this rank (a library-style call's input or
    output is None only where :func:`make_input` and :func:`make_output` say); a ValueError naming
    ``what`` if it is absent."""
    if tensor is None:
        raise ValueError(f"no {what} tensor on this rank")
    return tensor


def make_input(spec: CollectiveSpec, rank: int, world_size: int, device: torch.device) -> torch.Tensor | None:
    """This rank's input on ``device``: its worked-example values, or generated ones (see
    :mod:`.patterns`); zeros on a broadcast's non-roots, None on a scatter's."""
    dtype = getattr(torch, spec.dtype)
    if spec.op == "scatter" and rank != spec.root:
        return None
    if spec.inputs is not None:
        template = spec.inputs[spec.root] if not _has_input(spec, rank) else spec.inputs[rank]
        tensor = rank_tensor(device, dtype, values=template)
        return torch.zeros_like(tensor) if not _has_input(spec, rank) else tensor
    if not _has_input(spec, rank):
        return rank_tensor(device, dtype, shape=spec.count)
    return pattern(rank, spec.count, spec.period, device).to(dtype)


def allocate_input(ctx: RankContext, spec: CollectiveSpec) -> torch.Tensor | None:
    """:func:`make_input` for this rank, counted as "inputs" memory without the temporaries that
    generating its values takes (they are collviz's, not the scenario's)."""
    with ctx.tracker.suspended():
        inp = make_input(spec, ctx.rank, ctx.world_size, ctx.device)
    if inp is not None:
        ctx.tracker.track([inp], "inputs")
    return inp


def make_output(spec: CollectiveSpec, rank: int, world_size: int, device: torch.device) -> torch.Tensor | None:
    """The zero-filled output buffer of an out-of-place collective on ``rank``, on ``device``
    (None if it has none: an in-place op, a gather's non-root)."""
    n = world_size
    dtype = getattr(torch, spec.dtype)
    if spec.op in IN_PLACE or (spec.op == "gather" and rank != spec.root):
        return None
    if spec.op in GATHERING:
        return rank_tensor(device, dtype, shape=spec.count * n)
    if spec.op in ("scatter", "reduce_scatter"):
        return rank_tensor(device, dtype, shape=spec.count // n)
    return rank_tensor(device, dtype, shape=spec.count)  # all_to_all


def buffers_per_rank(op: str, world_size: int) -> int:
    """How many tensors of one rank's input size a run of ``op`` holds on a rank at once, counted
    for the plan's memory check: the input, the output (world size × the input when it gathers),
    the provenance tags' input and output, and the before/after snapshots."""
    return 4 + (world_size if op in GATHERING else 1)


def _output_shape(spec: CollectiveSpec, input_shape: list[int], world_size: int) -> list[int]:
    """How to display an output buffer: gathered rows stack, split rows divide."""
    if len(input_shape) >= 2 and spec.op in GATHERING:
        return [input_shape[0] * world_size, *input_shape[1:]]
    if len(input_shape) >= 2 and spec.op in ("scatter", "reduce_scatter") and input_shape[0] % world_size == 0:
        return [input_shape[0] // world_size, *input_shape[1:]]
    if len(input_shape) >= 2 and spec.op == "all_to_all":
        return list(input_shape)
    return [-1]


def collective_caller(spec: CollectiveSpec, rank: int, world_size: int) -> Callable[..., dist.Work | None]:
    """A function running this spec's collective on (input, output) with a given reduce op;
    ``async_op=True`` starts it and returns its ``Work`` instead (as ``torch.distributed`` does)."""
    op, root, n = spec.op, spec.root, world_size

    def call(inp: torch.Tensor | None, out: torch.Tensor | None, reduce_op: str,
             async_op: bool = False) -> dist.Work | None:
        red = _REDUCE_OPS[reduce_op]
        if op == "broadcast":
            return dist.broadcast(present(inp, "input"), src=root, async_op=async_op)
        if op == "reduce":
            return dist.reduce(present(inp, "input"), dst=root, op=red, async_op=async_op)
        if op == "all_reduce":
            return dist.all_reduce(present(inp, "input"), op=red, async_op=async_op)
        if op == "gather":
            return dist.gather(present(inp, "input").reshape(-1),
                               gather_list=list(present(out, "output").chunk(n)) if rank == root else None, dst=root,
                               async_op=async_op)
        if op == "all_gather":
            return _all_gather_single(present(out, "output"), present(inp, "input").reshape(-1), async_op=async_op)
        if op == "scatter":
            return dist.scatter(present(out, "output"),
                                scatter_list=list(present(inp, "input").reshape(-1).chunk(n)) if rank == root else None,
                                src=root, async_op=async_op)
        if op == "reduce_scatter":
            return _reduce_scatter_single(present(out, "output"), present(inp, "input").reshape(-1), op=red,
                                          async_op=async_op)
        if op == "all_to_all":
            return dist.all_to_all_single(present(out, "output"), present(inp, "input").reshape(-1), async_op=async_op)
        raise ValueError(f"unknown collective {op!r}")

    return call


def timed_ns(call: Callable[..., object], device: torch.device, args: tuple) -> int:
    """Wall time of ``call(*args)`` in ns; on CUDA, with the device drained before and after."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter_ns()
    call(*args)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter_ns() - start


def collective_fields(ctx: RankContext, spec: CollectiveSpec, inp: torch.Tensor | None,
                      out: torch.Tensor | None) -> dict:
    """The fields of the Collective events of ``spec``'s next call on this rank (numbers it)."""
    n = ctx.world_size
    itemsize = getattr(torch, spec.dtype).itemsize
    bytes_in = 0 if inp is None else inp.numel() * itemsize
    bytes_out = bytes_in if spec.op in IN_PLACE else (0 if out is None else out.numel() * itemsize)
    root_in = spec.count * itemsize
    root_out = (spec.count // n if spec.op in ("scatter", "reduce_scatter") else spec.count * n) * itemsize
    return dict(
        phase=ctx.phase_index, op=spec.op, group=WORLD_GROUP, group_ranks=list(range(n)),
        group_seq=ctx.next_group_seq(WORLD_GROUP), dtype=spec.dtype, count=0 if inp is None else inp.numel(),
        bytes_in=bytes_in, bytes_out=bytes_out,
        algo_bytes=algo_bytes(spec.op, n, root_in, root_out if spec.op != "all_to_all" else root_in),
        root=spec.root if spec.op in ROOTED else None, reduce_op=spec.reduce_op,
    )


def timed_calls(ctx: RankContext, spec: CollectiveSpec, call, inp: torch.Tensor | None, out: torch.Tensor | None,
                pristine: torch.Tensor | None, extra: dict | None = None) -> None:
    """Number the next collective, run it ``spec.iters`` times timed, then emit every call's
    Collective events with their real timestamps (``pristine`` restores in-place inputs; ``extra``
    adds fields, e.g. an algorithm's hops and traffic)."""
    common = {**collective_fields(ctx, spec, inp, out), **(extra or {})}
    timings = _timed_loop(ctx, spec, call, inp, out, pristine, common)
    for iteration, (started_ns, elapsed) in enumerate(timings):
        if iteration:
            ctx.emitter.emit(Collective, t_ns=started_ns, edge="begin", iteration=iteration, **common)
        ctx.emitter.emit(Collective, t_ns=started_ns + elapsed, edge="end", iteration=iteration,
                         duration_ns=elapsed, clock="host", **common)


def _timed_loop(ctx: RankContext, spec: CollectiveSpec, call, inp, out, pristine, common: dict) -> list[tuple[int, int]]:
    """Run the collective ``spec.iters`` times; return (start t_ns, duration ns) of each call.

    Only the first call's begin is emitted (and flushed) beforehand — it says this rank entered
    the collective; every other event waits until the loop is over, so nothing is encoded or sent
    while calls are being timed. Ranks meet at a barrier before each call.
    """
    ctx.emitter.emit(Collective, edge="begin", iteration=0, **common)
    ctx.emitter.flush()
    timings = []
    with ctx.tracker.suspended():
        for iteration in range(spec.iters):
            if pristine is not None and iteration:
                inp.copy_(pristine)
            dist.barrier()
            started = time.monotonic_ns()
            timings.append((started, timed_ns(call, device=ctx.device, args=(inp, out, spec.reduce_op or "sum"))))
    return timings


def _observe_provenance(
    ctx: RankContext, spec: CollectiveSpec, call, inp: torch.Tensor | None, out: torch.Tensor | None
) -> list[ProvenanceRun] | None:
    """Run the same collective over rank tags and return the provenance of the received buffer
    (the passes a large world needs are started back to back, then waited on)."""
    def received(tag_pass: TagPass) -> PendingTags:
        tag_in = None if inp is None else tag_pass.tags(inp, ctx.rank, placeholder=not _has_input(spec, ctx.rank))
        tag_out = None if out is None else tag_pass.tags(out, ctx.rank, placeholder=True)
        work = call(tag_in, tag_out, "sum", async_op=True)
        return PendingTags(tag_in if spec.op in IN_PLACE else tag_out, work)

    return observe_provenance(getattr(torch, spec.dtype), ctx.world_size, received)


def run_collective_scenario(ctx: RankContext, spec: CollectiveSpec) -> None:
    """Run ``spec`` on this rank: every phase, every event."""
    rank, n = ctx.rank, ctx.world_size
    itemsize = getattr(torch, spec.dtype).itemsize
    call = collective_caller(spec, rank, n)
    with ctx.phase("setup", "setup", gated=False):
        inp = allocate_input(ctx, spec)
        if inp is not None:
            own = uniform_provenance(inp.numel(), [rank] if _has_input(spec, rank) else [])
            ctx.buffer(spec.buffer_name, "inout" if spec.op in IN_PLACE else "input", "before", inp, own,
                       labels=list(spec.names) if spec.names and _has_input(spec, rank) else None)
        ctx.memory("inputs allocated")

    input_shape = list(inp.shape) if inp is not None else [spec.count]
    out_name = OUTPUT_NAMES.get(spec.op, spec.buffer_name)
    with ctx.phase("collective", spec.display_name):
        with ctx.tracker.category("communication"):
            out = make_output(spec, rank, n, ctx.device)
        out_shape = _output_shape(spec, input_shape, n)
        if out is not None:
            ctx.buffer(out_name, "output", "before", out, uniform_provenance(out.numel(), []), shape=out_shape)
        ctx.memory("output allocated")
        pristine = None
        if spec.iters > 1 and spec.op in IN_PLACE:
            with ctx.tracker.category("timing copy"):
                pristine = present(inp, "input").clone()
        timed_calls(ctx, spec, call, inp, out, pristine)
        del pristine
        with ctx.tracker.suspended():
            provenance = _observe_provenance(ctx, spec, call, inp, out)
        received = inp if spec.op in IN_PLACE else out
        if received is not None:
            ctx.buffer(out_name, "inout" if spec.op in IN_PLACE else "output", "after", received, provenance,
                       shape=None if spec.op in IN_PLACE else out_shape, labels=spec.output_labels(rank, n))
            if provenance is not None:
                emit_logical_transfers(ctx, out_name, provenance, itemsize)
        ctx.memory(f"after {spec.op}")

    if spec.followup is not None:
        with ctx.phase("followup", f"followup: {spec.followup.name} on rank {spec.followup.rank}"):
            if rank == spec.followup.rank:
                _run_followup(ctx, spec.followup, spec.dtype, present(out, "output"), out_shape)
            ctx.memory("followup done")

    del received
    with ctx.phase("release", "release"):
        if out is not None:
            freed = out.numel() * out.element_size()
            del out
            ctx.freed(out_name, freed)
            ctx.memory(f"{out_name} freed")
        if inp is not None:
            ctx.freed(spec.buffer_name, inp.numel() * inp.element_size())
        del inp
        ctx.memory(f"{spec.buffer_name} freed")


def _run_followup(ctx: RankContext, followup: Followup, dtype_name: str, gathered: torch.Tensor,
                  gathered_shape: list[int]) -> None:
    """Compute ``gathered @ rightᵀ`` on this rank, for real, and show both operands' result."""
    dtype = getattr(torch, dtype_name)
    with ctx.tracker.category("activations"):
        right = rank_tensor(ctx.device, dtype, values=followup.right)
        result = exact_matmul(gathered.reshape(gathered_shape), right.T)
    ctx.buffer(followup.right_name, "input", "before", right, uniform_provenance(right.numel(), [ctx.rank]))
    ctx.buffer(followup.name, "result", "result", result, uniform_provenance(result.numel(), [ctx.rank]))
    if followup.note_result is not None:
        _compare_with_note(ctx, followup, result)


def exact_matmul(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """``left @ right``; integer tensors multiply in float64 and come back as their dtype, since
    CUDA has no integer matrix product (exact while every partial sum stays below 2**53, as the
    worked examples' small numbers do)."""
    if left.dtype.is_floating_point or left.dtype.is_complex:
        return left @ right
    return (left.double() @ right.double()).round().to(left.dtype)


def _compare_with_note(ctx: RankContext, followup: Followup, result: torch.Tensor) -> None:
    """Show the result as the teaching text prints it (the shipped scenarios: their own lesson's
    worked numbers), and say whether torch's agrees with it.

    The text prints two decimals, so agreement means within half a unit of the last digit printed.
    A disagreement reads as teaching, "a common slip: …" naming where the text and torch part, never
    as a failed run.
    """
    with ctx.tracker.suspended():
        printed = torch.tensor(followup.note_result, dtype=torch.float64)
        computed = result.detach().double().cpu()
        same_shape = printed.shape == computed.shape
        wrong = (printed - computed).abs() > 0.0051 if same_shape else torch.ones(1, dtype=torch.bool)
    ctx.buffer(f"{followup.name} as {followup.note_source} prints them", "note", "result", printed, None)
    if not same_shape:
        detail = f"the note's {list(printed.shape)} does not match torch's {list(computed.shape)}"
    elif wrong.any():
        first = tuple(int(i) for i in torch.nonzero(wrong)[0])
        detail = (f"a common slip: {followup.note_source} prints {printed[first].item():g} for {followup.name}"
                  f"{list(first)}, torch computed {computed[first].item():.4g} ({int(wrong.sum())} of {wrong.numel()} "
                  "numbers differ)")
    else:
        detail = f"all {printed.numel()} numbers agree with torch's to the two decimals {followup.note_source} prints"
    ctx.emitter.emit(Check, phase=ctx.phase_index, name=f"{followup.note_source}'s {followup.name}",
                     ok=not wrong.any(), detail=detail)
