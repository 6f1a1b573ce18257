"""``fsdp``: one training step of the tiny GPT sharded with FSDP2 (``fully_shard`` per unit).

The units are the embeddings, every block and the head; the root wraps them (and holds no
parameters of its own). Each rank keeps 1/n of every parameter, gradient and optimizer state.
A unit's forward gathers its full parameters (all-gather), computes, and frees them again
(reshard); its backward gathers them again, computes gradients, and reduce-scatters the gradients
so each rank keeps the averaged shard it owns. The optimizer then steps on shards only.

Phases follow FSDP2's own steps: each unit's parameter group (``FSDPParamGroup``) has its
``pre_forward``, ``post_forward``, ``pre_backward`` and ``post_backward`` wrapped *on the instance*
so a phase opens exactly when FSDP2 starts that step; the collectives inside are seen by
:class:`~.observer.CollectiveObserver`. ``--no-prefetch`` (the default) turns FSDP2's implicit
backward prefetch off through the same wrapper; ``--prefetch`` adds explicit forward prefetch of
the next unit and keeps the backward one. The full model is built once from the seed outside the
memory accounting (real runs build it on the meta device); everything after is counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from ...compat import fsdp_average_by_sum
from ...context import RankContext
from ...errors import UsageError
from ...observation.metrics import human_bytes
from ...scenario_files.schema import Scenario
from ..program import RunOptions
from .common import PhaseSequence, TrainingProgram, dtensor, refuse_options, timed_steps
from .ddp import emit_parameters, train_step
from .fsdp_checks import (FollowedWeight, check_shards, gathered_buffer, own_gradient_buffer, reduced_gradient_buffer,
                          shard_buffer)
from .model import Block, Embed, Head, TinyGPT, make_gpt, token_batch
from .observer import CollectiveObserver

__all__ = ["FSDPProgram", "build", "units_of", "unit_key"]


def unit_key(name: str) -> str:
    """A unit's display name as a notes key: ``block 0`` → ``block0``."""
    return name.replace(" ", "")


def units_of(model: TinyGPT) -> list[tuple[str, nn.Module]]:
    """The FSDP units in forward order: (display name, module)."""
    return [("embed", model.embed), *((f"block {i}", b) for i, b in enumerate(model.blocks)), ("head", model.head)]


@dataclass(frozen=True)
class FSDPProgram(TrainingProgram):
    """One FSDP2 training step; the phase list follows from the number of units."""

    params: int
    prefetch: bool
    reshard_after_forward: bool
    replicas: int = 1
    """1: plain FSDP over every rank; r > 1: HSDP, a (replicate r × shard n/r) device mesh."""
    tp: int = 1
    """1: no tensor parallelism; t > 1: FSDP × TP, a (dp n/t × tp t) mesh, every block's MLP split
    over each group of t ranks (which share their batch) and FSDP across the groups."""

    def data_rank(self, rank: int) -> int:
        """Whose batch ``rank`` trains on: its own, or under TP its tensor-parallel group's."""
        return rank // self.tp

    @property
    def units(self) -> int:
        """Embeddings, every block, head."""
        return int(self.settings["blocks"]) + 2

    @property
    def phase_count(self) -> int:
        """setup, 3 forward phases per unit, loss, 3 backward phases per unit, optimizer, check, timed."""
        return 5 + 6 * self.units

    def narration_values(self, world_size: int) -> dict[str, object]:
        """Values for the narration placeholders."""
        shards = world_size // self.replicas // self.tp
        return {"world_size": world_size, "params": f"{self.params:,}", "param_bytes": human_bytes(4 * self.params),
                "shard_bytes": human_bytes(4 * self.params / shards), "blocks": self.settings["blocks"],
                "units": self.units, "prefetch": "on" if self.prefetch else "off",
                "reshard": "on" if self.reshard_after_forward else "off", "timed_steps": self.settings["timed_steps"],
                "replicas": self.replicas, "shards": shards, "tp": self.tp}

    def run_options(self) -> dict[str, str | int | float | bool]:
        """Settings plus the two FSDP switches, as recorded in RunStart."""
        return {**self.settings, "prefetch": self.prefetch, "reshard_after_forward": self.reshard_after_forward,
                "replicas": self.replicas, "tp": self.tp}

    def run(self, ctx: RankContext) -> None:
        """Run this rank's part of the step."""
        run_fsdp(ctx, self)


