"""``ddp``: one training step of the tiny GPT under torch's DistributedDataParallel.

Every rank starts from the same weights and draws different sequences. DDP groups gradients into
buckets; as each bucket fills during backward, DDP calls the communication hook registered here,
which averages the bucket over all ranks with an in-place functional all-reduce (so the dispatcher
sees and times it) and shows the bucket — and one named element, ``W_query[0,0]`` of block 0, the
element ``all-reduce.md`` follows — before and after. After the AdamW step every rank checks that
its parameters are bit-identical to every other rank's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
# Imported by the launcher, once, before it forks: torch's DDP and FSDP2 code imports torch._dynamo (200-300
# modules) on first use, which every worker would otherwise pay after the fork, a second of CPU each.
import torch._dynamo  # noqa: F401
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ...context import RankContext
from ...observation.c10d_calls import world_group
from ...observation.metrics import human_bytes
from ...observation.tensors import uniform_provenance
from ...scenario_files.schema import Scenario
from ...wire.protocol import ProvenanceRun
from ..program import RunOptions
from .common import PhaseSequence, TrainingProgram, check_identical, gradient, refuse_options, timed_steps
from .model import TinyGPT, make_gpt, token_batch
from .observer import CollectiveObserver

__all__ = ["DDPProgram", "build", "bucket_count", "TRACKED", "emit_parameters", "train_step"]

TRACKED = ("blocks.0.attn.query.weight", (0, 0), "W_query[0,0]")
"""The parameter element followed through the step: its name, index and display name."""


def bucket_count(model: TinyGPT, cap_bytes: int) -> int:
    """How many gradient buckets DDP makes for ``model`` with per-bucket cap ``cap_bytes``.

    The same call DDP itself makes for its first iteration with ``bucket_cap_mb_list``.
    """
    params: list[torch.Tensor] = [p for p in model.parameters() if p.requires_grad]
    indices, _ = dist._compute_bucket_assignment_by_size(params, [cap_bytes], [False] * len(params))
    return len(indices)


@dataclass(frozen=True)
class DDPProgram(TrainingProgram):
    """One DDP training step; ``buckets`` is known before any process starts."""

    params: int
    buckets: int

    @property
    def phase_count(self) -> int:
        """setup, forward, backward, one phase per bucket, optimizer, check, timed steps."""
        return 6 + self.buckets

    def narration_values(self, world_size: int) -> dict[str, object]:
        """Values for the narration placeholders."""
        return {"world_size": world_size, "params": f"{self.params:,}", "param_bytes": human_bytes(4 * self.params),
                "buckets": self.buckets, "batch": self.settings["batch"], "tracked": TRACKED[2],
                "timed_steps": self.settings["timed_steps"]}

    def run(self, ctx: RankContext) -> None:
        """Run this rank's part of the step."""
        run_ddp(ctx, self)


def build(scenario: Scenario, world_size: int, options: RunOptions) -> DDPProgram:
    """The DDP program: the model is built here once to count its parameters and buckets (a torch
    whose DDP lacks per-bucket caps is refused before: ``registry.NEEDS``)."""
    refuse_options(options, scenario.name)
    model = make_gpt(dict(scenario.settings))
    params = sum(p.numel() for p in model.parameters())
    buckets = bucket_count(model, int(scenario.settings["bucket_kib"]) * 1024)
    seed = int(scenario.settings["seed"])
    return DDPProgram(world_size=world_size, settings=scenario.settings, params=params, buckets=buckets,
                      source=f"tiny GPT, {params:,} parameters from torch.manual_seed({seed}); "
                             f"rank r's tokens from generator seed {seed} + 1 + r")


def emit_parameters(ctx: RankContext, named: list[tuple[str, torch.Tensor]], role: str) -> None:
    """A Buffer per parameter as this rank holds it now (values when small, a summary otherwise).

    Each is snapshotted from an untracked copy: summarising a tensor goes through ``.numpy()``,
    which would make the parameter's own storage non-resizable (FSDP resizes storages).
    """
    for name, tensor in named:
        with ctx.tracker.suspended():
            local = (tensor.to_local() if hasattr(tensor, "to_local") else tensor).detach().clone()
        ctx.buffer(name, role, "after", local, None)


