"""Observation helpers of the FSDP scenario: each unit's followed weight (its shard, gathered with its
provenance, its gradients before and after the reduce-scatter), shard checks."""

from __future__ import annotations

import math

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from ...context import RankContext
from ...observation.tensors import TagPass, observe_provenance, uniform_provenance
from ...wire.protocol import Check, ProvenanceRun
from ..devices import rank_tensor
from .common import dtensor

__all__ = ["FollowedWeight", "shard_buffer", "gathered_buffer", "own_gradient_buffer", "reduced_gradient_buffer",
           "check_shards"]


@dataclass(frozen=True)
class FollowedWeight:
    """The one weight of an FSDP unit the rank panels follow through its calls, and the names its
    buffers are shown under (:meth:`named`): ``label`` is ``embed tokens``, ``block 0 W_query``,
    ``head W_out``."""

    label: str
    shard_name: str
    """This rank's shard, as FSDP keeps it between the unit's calls."""
    gathered_name: str
    """The unsharded weight while FSDP holds it (after an all-gather)."""
    own_gradient_name: str
    """This rank's own full gradient, before the reduce-scatter."""
    reduced_gradient_name: str
    """The averaged gradient shard this rank keeps after the reduce-scatter."""

    @classmethod
    def named(cls, label: str) -> FollowedWeight:
        """The weight shown as ``label`` and its buffers' names."""
        return cls(label, f"{label} shard", f"{label} (gathered)", f"{label} grad (this rank's)",
                   f"{label} grad shard (averaged)")


def shard_buffer(ctx: RankContext, param: torch.Tensor, followed: FollowedWeight) -> None:
    """Emit this rank's shard of the sharded ``param`` (a copy, untracked): the data it holds alone."""
    with ctx.tracker.suspended():  # a copy, as in emit_parameters
        shard = dtensor(param).to_local().detach().clone()
    ctx.buffer(followed.shard_name, "shard", "before", shard, uniform_provenance(shard.numel(), [ctx.rank]))


def gathered_buffer(ctx: RankContext, param: torch.Tensor, followed: FollowedWeight,
                    group: dist.ProcessGroup | None = None) -> None:
    """Emit the unsharded ``param`` FSDP just gathered, with provenance observed by all-gathering
    rank tags of its shard's shape over ``group``, the ranks that shard it (default: all; under
    HSDP this rank's replica group), untracked: not part of the scenario's traffic."""
    group = group or dist.group.WORLD
    members = dist.get_process_group_ranks(group)
    me = members.index(ctx.rank)
    with ctx.tracker.suspended():
        rows = param.shape[0]
        like = torch.empty(-(-rows // len(members)), *param.shape[1:], dtype=param.dtype, device=param.device)

        def received(tag_pass: TagPass) -> torch.Tensor:
            mine = tag_pass.tags(like, me).reshape(-1)
            everyone = rank_tensor(param.device, tag_pass.tag_type, shape=len(members) * mine.numel())
            dist.all_gather_into_tensor(everyone, mine, group=group)
            return everyone[: param.numel()]

        runs = observe_provenance(param.dtype, len(members), received)
        provenance = None if runs is None else [
            ProvenanceRun(run.start, run.length, [members[r] for r in run.ranks]) for run in runs]
        # a copy: summarising calls .numpy(), which makes a storage non-resizable, and FSDP resizes
        # this one to 0 when it reshards
        snapshot = param.detach().clone()
    ctx.buffer(followed.gathered_name, "gathered", "after", snapshot, provenance)


def own_gradient_buffer(ctx: RankContext, param: torch.Tensor, followed: FollowedWeight) -> None:
    """Emit this rank's own full gradient of the unsharded ``param`` (computed from its batch
    alone), before FSDP reduce-scatters it."""
    if param.grad is None:
        return
    with ctx.tracker.suspended():
        grad = param.grad.detach()
        snapshot = (grad.full_tensor() if hasattr(grad, "full_tensor") else grad).clone()
    ctx.buffer(followed.own_gradient_name, "grad", "before", snapshot, uniform_provenance(snapshot.numel(), [ctx.rank]))


def reduced_gradient_buffer(ctx: RankContext, param: torch.Tensor, followed: FollowedWeight,
                            shard_group: dist.ProcessGroup | None, replicate_group: dist.ProcessGroup | None) -> None:
    """Emit the averaged gradient shard of ``param`` this rank keeps after FSDP's reduce-scatter
    over ``shard_group`` (and, under HSDP, the all-reduce over ``replicate_group``), with its
    provenance observed by running the same reduction over rank tags (untracked)."""
    if param.grad is None:
        return
    shard_group = shard_group or dist.group.WORLD
    members = dist.get_process_group_ranks(shard_group)
    with ctx.tracker.suspended():
        local = param.grad.to_local() if hasattr(param.grad, "to_local") else param.grad
        rows = -(-param.shape[0] // len(members))
        whole = torch.empty(rows * len(members), *param.shape[1:], dtype=param.dtype, device=local.device)

        def received(tag_pass: TagPass) -> torch.Tensor:
            tags = tag_pass.tags(whole, ctx.rank).reshape(-1)  # tags by global rank: no translation needed
            kept = rank_tensor(local.device, tag_pass.tag_type, shape=tags.numel() // len(members))
            dist.reduce_scatter_tensor(kept, tags, group=shard_group)
            if replicate_group is not None:
                dist.all_reduce(kept, group=replicate_group)
            return kept[: local.numel()]

        runs = observe_provenance(param.dtype, ctx.world_size, received)
        snapshot = local.detach().clone()
    ctx.buffer(followed.reduced_gradient_name, "grad", "after", snapshot, runs)


def check_shards(ctx: RankContext, model: nn.Module) -> bool:
    """Check: for every parameter, the shards held by the ranks of its device mesh add up to the
    full parameter, counting each replicated copy once (HSDP's replica groups, a bias TP keeps
    whole on every rank of a pair)."""
    with ctx.tracker.suspended():
        params = [dtensor(p) for p in model.parameters()]
        mine = rank_tensor(ctx.device, torch.int64, values=[p.to_local().numel() for p in params])
        everyone = rank_tensor(ctx.device, torch.int64, shape=ctx.world_size * len(params))
        dist.all_gather_into_tensor(everyone, mine)
        local = everyone.view(ctx.world_size, -1).tolist()
        holders = [p.device_mesh.mesh.flatten().tolist() for p in params]
        copies = [math.prod(p.device_mesh.size(d) for d, place in enumerate(p.placements) if place.is_replicate())
                  for p in params]  # mesh dimensions that hold copies rather than shards
        totals = [sum(local[r][i] for r in ranks) // copies[i] for i, ranks in enumerate(holders)]
    wrong = [i for i, p in enumerate(params) if totals[i] != p.numel()]
    sizes = sorted({len(ranks) // copies[i] for i, ranks in enumerate(holders)})
    detail = (f"{len(params)} parameters, {sum(totals):,} elements in {' or '.join(map(str, sizes))} shards each"
              if not wrong
              else f"{len(wrong)} parameters whose shards do not add up, first: {totals[wrong[0]]} ≠ {params[wrong[0]].numel()}")
    ctx.emitter.emit(Check, phase=ctx.phase_index, name="shards add up to every full parameter", ok=not wrong, detail=detail)
    return not wrong
