"""``collviz all-reduce --algo ring`` (and every collective's ``--algo``): the algorithm, hop by hop.

Phases: setup (the inputs, and the buffers the algorithm works in), one phase per hop (each a
real ``batch_isend_irecv`` round: p2p Transfers with their hop number and bytes, every buffer it
touched with its provenance), then a check: the result against the library's own call on the same
inputs, with the traffic this rank counted and the bus factor it implies beside nccl-tests'.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...context import RankContext
from ...errors import UsageError
from ...observation.metrics import algo_bytes, bus_factor_text, human_bytes
from ...observation.tensors import provenance_from_tags
from ...wire.protocol import Check, Transfer
from ..collectives import OUTPUT_NAMES, CollectiveSpec, allocate_input, collective_caller, make_input, make_output, present
from .execute import MAX_MASK_RANKS, RankBuffers, finish, plan_buffers, run_hop
from .plans import Plan, plan

__all__ = ["AlgorithmProgram", "build_algorithm"]


@dataclass(frozen=True)
class AlgorithmProgram:
    """A collective scenario run by a hop-by-hop algorithm (a ScenarioProgram)."""

    spec: CollectiveSpec
    plan: Plan

    @property
    def phase_count(self) -> int:
        """setup, one phase per hop, check."""
        return 2 + len(self.plan.hops)

    @property
    def source(self) -> str:
        """The inputs' source, as for the library call."""
        return self.spec.source

    def narration_values(self, world_size: int) -> dict[str, object]:
        """The collective's own placeholders."""
        return self.spec.narration_values(world_size)

    def run_options(self) -> dict[str, str | int | float | bool]:
        """The collective's options and the algorithm."""
        return {**self.spec.run_options(), "algo": self.plan.algo}

    def run(self, ctx: RankContext) -> None:
        """This rank's part: every hop, every event."""
        run_algorithm(ctx, self.spec, self.plan)


def build_algorithm(spec: CollectiveSpec, algo: str, world_size: int) -> AlgorithmProgram:
    """The program running ``spec`` with ``algo``; UsageError when they do not fit."""
    if world_size > MAX_MASK_RANKS:
        raise UsageError(f"--algo {algo}: hop-by-hop algorithms follow each element's ranks in a 64-bit mask, "
                         f"so they run on at most {MAX_MASK_RANKS} ranks")
    if spec.iters != 1:
        raise UsageError(f"--algo {algo} runs the collective once, hop by hop; --iters does not apply "
                         f"(time algorithms with collviz bench --algo)")
    return AlgorithmProgram(spec, plan(spec.op, algo, world_size, spec.count, spec.root))


def _names(spec: CollectiveSpec) -> dict[str, str]:
    """How the plan's buffers are shown: the scenario's buffer name and the op's output name."""
    output = OUTPUT_NAMES.get(spec.op, spec.buffer_name)
    return {"x": spec.buffer_name, "in": spec.buffer_name, "out": output}


def _working_buffers(spec: CollectiveSpec, rank: int, n: int, inp: torch.Tensor | None,
                     device: torch.device) -> tuple[RankBuffers, torch.Tensor | None]:
    """The buffers ``plan`` works in on ``rank`` (over a copy of the input), provenance marked,
    and the library-style output the result goes to, on ``device``."""
    out = make_output(spec, rank, n, device)
    data, own = plan_buffers(spec.op, rank, n, spec.count, spec.root, None if inp is None else inp.clone(), out)
    return RankBuffers.traced(data, own, rank), out


def _show(ctx: RankContext, spec: CollectiveSpec, buffers: RankBuffers, moment: str, only: set[str] | None = None) -> None:
    names = _names(spec)
    for key, tensor in buffers.data.items():
        if tensor.numel() and (only is None or key in only):
            ctx.buffer(names[key], "algorithm", moment, tensor, provenance_from_tags(buffers.masks[key]))


def _library_result(spec: CollectiveSpec, rank: int, n: int, device: torch.device) -> torch.Tensor | None:
    """The library's own call on the same inputs (untracked), as :func:`_result` reads it."""
    inp = make_input(spec, rank, n, device)
    out = make_output(spec, rank, n, device)
    collective_caller(spec, rank, n)(inp, out, spec.reduce_op or "sum")
    if spec.op in ("all_reduce", "broadcast", "reduce"):
        return present(inp, "input").reshape(-1) if spec.op != "reduce" or rank == spec.root else None
    return None if out is None else out.reshape(-1)