def _averaging_hook(ctx: RankContext, phases: PhaseSequence, observer: CollectiveObserver,
                    tracked: torch.nn.Parameter, calls: list[int]):
    """DDP's comm hook: average the bucket in place, with Buffer events before and after (the
    bucket's provenance and transfers observed by ``observer``)."""
    group_name = world_group().group_name
    row, col = TRACKED[1]

    def hook(state: Any, bucket: dist.GradBucket) -> torch.futures.Future:
        """Average ``bucket`` over all ranks (in place) and show it before and after."""
        flat = bucket.buffer()
        future: torch.futures.Future = torch.futures.Future()
        if phases.paused:  # a timed step: the same averaging, nothing shown
            dist.all_reduce(flat)
            future.set_result(flat.div_(ctx.world_size))
            return future
        calls.append(bucket.index())
        holds = any(p is tracked for p in bucket.parameters())
        phases.next("bucket", f"backward: bucket {bucket.index()} ready ({len(bucket.parameters())} tensors, "
                    f"{human_bytes(flat.numel() * flat.element_size())}) → all-reduce", category="communication")
        ctx.buffer(f"bucket {bucket.index()} grads", "grad", "before", flat, uniform_provenance(flat.numel(), [ctx.rank]))
        if holds:
            ctx.buffer(f"{TRACKED[2]}.grad", "grad", "before", gradient(tracked)[row, col].reshape(1),
                       [ProvenanceRun(0, 1, [ctx.rank])])
        observer.name_next(f"bucket {bucket.index()} grads")
        torch.ops._c10d_functional.all_reduce_(flat, "sum", group_name)
        torch.ops._c10d_functional.wait_tensor(flat)
        flat.div_(ctx.world_size)
        provenance = observer.last_provenance
        ctx.buffer(f"bucket {bucket.index()} grads", "grad", "after", flat, provenance)
        if holds:
            ctx.buffer(f"{TRACKED[2]}.grad", "grad", "after", gradient(tracked)[row, col].reshape(1),
                       [ProvenanceRun(0, 1, list(range(ctx.world_size)))] if provenance and len(provenance) == 1 else None)
        future.set_result(flat)
        return future

    # DDP checks these annotations as objects; ``from __future__ import annotations`` made them strings
    hook.__annotations__ = {"state": Any, "bucket": dist.GradBucket, "return": torch.futures.Future[torch.Tensor]}
    return hook


def run_ddp(ctx: RankContext, program: DDPProgram) -> None:
    """This rank's DDP step: every phase, every event."""
    settings = dict(program.settings)
    phases = PhaseSequence(ctx)
    observer = CollectiveObserver(ctx)
    with observer:
        phases.next("setup", "setup: same weights everywhere, DDP buckets the gradients", category="params", gated=False)
        model = make_gpt(settings).to(ctx.device)
        tracked = model.get_parameter(TRACKED[0])
        with ctx.tracker.category("grads"):
            # torch annotates bucket_cap_mb_list as list[int], but it takes int(cap_mb * 2**20): a
            # fraction of a MiB (the setting is in KiB) works, so the stub is narrower than the code
            ddp = DistributedDataParallel(model, bucket_cap_mb_list=[int(settings["bucket_kib"]) / 1024],  # type: ignore[list-item]
                                          device_ids=[ctx.device] if ctx.device.type == "cuda" else None,
                                          gradient_as_bucket_view=True)
        calls: list[int] = []
        ddp.register_comm_hook(None, _averaging_hook(ctx, phases, observer, tracked, calls))
        ctx.buffer(TRACKED[2], "param", "before", tracked.detach()[TRACKED[1]].reshape(1), None)
        with ctx.tracker.category("inputs"):
            inputs, targets = (t.to(ctx.device) for t in token_batch(settings, ctx.rank))
        ctx.buffer("tokens", "input", "before", inputs, uniform_provenance(inputs.numel(), [ctx.rank]))
        phases.next("forward", "forward on this rank's own batch", category="activations")
        logits = ddp(inputs)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        ctx.buffer("loss", "loss", "result", loss.detach().reshape(1), None)
        phases.next("backward", "backward: gradients, bucket by bucket", category="activations")
        optimizer = torch.optim.AdamW(model.parameters(), lr=float(settings["lr"]))
        loss.backward()
        del logits, loss
        if len(calls) != program.buckets:
            raise RuntimeError(f"DDP made {len(calls)} buckets, the program expected {program.buckets}")
        phases.next("optimizer", "AdamW step with the averaged gradients", category="optimizer")
        optimizer.step()
        ctx.buffer(TRACKED[2], "param", "after", tracked.detach()[TRACKED[1]].reshape(1), None)
        emit_parameters(ctx, list(model.named_parameters()), "param")
        phases.next("check", "check: parameters identical on all ranks")
        check_identical(ctx, "parameters identical on all ranks", model.parameters())
        timed_steps(ctx, phases, int(settings["timed_steps"]), lambda: train_step(ddp, optimizer, inputs, targets))
        phases.close()


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, inputs: torch.Tensor, targets: torch.Tensor) -> None:
    """One plain training step: forward, cross-entropy loss, backward, optimizer step."""
    optimizer.zero_grad()
    logits = model(inputs)
    torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).backward()
    optimizer.step()
