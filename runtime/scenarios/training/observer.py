"""Collectives issued inside torch's own code (DDP, FSDP2, DTensor), seen through a dispatch mode.

FSDP2 and DTensor call ``c10d`` ops (``c10d._allgather_base_``, ``c10d._reduce_scatter_base_``…)
and functional collectives (``_c10d_functional.all_reduce`` + ``wait_tensor``) from inside their
own code, so patching ``torch.distributed`` would miss them; every one of them passes through the
dispatcher, where :class:`CollectiveObserver` sees it and emits ``Collective`` events.

What is timed, and what is not: a functional collective is timed from its issue to its
``wait_tensor`` (``duration_ns``). A ``c10d`` op only *enqueues* work on the backend (gloo runs it
on its own thread and the caller waits later through a Work object the dispatcher never sees), so
its events carry no duration; phases show where the time went.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass_type

from ...context import RankContext
from ...observation.metrics import algo_bytes
from ...observation.tensors import dtype_name
from ...wire.protocol import Collective

__all__ = ["CollectiveObserver", "WORLD"]

WORLD = "world"
"""Every collective of the training scenarios runs on the default (world) group."""

_NAMES = {
    "allreduce_": "all_reduce", "all_reduce": "all_reduce", "all_reduce_": "all_reduce",
    "allgather_": "all_gather", "_allgather_base_": "all_gather", "all_gather_into_tensor": "all_gather",
    "allgather_into_tensor_coalesced_": "all_gather",
    "reduce_scatter_": "reduce_scatter", "_reduce_scatter_base_": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter", "reduce_scatter_tensor_coalesced_": "reduce_scatter",
    "broadcast_": "broadcast", "broadcast": "broadcast", "barrier": "barrier", "allgather_coalesced_": "all_gather",
}

Seen = Callable[[str, torch.Tensor, torch.Tensor], None]
"""Called with (op, input, output) when a functional collective's output is ready."""


def _tensors(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in _tensors(item)]
    return []


def _nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


class CollectiveObserver(TorchDispatchMode):
    """Emit a ``Collective`` begin/end pair for every collective op dispatched while entered.

    ``on_result`` (optional) receives each functional collective's input and output when its
    ``wait_tensor`` completes: how the tensor-parallel scenario shows the partial outputs an
    all-reduce sums.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """Like the storage tracker: nothing here is ever compiled."""
        return False

    def __init__(self, ctx: RankContext, on_result: Seen | None = None) -> None:
        super().__init__()
        self.ctx = ctx
        self.on_result = on_result
        self.count = 0
        self._pending: dict[int, tuple[dict, int, torch.Tensor]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        """Run ``func``; when it is a collective, emit its events around it."""
        if any(is_traceable_wrapper_subclass_type(t) for t in types):
            return NotImplemented
        kwargs = kwargs or {}
        namespace, _, name = func._schema.name.partition("::")
        if namespace == "_c10d_functional" and name == "wait_tensor":
            out = func(*args, **kwargs)
            self._finish(args[0], out)
            return out
        if namespace not in ("c10d", "_c10d_functional"):
            return func(*args, **kwargs)
        op = _NAMES.get(name, name)
        started = time.monotonic_ns()
        out = func(*args, **kwargs)
        if namespace == "c10d":
            outputs, inputs = _tensors(args[:1]), _tensors(args[1:2]) or _tensors(args[:1])
            common = self._common(op, inputs, outputs, None)
            self.ctx.emitter.emit(Collective, t_ns=started, edge="begin", **common)
            self.ctx.emitter.emit(Collective, edge="end", **common)
        else:
            inputs = _tensors(args[:1])
            reduce_op = args[1] if len(args) > 1 and isinstance(args[1], str) else None
            common = self._common(op, inputs, _tensors(out), reduce_op)
            self.ctx.emitter.emit(Collective, t_ns=started, edge="begin", **common)
            for tensor in _tensors(out):
                self._pending[id(tensor)] = (common, started, inputs[0] if inputs else tensor)
        return out

    def _finish(self, waited: Any, out: Any) -> None:
        """A functional collective's ``wait_tensor``: emit its end with the issue-to-wait time."""
        pending = self._pending.pop(id(waited), None) if isinstance(waited, torch.Tensor) else None
        if pending is None:
            return
        common, started, source = pending
        ended = time.monotonic_ns()
        self.ctx.emitter.emit(Collective, t_ns=ended, edge="end", duration_ns=ended - started, **common)
        if self.on_result is not None:
            with self.ctx.tracker.suspended():
                self.on_result(common["op"], source, out)

    def _common(self, op: str, inputs: list[torch.Tensor], outputs: list[torch.Tensor], reduce_op: str | None) -> dict:
        """Fields shared by the begin and end events of one collective (reduce op when known)."""
        n = self.ctx.world_size
        bytes_in, bytes_out = _nbytes(inputs), _nbytes(outputs)
        sample = (inputs or outputs or [torch.empty(0)])[0]
        self.count += 1
        return dict(
            phase=self.ctx.phase_index, op=op, group=WORLD, group_ranks=list(range(n)),
            group_seq=self.ctx.next_group_seq(WORLD), dtype=dtype_name(sample.dtype),
            count=sum(t.numel() for t in inputs), bytes_in=bytes_in, bytes_out=bytes_out,
            algo_bytes=algo_bytes(op, n, bytes_in, bytes_out) if op in _ALGO_OPS else bytes_in,
            reduce_op=reduce_op,
        )


_ALGO_OPS = {"all_reduce", "all_gather", "reduce_scatter", "broadcast"}
