"""``tp``: a two-layer MLP split across ranks by torch's tensor parallelism.

``parallelize_module`` on a 1-D device mesh makes fc1 column-parallel (rank r holds rows
[r·h/n, (r+1)·h/n) of W1: its slice of the hidden units) and fc2 row-parallel (rank r holds the
matching columns of W2). Every rank gets the same input; fc1 and the GELU run on the local slice
with no communication; fc2 produces a *partial* output on every rank, and DTensor's all-reduce
(a functional collective, observed in the dispatcher) sums them. The output is checked against the
unsharded MLP, computed on every rank from the same seed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
# Imported by the launcher, once, before it forks: torch's DTensor code imports torch._dynamo (200-300
# modules) on first use, which every worker would otherwise pay after the fork, a second of CPU each.
import torch._dynamo  # noqa: F401
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from ...context import RankContext
from ...errors import UsageError
from ...observation.tensors import uniform_provenance
from ...scenario_files.schema import Scenario
from ...wire.protocol import ProvenanceRun
from ..program import RunOptions
from .common import PhaseSequence, TrainingProgram, check_close, dtensor, refuse_options
from .model import MLP
from .observer import CollectiveObserver

__all__ = ["TPProgram", "build", "tp_input"]


def tp_input(seed: int, batch: int, d_model: int) -> torch.Tensor:
    """The input every rank feeds the MLP: ``randn(batch, d_model)`` from generator ``seed + 1``."""
    return torch.randn(batch, d_model, generator=torch.Generator().manual_seed(seed + 1))


@dataclass(frozen=True)
class TPProgram(TrainingProgram):
    """The tensor-parallel MLP forward on ``world_size`` ranks."""

    @property
    def phase_count(self) -> int:
        """setup, fc1, activation, fc2, all-reduce, check."""
        return 6

    def narration_values(self, world_size: int) -> dict[str, object]:
        """Values for the narration placeholders."""
        hidden = int(self.settings["hidden"])
        return {"world_size": world_size, "d_model": self.settings["d_model"], "hidden": hidden,
                "shard": hidden // world_size, "batch": self.settings["batch"]}

    def run(self, ctx: RankContext) -> None:
        """Run this rank's part: every phase, every event."""
        run_tp(ctx, self)


def build(scenario: Scenario, world_size: int, options: RunOptions) -> TPProgram:
    """The TP program; the hidden width must split evenly over the ranks."""
    refuse_options(options, scenario.name)
    hidden = int(scenario.settings["hidden"])
    if hidden % world_size:
        raise UsageError(f"{scenario.name}: hidden = {hidden} does not split over {world_size} ranks; "
                         f"use --gpus that divides {hidden}")
    seed = int(scenario.settings["seed"])
    return TPProgram(world_size=world_size, settings=scenario.settings,
                     source=f"MLP weights from torch.manual_seed({seed}); input randn from generator seed {seed + 1}")


def run_tp(ctx: RankContext, program: TPProgram) -> None:
    """This rank's part of the tensor-parallel forward."""
    settings, rank = program.settings, ctx.rank
    phases = PhaseSequence(ctx)
    phases.next("setup", "setup: shard W1 by rows, W2 by columns", category="params", gated=False)
    torch.manual_seed(int(settings["seed"]))
    mlp = MLP(int(settings["d_model"]), int(settings["hidden"])).to(ctx.device)
    with ctx.tracker.suspended():
        reference = copy.deepcopy(mlp)
    x = tp_input(int(settings["seed"]), int(settings["batch"]), int(settings["d_model"])).to(ctx.device)
    mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
    parallelize_module(mlp, mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    own = lambda t: uniform_provenance(t.numel(), [rank])  # noqa: E731
    ctx.buffer("x", "input", "before", x, own(x))
    for name, tensor in (("W1 shard", mlp.fc1.weight), ("b1 shard", mlp.fc1.bias), ("W2 shard", mlp.fc2.weight)):
        local = dtensor(tensor).to_local()
        ctx.buffer(name, "shard", "before", local, own(local))

    def fc1_starts(module: Any, args: Any) -> None:
        """fc1's forward pre-hook (after the parallel style's input hook): open the fc1 phase."""
        phases.next("fc1", "fc1 column-parallel: h = x · W1 shardᵀ + b1 shard (no communication)", category="activations")

    def fc1_done(module: Any, args: Any, out: torch.Tensor) -> None:
        """fc1's forward hook: show the local hidden slice, open the activation phase."""
        ctx.buffer("h shard", "activation", "result", out, own(out))
        phases.next("activation", "GELU on the local hidden slice", category="activations")

    def fc2_starts(module: Any, args: Any) -> None:
        """fc2's first forward pre-hook: show its local input, open the fc2 phase."""
        ctx.buffer("gelu(h) shard", "activation", "result", args[0], own(args[0]))
        phases.next("fc2", f"fc2 row-parallel: partial y = gelu(h) shard · W2 shardᵀ + b2/{ctx.world_size}",
                    category="activations")
        bias = dtensor(mlp.fc2.bias).to_local()  # replicated: every rank holds all of b2
        ctx.buffer("b2", "shard", "before", bias, uniform_provenance(bias.numel(), list(range(ctx.world_size))))
        with ctx.tracker.suspended():
            share = bias / ctx.world_size
        ctx.buffer(f"b2/{ctx.world_size} (in each partial)", "shard", "result", share, own(share))

    def fc2_partial(module: Any, args: Any, out: Any) -> None:
        """fc2's first forward hook, before the style's all-reduce: show the partial output."""
        local = out.to_local()
        ctx.buffer("partial y", "partial", "result", local, own(local))
        phases.next("all_reduce", "all-reduce: y = sum of the partial outputs", category="communication")

    def summed(op: str, partial: torch.Tensor, total: torch.Tensor, provenance: list[ProvenanceRun] | None) -> None:
        """The observed all-reduce completed: its input and its output."""
        ctx.buffer("y", "inout", "before", partial, own(partial))
        ctx.buffer("y", "inout", "after", total, provenance)

    mlp.fc1.register_forward_pre_hook(fc1_starts)
    mlp.fc1.register_forward_hook(fc1_done)
    mlp.fc2.register_forward_pre_hook(fc2_starts, prepend=True)
    mlp.fc2.register_forward_hook(fc2_partial, prepend=True)
    with CollectiveObserver(ctx, on_result=summed), torch.no_grad():
        y = mlp(x)
        y = y.wait() if hasattr(y, "wait") else y
    phases.next("check", "check: output equals the unsharded MLP")
    with ctx.tracker.suspended(), torch.no_grad():
        expected = reference(x)
    ctx.buffer("unsharded MLP(x)", "reference", "result", expected, None)
    check_close(ctx, "output equals the unsharded MLP", y, expected, "the unsharded MLP on the same input")
    phases.close()
