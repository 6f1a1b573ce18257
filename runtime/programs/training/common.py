"""What the training programs share: the program base, phases opened from hooks, checks.

Phases of a training scenario open and close where torch's own code calls back (module hooks,
DDP's comm hook, FSDP's parameter groups), so they cannot always be ``with`` blocks:
:class:`PhaseSequence` closes the open phase and opens the next in one call, and puts the storage
tracker's category for that phase in force. Every rank runs the same code, so every rank opens
the same phases in the same order (they are gates in step mode).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from ...context import RankContext
from ...errors import UsageError
from ...observation.timing import wait_for_device
from ...scenario_files.training_kinds import SettingValue
from ...wire.protocol import Check
from ..devices import rank_tensor
from ..program import RunOptions

__all__ = ["TrainingProgram", "PhaseSequence", "refuse_options", "check_identical", "check_close", "timed_steps",
           "dtensor", "gradient"]

_FLAGS = {
    "reduce_op": "--op",
    "dtype": "--dtype",
    "size_bytes": "--size",
    "root": "--root",
    "prefetch": "--prefetch/--no-prefetch",
    "reshard_after_forward": "--reshard-after-forward/--no-reshard-after-forward",
}


def refuse_options(options: RunOptions, kind: str, allowed: Iterable[str] = ()) -> None:
    """UsageError naming the first command-line option given that ``kind`` scenarios do not take
    (``iters`` counts as given when it is not 1).
    """
    allowed = set(allowed)
    for item in fields(options):
        value = getattr(options, item.name)
        given = value != 1 if item.name == "iters" else value is not None
        if given and item.name not in allowed:
            flag = _FLAGS.get(item.name, f"--{item.name.replace('_', '-')}")
            takes = f" ({kind} takes {', '.join(_FLAGS.get(a, a) for a in sorted(allowed))})" if allowed else ""
            raise UsageError(f"{flag} does not apply to {kind} scenarios{takes}")


def dtensor(tensor: torch.Tensor) -> DTensor:
    """``tensor`` as the DTensor that FSDP2 or tensor parallelism made of it (a TypeError if it is not one)."""
    if not isinstance(tensor, DTensor):
        raise TypeError(f"expected a DTensor (a sharded or parallelised parameter), got {type(tensor).__name__}")
    return tensor


def gradient(param: torch.Tensor) -> torch.Tensor:
    """``param``'s gradient, which the backward pass has written (a RuntimeError if it has none)."""
    if param.grad is None:
        raise RuntimeError("a parameter the step follows has no gradient")
    return param.grad


@dataclass(frozen=True)
class TrainingProgram:
    """Fields and methods every training program has; subclasses add ``run`` and their phases."""

    world_size: int
    settings: Mapping[str, SettingValue]
    source: str

    def run_options(self) -> dict[str, str | int | float | bool]:
        """The resolved settings, as recorded in RunStart."""
        return dict(self.settings)

    def setting(self, name: str) -> SettingValue:
        """One resolved setting."""
        return self.settings[name]


class PhaseSequence:
    """Phases opened one after another from callbacks: :meth:`next` closes the open one first.

    With ``memory=True`` a Memory event is emitted as each phase opens and as it closes, so the
    timeline shows every rise and fall; ``category`` attributes storages first seen in the phase.
    """

    def __init__(self, ctx: RankContext, memory: bool = True) -> None:
        self.ctx = ctx
        self.memory = memory
        self.opened = 0
        self.paused = False
        """While True, :meth:`next` does nothing (steps run unobserved, see :func:`timed_steps`)."""
        self.untracked = False
        """True while the open phase ran untracked: its end figure would be wrong, so none is sent."""
        self._phase: AbstractContextManager | None = None
        self._category: AbstractContextManager | None = None
        self._name = ""

    def next(self, key: str, name: str, category: str | None = None, unit: str | None = None,
             gated: bool = True) -> None:
        """Close the open phase (if any) and open ``name``, narrated by ``key`` (or ``UNIT.KEY``
        for a phase of one ``unit`` of the model), unless paused; behind no gate if not ``gated``."""
        if self.paused:
            return
        self.close()
        self._phase = self.ctx.phase(key, name, unit=unit, gated=gated)
        self._phase.__enter__()
        self.opened += 1
        self._name = name
        if category is not None:
            self._category = self.ctx.tracker.category(category)
            self._category.__enter__()
        if self.memory:
            self.ctx.memory("start")

    def close(self) -> None:
        """Close the open phase, if any (a Memory event first when ``memory``)."""
        if self._phase is None:
            return
        if self.memory and not self.untracked:
            self.ctx.memory("end")
        self.untracked = False
        if self._category is not None:
            self._category.__exit__(None, None, None)
            self._category = None
        phase, self._phase = self._phase, None
        phase.__exit__(None, None, None)


def timed_steps(ctx: RankContext, phases: PhaseSequence, steps: int, step: Callable[[], None]) -> None:
    """Phase "timed": ``step()`` ``steps`` times with no events, tracking or observation.

    The phase's own begin and end times are the measurement: its duration ÷ ``steps`` is the
    time of one training step free of collviz's observation work. On CUDA the host only queues
    the steps' kernels, so the device is drained before the phase begins and before it ends: the
    phase's times are the GPU's. Memory is sampled as the phase opens, not as it closes: storages
    made while untracked are not counted, so an end figure would be wrong.
    """
    wait_for_device(ctx.device)
    phases.next("timed", f"{steps} more steps, unobserved: step time = phase time / {steps}")
    phases.paused = phases.untracked = True
    try:
        with ctx.tracker.suspended():
            for _ in range(steps):
                step()
            wait_for_device(ctx.device)
    finally:
        phases.paused = False
    phases.close()


def check_identical(ctx: RankContext, name: str, tensors: Iterable[torch.Tensor]) -> bool:
    """All-gather the concatenation of ``tensors`` and emit Check ``name``: bit-identical everywhere?

    Runs untracked (the tracker's modes are suspended), so it is neither counted nor observed as the
    scenario's own communication.
    """
    with ctx.tracker.suspended():
        mine = torch.cat([t.detach().reshape(-1).float() for t in tensors])
        everyone = rank_tensor(mine.device, mine.dtype, shape=ctx.world_size * mine.numel())
        dist.all_gather_into_tensor(everyone, mine)
        copies = everyone.view(ctx.world_size, -1)
        differ = [r for r in range(ctx.world_size) if not torch.equal(copies[r], mine)]
        worst = max((float((copies[r] - mine).abs().max()) for r in differ), default=0.0)
    detail = (f"{mine.numel()} values compared bit for bit with every rank" if not differ
              else f"differs from ranks {differ}, by up to {worst:.3g}")
    ctx.emitter.emit(Check, phase=ctx.phase_index, name=name, ok=not differ, detail=detail)
    return not differ


def check_close(ctx: RankContext, name: str, got: torch.Tensor, expected: torch.Tensor, what: str) -> bool:
    """Emit Check ``name``: ``got`` equals ``expected`` (``what`` names it) up to float rounding."""
    with ctx.tracker.suspended():
        difference = float((got.detach().double() - expected.detach().double()).abs().max()) if got.numel() else 0.0
        ok = got.shape == expected.shape and torch.allclose(got.double(), expected.double(), rtol=1e-5, atol=1e-6)
    detail = f"largest difference from {what}: {difference:.3g}" + ("" if ok else " (beyond rtol 1e-5, atol 1e-6)")
    ctx.emitter.emit(Check, phase=ctx.phase_index, name=name if ok else f"differs: {name}", ok=ok, detail=detail)
    return ok