def build(scenario: Scenario, world_size: int, options: RunOptions) -> FSDPProgram:
    """The FSDP program; ``--prefetch`` and ``--reshard-after-forward`` default to off and on."""
    refuse_options(options, scenario.name, allowed=("prefetch", "reshard_after_forward"))
    model = make_gpt(dict(scenario.settings))
    seed = int(scenario.settings["seed"])
    params = sum(p.numel() for p in model.parameters())
    replicas, tp = (int(scenario.settings.get(key, 1)) for key in ("replicas", "tp"))
    for groups, what in ((replicas, "replica groups"), (tp, "tensor-parallel groups of that size")):
        if groups > 1 and (world_size % groups or world_size == groups):
            raise UsageError(f"{scenario.name}: {world_size} ranks do not split into {what} ({groups}) and "
                             f"leave 2 or more to shard over; use --gpus {2 * groups}, {4 * groups}, …")
    if tp > 1 and 4 * int(scenario.settings["d_model"]) % tp:
        raise UsageError(f"{scenario.name}: the MLP's hidden width {4 * int(scenario.settings['d_model'])} "
                         f"does not split over tp = {tp}")
    settings = {k: v for k, v in scenario.settings.items() if k not in ("replicas", "tp")}
    return FSDPProgram(
        world_size=world_size, settings=settings, params=params, replicas=replicas, tp=tp,
        prefetch=bool(options.prefetch), reshard_after_forward=options.reshard_after_forward is not False,
        source=f"tiny GPT, {params:,} parameters from torch.manual_seed({seed}); "
               f"rank r's tokens from generator seed {seed} + 1 + r",
    )


