"""Running a plan on real ranks: each hop one ``batch_isend_irecv``, provenance travelling along.

Every message is two point-to-point sends with their own tags: the data, and an int64 mask per
element whose bit r says rank r's data is in it (collviz's observation, not counted as traffic),
on the data's device: NCCL sends CUDA tensors only.
A receiver adds (reduce) or copies the data and ORs or copies the mask, so after every hop each
rank's buffers say exactly which ranks' data they hold, as the ring scenario does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..collectives import present
from ..devices import rank_tensor
from .plans import Hop, Plan

__all__ = ["RankBuffers", "run_hop", "plan_buffers", "finish", "algorithm_caller", "COMBINE", "MAX_MASK_RANKS"]

COMBINE: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "sum": torch.add, "avg": torch.add, "max": torch.maximum, "min": torch.minimum, "product": torch.mul,
}
"""How a received value combines with the receiver's (avg sums; the caller divides at the end)."""

MAX_MASK_RANKS = 63
"""Ranks an int64 provenance mask can name."""


@dataclass
class RankBuffers:
    """One rank's named buffers for a plan and, when provenance is followed, each one's masks."""

    data: dict[str, torch.Tensor]
    masks: dict[str, torch.Tensor]

    @classmethod
    def traced(cls, data: dict[str, torch.Tensor], own: dict[str, tuple[int, int]], rank: int) -> RankBuffers:
        """``data`` with provenance masks (on each buffer's device: they travel in the same
        batches): ``own[name] = (start, length)`` holds this rank's data, everything else none yet."""
        masks = {name: rank_tensor(t.device, torch.int64, shape=t.numel()) for name, t in data.items()}
        buffers = cls(data, masks)
        for name, (start, length) in own.items():
            buffers.mark(name, start, length, rank)
        return buffers

    def mark(self, name: str, start: int, length: int, rank: int) -> None:
        """Elements ``start:start+length`` of ``name`` now hold ``rank``'s data."""
        self.masks[name][start:start + length] = 1 << rank


def plan_buffers(op: str, rank: int, n: int, count: int, root: int, inp: torch.Tensor | None,
                 out: torch.Tensor | None) -> tuple[dict[str, torch.Tensor], dict[str, tuple[int, int]]]:
    """The buffers a plan works in (see :mod:`.plans`), over this rank's library-style input and
    output, own data in place; and which range of each holds this rank's own data.

    In-place ops work in ``inp`` itself; reduce-scatter in a copy (its input must survive);
    outputs are written where the library would write them.
    """
    if op in ("all_reduce", "broadcast", "reduce"):
        own = {"x": (0, count)} if op != "broadcast" or rank == root else {}
        return {"x": present(inp, "input").reshape(-1)}, own
    if op == "reduce_scatter":
        return {"x": present(inp, "input").reshape(-1).clone()}, {"x": (0, count)}
    if op == "scatter":
        if inp is not None:
            source = inp.reshape(-1)
        else:
            like = present(out, "output")
            source = rank_tensor(like.device, like.dtype, shape=count)
        return {"in": source}, ({"in": (0, count)} if rank == root else {})
    flat_in = present(inp, "input").reshape(-1)
    if op == "all_to_all":
        chunk = count // n
        target = present(out, "output").reshape(-1)
        target[rank * chunk:(rank + 1) * chunk] = flat_in[rank * chunk:(rank + 1) * chunk]
        return {"in": flat_in, "out": target}, {"in": (0, count), "out": (rank * chunk, chunk)}
    target = out.reshape(-1) if out is not None else rank_tensor(flat_in.device, flat_in.dtype, shape=n * count)
    target[rank * count:(rank + 1) * count] = flat_in  # all_gather, gather (a non-root's is a tree's scratch)
    buffers = {"out": target} if op == "all_gather" else {"in": flat_in, "out": target}
    own = {"out": (rank * count, count)} if op == "all_gather" else {"in": (0, count), "out": (rank * count, count)}
    return buffers, own