def _traffic_text(spec: CollectiveSpec, plan: Plan, rank: int, n: int) -> str:
    """Hops, what this rank sent, and the bus factor the counted traffic implies beside nccl-tests'."""
    itemsize = getattr(torch, spec.dtype).itemsize
    root_in = spec.count * itemsize
    root_out = (spec.count // n if spec.op in ("scatter", "reduce_scatter") else spec.count * n) * itemsize
    size = algo_bytes(spec.op, n, root_in, root_out if spec.op != "all_to_all" else root_in)
    sent = plan.sent(rank) * itemsize
    return (f"{len(plan.hops)} hops; rank {rank} sent {human_bytes(sent)} = {sent / size:.3g} × S "
            f"(S = {human_bytes(size)}); nccl-tests bus factor {bus_factor_text(spec.op, n)}")


def run_algorithm(ctx: RankContext, spec: CollectiveSpec, plan: Plan) -> None:
    """Run ``plan`` on this rank: setup, each hop, the check against the library."""
    rank, n = ctx.rank, ctx.world_size
    itemsize = getattr(torch, spec.dtype).itemsize
    with ctx.phase("setup", f"setup: {spec.op} by {plan.algo}, {len(plan.hops)} hops", gated=False):
        inp = allocate_input(ctx, spec)
        with ctx.tracker.category("communication"):
            buffers, out = _working_buffers(spec, rank, n, inp, ctx.device)
        _show(ctx, spec, buffers, "before")
        ctx.memory("buffers allocated")
    for number, hop in enumerate(plan.hops):
        senders = sorted({m.src for m in hop.messages})
        elements = sum(m.length for m in hop.messages)
        narration = (f"{plan.algo} {spec.op}: {plan.description} Hop {number + 1} of {len(plan.hops)}: "
                     f"{len(hop.messages)} real point-to-point sends from {len(senders)} ranks, {elements} elements "
                     f"in all; each element's colour says whose data it now holds.")
        with ctx.phase("collective", f"hop {number + 1}/{len(plan.hops)} of {plan.algo}: "
                                     f"{len(hop.messages)} messages from {len(senders)} ranks", narration):
            with ctx.tracker.category("communication"):
                arrived = run_hop(hop, rank, buffers, spec.reduce_op or "sum")
            for src, into, start, length in arrived:
                ctx.emitter.emit(Transfer, phase=ctx.phase_index, src=src, dst=rank, bytes=length * itemsize,
                                 buffer=_names(spec)[into], start=start, length=length, kind="p2p", hop=number + 1)
            _show(ctx, spec, buffers, "after", {into for _, into, _, _ in arrived})
            ctx.memory(f"after hop {number + 1}")
    check = (f"The same inputs through the library's own {spec.op}: the algorithm's result must match it, "
             f"bit for bit where the reduction order is the same. The check also gives the traffic this rank "
             f"counted, as a multiple of S, beside the nccl-tests bus factor it explains.")
    with ctx.phase("release", f"check: the library's {spec.op} on the same inputs", check):
        result = finish(spec.op, rank, n, spec.count, spec.root, buffers.data, out, spec.reduce_op)
        with ctx.tracker.suspended():
            expected = _library_result(spec, rank, n, ctx.device)
        ctx.emitter.emit(Check, phase=ctx.phase_index, name=f"{plan.algo} gives the library's {spec.op}",
                         **_compare(result, expected, _traffic_text(spec, plan, rank, n)))
        ctx.memory("checked")


def _compare(result: torch.Tensor | None, expected: torch.Tensor | None, traffic: str) -> dict:
    """Check fields: bit-identical, or within rtol 1e-5 (reduction order), or different."""
    if result is None or expected is None:
        return {"ok": result is None and expected is None, "detail": f"no result on this rank, as with the library; {traffic}"}
    result, expected = result.reshape(-1).cpu(), expected.reshape(-1).cpu()
    if torch.equal(result, expected):
        return {"ok": True, "detail": f"bit-identical; {traffic}"}
    if result.dtype.is_floating_point and torch.allclose(result.double(), expected.double(), rtol=1e-5, atol=1e-6):
        worst = float((result.double() - expected.double()).abs().max())
        return {"ok": True, "detail": f"within rtol 1e-5 (another reduction order), at most {worst:.3g} apart; {traffic}"}
    wrong = int((result != expected).sum())
    return {"ok": False, "detail": f"{wrong} of {result.numel()} elements differ from the library's; {traffic}"}