class _UnitPhases:
    """Wraps one unit's FSDPParamGroup so each of its steps opens the matching phase."""

    def __init__(self, ctx: RankContext, phases: PhaseSequence, name: str, module: nn.Module, prefetch: bool,
                 groups: _MeshGroups) -> None:
        self.ctx, self.phases, self.name, self.module, self.prefetch = ctx, phases, name, module, prefetch
        self.groups = groups
        self.unit = unit_key(name)
        """The unit's key in a teacher's notes (``block0``: notes for ``block0.forward_all_gather``)."""
        self.reduced = False
        self.followed = FollowedWeight.named(f"{name} {_followed_word(module)}")
        """The unit's weight the rank panels show at each of its calls."""
        if not isinstance(module, FSDPModule):
            raise TypeError(f"{name} is not sharded by fully_shard")
        state = module._get_fsdp_state()
        (group,) = getattr(state, "_fsdp_param_groups", None) or [state._fsdp_param_group]  # torch ≥ 2.10 / older
        self.group = group
        for method in ("pre_forward", "post_forward", "pre_backward", "post_backward"):
            setattr(group, method, getattr(self, method)(getattr(group, method)))

    def _gathered(self) -> None:
        """Count the unit's now unsharded parameters as gathered (communication) bytes."""
        self.ctx.tracker.retag([p for p in self.module.parameters() if p.numel()], "communication")

    def pre_forward(self, original: Callable) -> Callable:
        """all-gather phase, then compute phase."""
        def wrapper(*args: Any) -> Any:
            """FSDP2's step, inside its phase."""
            if self.phases.paused:
                return original(*args)
            self.phases.next("forward_all_gather", f"{self.name} forward: all-gather", category="communication",
                             unit=self.unit)
            shard_buffer(self.ctx, _followed_weight(self.module), self.followed)
            out = original(*args)
            self._gathered()
            gathered_buffer(self.ctx, _followed_weight(self.module), self.followed, self.groups.shard)
            self.phases.next("forward_compute", f"{self.name} forward: compute", category="activations",
                             unit=self.unit)
            return out
        return wrapper

    def post_forward(self, original: Callable) -> Callable:
        """reshard phase (it lasts until the next unit starts); the unit's gathered weight is
        shown as freed when the reshard really dropped the unsharded parameters."""
        def wrapper(*args: Any) -> Any:
            """FSDP2's step, inside its phase."""
            self.phases.next("forward_reshard", f"{self.name} forward: reshard", category="activations",
                             unit=self.unit)
            out = original(*args)
            if not self.phases.paused and not self.group.is_unsharded:
                weight = _followed_weight(self.module)
                self.ctx.freed(self.followed.gathered_name, weight.numel() * weight.element_size())
            return out
        return wrapper

    def pre_backward(self, original: Callable) -> Callable:
        """backward all-gather phase, then gradient phase (once per step; FSDP may call it again)."""
        def wrapper(default_prefetch: bool, *unused: Any) -> Any:
            """FSDP2's step, inside its phase (prefetch only when asked for)."""
            if self.group._training_state.name == "PRE_BACKWARD" or self.phases.paused:
                return original(default_prefetch and self.prefetch, *unused)
            self.phases.next("backward_all_gather", f"{self.name} backward: all-gather", category="communication",
                             unit=self.unit)
            out = original(default_prefetch and self.prefetch, *unused)
            self._gathered()
            gathered_buffer(self.ctx, _followed_weight(self.module), self.followed, self.groups.shard)
            self.phases.next("backward_gradient", f"{self.name} backward: gradients", category="grads",
                             unit=self.unit)
            return out
        return wrapper

    def post_backward(self, original: Callable) -> Callable:
        """reduce-scatter phase (first call only: the final callback may call it again)."""
        def wrapper(*unused: Any) -> Any:
            """FSDP2's step, inside its phase."""
            if not self.reduced and not self.phases.paused:
                self.reduced = True
                # still in the gradients phase: this rank's own, full gradient
                own_gradient_buffer(self.ctx, _followed_weight(self.module), self.followed)
                self.phases.next("backward_reduce_scatter", f"{self.name} backward: reduce-scatter",
                                 category="communication", unit=self.unit)
                out = original(*unused)
                grads = [p.grad for p in self.module.parameters() if p.grad is not None]
                self.ctx.tracker.retag(grads, "grads")  # the sharded gradients this rank now keeps
                reduced_gradient_buffer(self.ctx, _followed_weight(self.module), self.followed, self.groups.shard,
                                        self.groups.replicate)
                return out
            return original(*unused)
        return wrapper


_FOLLOWED: dict[type[nn.Module], tuple[str, Callable[[Any], torch.Tensor]]] = {
    Embed: ("tokens", lambda unit: unit.tokens.weight),
    Block: ("W_query", lambda unit: unit.attn.query.weight),
    Head: ("W_out", lambda unit: unit.out.weight),
}
"""Per kind of unit: the word naming the weight the panels follow, and how to reach it (FSDP2
swaps a unit's parameters between sharded and unsharded, so it is reached again at each use)."""


def _followed(unit: nn.Module) -> tuple[str, Callable[[Any], torch.Tensor]]:
    """``unit``'s row of :data:`_FOLLOWED` (``fully_shard`` makes ``FSDPBlock`` of a ``Block``)."""
    for kind, row in _FOLLOWED.items():
        if isinstance(unit, kind):
            return row
    raise TypeError(f"expected an FSDP unit of the tiny GPT, got {type(unit).__name__}")


def _followed_word(unit: nn.Module) -> str:
    """The word naming ``unit``'s followed weight (``W_query`` of a block)."""
    return _followed(unit)[0]


def _followed_weight(unit: nn.Module) -> torch.Tensor:
    """The weight of ``unit`` the panels follow: the token embedding, a block's W_query, the
    head's output projection."""
    return _followed(unit)[1](unit)


@dataclass(frozen=True)
class _MeshGroups:
    """The process groups a unit's gradients are reduced over: ``shard`` (the reduce-scatter's;
    None: every rank) and, under HSDP, ``replicate`` (the all-reduce across replica groups)."""

    shard: Any = None
    replicate: Any = None