def finish(op: str, rank: int, n: int, count: int, root: int, buffers: dict[str, torch.Tensor],
           out: torch.Tensor | None, reduce_op: str | None) -> torch.Tensor | None:
    """Put the result where the library leaves it and return it (None where a rank has none):
    the kept chunk into ``out`` for reduce-scatter and scatter, ÷ n for avg."""
    if op in ("reduce", "gather") and rank != root:
        return None
    if op in ("reduce_scatter", "scatter"):
        chunk = count // n
        result = present(out, "output").reshape(-1)
        result.copy_(buffers["x" if op == "reduce_scatter" else "in"][rank * chunk:(rank + 1) * chunk])
    else:
        result = buffers["x"] if op in ("all_reduce", "broadcast", "reduce") else buffers["out"]
    if reduce_op == "avg":
        result.div_(n)
    return result


def algorithm_caller(plan: Plan, rank: int, reduce_op: str | None,
                     group: dist.ProcessGroup | None = None) -> Callable[[torch.Tensor | None, torch.Tensor | None, str], None]:
    """A function running ``plan`` on (input, output) like the library's call (see
    :func:`~collviz.runtime.programs.collectives.collective_caller`), without provenance: what
    ``collviz bench --algo`` times."""

    def call(inp: torch.Tensor | None, out: torch.Tensor | None, _: str) -> None:
        data, _own = plan_buffers(plan.op, rank, plan.world_size, plan.count, plan.root, inp, out)
        buffers = RankBuffers(data, {})
        for hop in plan.hops:
            run_hop(hop, rank, buffers, reduce_op or "sum", group, provenance=False)
        finish(plan.op, rank, plan.world_size, plan.count, plan.root, data, out, reduce_op)

    return call


def run_hop(hop: Hop, rank: int, buffers: RankBuffers, reduce_op: str,
            group: dist.ProcessGroup | None = None, provenance: bool = True) -> list[tuple[int, str, int, int]]:
    """Exchange ``hop``'s messages that concern ``rank`` (all at once), then apply what arrived;
    with ``provenance`` each message's masks travel too.

    Sends read the buffers as they were when the hop began. Returns what arrived:
    (source rank, buffer, start, length) per message, in the plan's order.
    """
    operations: list[dist.P2POp] = []
    arrivals = []
    for number, message in enumerate(hop.messages):
        tag = 2 * number
        if message.src == rank:
            data = buffers.data[message.buffer][message.start:message.start + message.length].clone()
            operations.append(dist.P2POp(dist.isend, data, message.dst, group, tag))
            if provenance:
                sent_mask = buffers.masks[message.buffer][message.start:message.start + message.length].clone()
                operations.append(dist.P2POp(dist.isend, sent_mask, message.dst, group, tag + 1))
        if message.dst == rank:
            like = buffers.data[message.into]
            data = rank_tensor(like.device, like.dtype, shape=message.length)
            operations.append(dist.P2POp(dist.irecv, data, message.src, group, tag))
            mask: torch.Tensor | None = None
            if provenance:
                mask = rank_tensor(like.device, torch.int64, shape=message.length)
                operations.append(dist.P2POp(dist.irecv, mask, message.src, group, tag + 1))
            arrivals.append((message, data, mask))
    if operations:
        for request in dist.batch_isend_irecv(operations):
            request.wait()
    combine = COMBINE[reduce_op]
    for message, data, mask in arrivals:
        target = buffers.data[message.into][message.at:message.at + message.length]
        target.copy_(combine(target, data) if message.reduce else data)
        if mask is not None:
            masks = buffers.masks[message.into][message.at:message.at + message.length]
            if message.reduce:
                masks |= mask
            else:
                masks.copy_(mask)
    return [(m.src, m.into, m.at, m.length) for m, _, _ in arrivals]
