"""The desync scenario: what a hang looks like when one rank calls a different collective.

Every rank runs one collective together; then the odd rank calls another collective in its place
(fault "swap"), none at all (fault "skip"), or raises (fault "raise") while the others enter the
agreed one. The backend really hangs (or, for "raise", loses a peer); the launcher's watch reports who waits where, and the process group's own timeout
ends the run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from ..context import RankContext
from ..errors import UsageError
from ..observation.tensors import uniform_provenance
from ..scenario_files.schema import Scenario
from ..wire.protocol import Collective
from .collectives import CollectiveSpec, allocate_input, collective_caller, collective_fields, make_output, present, timed_ns
from .program import RunOptions

__all__ = ["DesyncProgram", "build_desync"]


@dataclass(frozen=True)
class DesyncProgram:
    """Agreed collective once, then the odd rank misbehaves (see module docstring)."""

    agreed: CollectiveSpec
    swapped: CollectiveSpec | None
    odd_rank: int
    fault: str = "swap"

    @property
    def phase_count(self) -> int:
        """setup, agree, desync."""
        return 3

    @property
    def source(self) -> str:
        """Where the inputs come from."""
        return self.agreed.source

    @property
    def fault_text(self) -> str:
        """What the odd rank does, in words."""
        if self.fault == "raise":
            return f"rank {self.odd_rank} raises instead of calling {self.agreed.op}"
        if self.swapped is None:
            return f"rank {self.odd_rank} skips {self.agreed.op}"
        return f"rank {self.odd_rank} calls {self.swapped.op} instead of {self.agreed.op}"

    def narration_values(self, world_size: int) -> dict[str, object]:
        """Values for the narration placeholders."""
        return self.agreed.narration_values(world_size)

    def run_options(self) -> dict[str, str | int | float | bool]:
        """The resolved options, as recorded in RunStart."""
        return {"collective": self.agreed.op, "odd_rank": self.odd_rank, "fault": self.fault_text}

    def run(self, ctx: RankContext) -> None:
        """Run this rank's part: agree once, then (mis)behave."""
        with ctx.phase("setup", "setup", gated=False):
            inp = present(allocate_input(ctx, self.agreed), "input")  # every rank has one: the collective is unrooted
            ctx.buffer(self.agreed.buffer_name, "input", "before", inp, uniform_provenance(inp.numel(), [ctx.rank]))
            ctx.memory("inputs allocated")
        with ctx.phase("agree", f"{self.agreed.op} #0 on every rank"):
            _issue(ctx, self.agreed, inp.clone())
        with ctx.phase("desync", f"{'hang' if self.fault == 'skip' else 'desync'}: {self.fault_text}"):
            if ctx.rank != self.odd_rank:
                _issue(ctx, self.agreed, inp.clone())
            elif self.fault == "raise":
                raise RuntimeError(f"injected failure: rank {ctx.rank} raises in the desync scenario")
            elif self.swapped is not None:
                _issue(ctx, self.swapped, inp.clone())
            else:
                while True:  # alive but never calls: the others wait until their timeout
                    time.sleep(1)


def _issue(ctx: RankContext, spec: CollectiveSpec, inp: torch.Tensor) -> None:
    """One real call of ``spec`` with its Collective events (begin is sent before the call)."""
    out = make_output(spec, ctx.rank, ctx.world_size, ctx.device)
    fields = collective_fields(ctx, spec, inp, out)
    ctx.emitter.emit(Collective, edge="begin", **fields)
    ctx.emitter.flush()
    call = collective_caller(spec, ctx.rank, ctx.world_size)
    elapsed = timed_ns(call, ctx.device, (inp, out, spec.reduce_op or "sum"))
    ctx.emitter.emit(Collective, edge="end", duration_ns=elapsed, clock="host", **fields)


def build_desync(scenario: Scenario, world_size: int, options: RunOptions) -> DesyncProgram:
    """Resolve a desync scenario for ``world_size`` ranks."""
    if options != RunOptions():
        raise UsageError(f"{scenario.name} takes no --op, --dtype, --size, --root or --iters")
    settings = scenario.settings
    if settings["odd_rank"] >= world_size:
        raise UsageError(f"{scenario.name} makes rank {settings['odd_rank']} misbehave: run it with --gpus > {settings['odd_rank']}")
    count = 2 * world_size
    agreed = CollectiveSpec(
        op=scenario.collective, reduce_op=scenario.reduce_op, dtype=scenario.dtype, root=0,
        buffer_name=scenario.buffer_name, inputs=None, count=count, iters=1, followup=None,
        source=f"generated: element i of rank r is r·{count} + i + 1",
    )
    swapped = None
    if settings["fault"] == "swap":
        swap_op = settings["swap_with"]
        swapped = replace(agreed, op=swap_op, reduce_op="sum" if swap_op in ("all_reduce", "reduce_scatter") else None)
    return DesyncProgram(agreed=agreed, swapped=swapped, odd_rank=settings["odd_rank"], fault=settings["fault"])