def _shard(ctx: RankContext, program: FSDPProgram) -> tuple[TinyGPT, list[tuple[str, nn.Module]], _MeshGroups]:
    """Build the model (outside the accounting), shard every unit and the root; also the process
    groups each unit's gradients are reduced over."""
    with ctx.tracker.suspended():
        model = make_gpt(dict(program.settings))
    units = units_of(model)
    # Always an explicit mesh on the rank's own device type: FSDP2's default mesh is on the
    # machine's accelerator even when the process group is gloo on CPU (the loss then meets
    # CUDA logits with CPU targets on a GPU machine run with --backend gloo).
    mesh, groups = init_device_mesh(ctx.device.type, (ctx.world_size,)), _MeshGroups()
    if program.replicas > 1:  # HSDP: shard within each group of n/r ranks, replicate across the groups
        mesh = init_device_mesh(ctx.device.type, (program.replicas, ctx.world_size // program.replicas),
                                mesh_dim_names=("replicate", "shard"))
        groups = _MeshGroups(mesh.get_group("shard"), mesh.get_group("replicate"))
    elif program.tp > 1:  # FSDP × TP: each block's MLP split within a tp group, FSDP across the groups
        grid = init_device_mesh(ctx.device.type, (ctx.world_size // program.tp, program.tp), mesh_dim_names=("dp", "tp"))
        for block in model.blocks:
            parallelize_module(block, grid["tp"], {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
        mesh, groups = grid["dp"], _MeshGroups(grid.get_group("dp"))
    with ctx.tracker.category("params"):
        sharded = [fully_shard(module, mesh=mesh, reshard_after_forward=program.reshard_after_forward) for _, module in units]
        root = fully_shard(model, mesh=mesh, reshard_after_forward=program.reshard_after_forward)
    fsdp_average_by_sum([*sharded, root], groups.shard)  # a torch whose gloo sums for AVG: see compat
    ctx.tracker.track(model.parameters(), "params")
    if program.prefetch:
        for current, following in zip(sharded, sharded[1:]):
            current.set_modules_to_forward_prefetch([following])
    return model, units, groups


def _emit_full_parameters(ctx: RankContext, model: nn.Module) -> None:
    """Every parameter put back together (``full_tensor``, untracked: every rank takes part),
    shown by rank 0 as ``NAME (full)``."""
    for name, param in model.named_parameters():
        with ctx.tracker.suspended():
            whole = dtensor(param).full_tensor().detach()
        if ctx.rank == 0:
            ctx.buffer(f"{name} (full)", "param", "after", whole, None)


def run_fsdp(ctx: RankContext, program: FSDPProgram) -> None:
    """This rank's FSDP step: every phase, every event."""
    settings = dict(program.settings)
    phases = PhaseSequence(ctx)
    with CollectiveObserver(ctx):
        phases.next("setup", "setup: every unit sharded over the ranks", category="params", gated=False)
        model, units, groups = _shard(ctx, program)
        wrapped = [_UnitPhases(ctx, phases, name, module, program.prefetch, groups) for name, module in units]
        for unit in wrapped:  # every unit sharded: each rank holds its shard of every followed weight
            shard_buffer(ctx, _followed_weight(unit.module), unit.followed)
        with ctx.tracker.category("inputs"):
            inputs, targets = (t.to(ctx.device) for t in token_batch(settings, program.data_rank(ctx.rank)))
        optimizer = torch.optim.AdamW(model.parameters(), lr=float(settings["lr"]))
        logits = model(inputs)
        phases.next("loss", "loss on this rank's batch", category="activations")
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        ctx.buffer("loss", "loss", "result", loss.detach().reshape(1), None)
        loss.backward()
        del logits, loss
        phases.next("optimizer", "AdamW step on the shards", category="optimizer")
        optimizer.step()
        ctx.tracker.retag([p.grad for p in model.parameters() if p.grad is not None], "grads")
        emit_parameters(ctx, list(model.named_parameters()), "shard")
        if program.tp > 1:  # 2-D shards are hard to read: rank 0 also shows each parameter whole
            _emit_full_parameters(ctx, model)
        phases.next("check", "check: the shards partition every parameter")
        check_shards(ctx, model)
        timed_steps(ctx, phases, int(settings["timed_steps"]), lambda: train_step(model, optimizer, inputs, targets))
        phases.close()
