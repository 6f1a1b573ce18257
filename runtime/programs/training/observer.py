"""Collectives issued inside torch's own code (DDP, FSDP2, DTensor), seen through a dispatch mode.

FSDP2 and DTensor call ``c10d`` ops (``c10d._allgather_base_``, ``c10d._reduce_scatter_base_``…)
and functional collectives (``_c10d_functional.all_reduce`` + ``wait_tensor``) from inside their
own code, so patching ``torch.distributed`` would miss them; every one of them passes through the
dispatcher, where :class:`CollectiveObserver` sees it and emits ``Collective`` events.

What moved: after each all-reduce, all-gather, reduce-scatter or broadcast the observer runs the
same collective on the same group over rank tags (untracked and unobserved, as the collective
scenarios do) and emits the logical ``Transfer`` events its provenance implies.

What is timed: the call itself (:class:`~...observation.timing.CallClock`). On CPU, issue to
completion: a ``c10d`` op only *enqueues* work (gloo runs it on its own thread; FSDP2 waits on
the returned Work later) and a functional collective returns a tensor to wait on later (DTensor
often waits only when the result is next used), so the observer waits itself, right after the
issue, and times that; work torch would overlap with the call (FSDP's ``--prefetch``) then starts
after it, and the step's results are unchanged. On CUDA, CUDA events on the issuing stream
bracket the call — an asynchronous call's Work is waited on (the stream waits for it), a
synchronous one (every FSDP2 all-gather and reduce-scatter: no Work since torch 2.8) ran on that
stream — and the observer then reads them, which **blocks the host** until the call is done: an
observed CUDA run is serialised call by call, as the CPU one is. The observation passes (rank
tags) run after the call is read and are never part of its time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import _resolve_process_group
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass_type

from ...compat import GroupName
from ...context import RankContext
from ...observation.c10d_calls import (
    OP_NAMES,
    WORLD,
    c10d_group,
    c10d_root,
    c10d_tensors,
    call_fields,
    call_sizes,
    group_label,
    tensors_in,
    work_of,
    world_group,
)
from ...observation.tensors import TagPass, observe_provenance
from ...observation.timing import CallClock
from ...wire.protocol import Collective, ProvenanceRun
from ..transfers import emit_logical_transfers

__all__ = ["CollectiveObserver", "WORLD", "TRANSFER_NAMES"]

TRANSFER_NAMES = {"all_reduce": "summed", "all_gather": "flat params (gathered)",
                  "reduce_scatter": "flat grads (reduced shard)", "broadcast": "broadcast"}
"""The buffer name transfers of each op carry unless the scenario names the next call. Inside
torch's own code an all-gather or reduce-scatter moves a unit's parameters or gradients as one
flat buffer, so their transfers' element ranges are offsets in that flat buffer (every parameter
of the unit, one after another), not in any one tensor shown on screen; the name says so."""

_PROVENANCE_OPS = set(TRANSFER_NAMES)
"""The ops whose provenance the observer observes (over rank tags) and moves as transfers."""

Seen = Callable[[str, torch.Tensor, torch.Tensor, "list[ProvenanceRun] | None"], None]
"""Called with (op, input, output, provenance of the output) when a functional collective has
completed."""


@dataclass(frozen=True)
class _Call:
    """One observed collective: its op, group, the tensors it read and wrote, a broadcast's root
    (group rank) and its event fields."""

    op: str
    group: dist.ProcessGroup
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]
    root: int | None
    fields: dict


def _functional_group(args: tuple) -> dist.ProcessGroup:
    """The process group a functional collective names (its last string argument)."""
    names = [arg for arg in args if isinstance(arg, str)]
    return _resolve_process_group(GroupName(names[-1])) if names else world_group()


class CollectiveObserver(TorchDispatchMode):
    """Emit a ``Collective`` begin/end pair, and the logical transfers, of every collective op
    dispatched while entered.

    ``on_result`` (optional) receives each functional collective's input, output and the output's
    provenance once it has completed: how the tensor-parallel scenario shows the
    partial outputs an all-reduce sums. :attr:`last_provenance` holds the provenance of the last
    collective's result (``None`` where it could not be observed).
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
        self.last_provenance: list[ProvenanceRun] | None = None
        self._next_name: str | None = None

    def name_next(self, buffer: str) -> None:
        """Name the buffer the next collective's transfers move (default: :data:`TRANSFER_NAMES`)."""
        self._next_name = buffer

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        """Run ``func``; when it is a collective, emit its events around it."""
        if any(is_traceable_wrapper_subclass_type(t) for t in types):
            return NotImplemented
        kwargs = kwargs or {}
        namespace, _, name = func._schema.name.partition("::")
        if namespace == "_c10d_functional" and name == "wait_tensor":
            return func(*args, **kwargs)  # the observer already waited (see below)
        if namespace not in ("c10d", "_c10d_functional") or namespace == "_c10d_functional" and name not in OP_NAMES:
            return func(*args, **kwargs)  # not a collective (functional helpers such as _wrap_tensor_autograd)
        op = OP_NAMES.get(name, name)
        clock = CallClock(self.ctx.device)
        out = func(*args, **kwargs)
        if namespace == "c10d":
            work = work_of(out)  # None: a synchronous NCCL call, which ran on the issuing stream
            if work is not None:
                work.wait()  # CPU: until it completes; CUDA: the issuing stream waits, the host does not
            clock.issued(seen_complete=work is not None)
            inputs, outputs = c10d_tensors(args)
            root = c10d_root(op, args)
            call = self._call(op, c10d_group(args), inputs, outputs, None, root)
        else:
            inputs = tensors_in(args[:1])
            reduce_op = args[1] if len(args) > 1 and isinstance(args[1], str) else None
            root = args[1] if op == "broadcast" and len(args) > 1 and isinstance(args[1], int) else None
            outputs = [torch.ops._c10d_functional.wait_tensor(t) for t in tensors_in(out)]
            clock.issued()
            call = self._call(op, _functional_group(args), inputs, outputs, reduce_op, root)
        took = clock.read()
        provenance = self._observe(call)
        self.ctx.emitter.emit(Collective, t_ns=took.started_ns, edge="begin", **call.fields)
        self.ctx.emitter.emit(Collective, t_ns=took.ended_ns, edge="end", duration_ns=took.duration_ns,
                              clock=took.clock, **call.fields)
        self._moved(call, provenance)
        if namespace == "_c10d_functional" and self.on_result is not None and outputs:
            with self.ctx.tracker.suspended():
                self.on_result(op, inputs[0] if inputs else outputs[0], outputs[0], provenance)
        return out

    def _call(self, op: str, group: dist.ProcessGroup, inputs: list[torch.Tensor], outputs: list[torch.Tensor],
              reduce_op: str | None, root: int | None) -> _Call:
        """The observed call, with the fields shared by its begin and end events (numbers it)."""
        self.count += 1
        label = group_label(group)
        fields = call_fields(op, label, dist.get_process_group_ranks(group), call_sizes(inputs, outputs), reduce_op,
                             root)
        fields.update(phase=self.ctx.phase_index, group_seq=self.ctx.next_group_seq(label))
        return _Call(op, group, inputs, outputs, root, fields)

    def _observe(self, call: _Call) -> list[ProvenanceRun] | None:
        """The provenance of ``call``'s result, observed over rank tags (untracked)."""
        with self.ctx.tracker.suspended():
            provenance = self.last_provenance = _observed_provenance(call, self.ctx.rank)
        return provenance

    def _moved(self, call: _Call, provenance: list[ProvenanceRun] | None) -> None:
        """Emit the logical transfers ``call``'s observed ``provenance`` implies."""
        name, self._next_name = self._next_name or TRANSFER_NAMES.get(call.op, call.op), None
        if provenance is not None:
            emit_logical_transfers(self.ctx, name, provenance, call.outputs[0].element_size())


def _observed_provenance(call: _Call, rank: int) -> list[ProvenanceRun] | None:
    """Run ``call``'s collective again on its group over rank tags; the provenance of the result
    in global ranks (None: an op that moves no data, several tensors, or no tag type for its dtype)."""
    if call.op not in _PROVENANCE_OPS or len(call.inputs) != 1 or len(call.outputs) != 1:
        return None
    if call.op == "broadcast" and call.root is None:
        return None
    members = dist.get_process_group_ranks(call.group)
    me = members.index(rank)
    source, result = call.inputs[0], call.outputs[0]
    src = None if call.root is None else members[call.root]  # a broadcast's root, as a global rank

    def received(tag_pass: TagPass) -> torch.Tensor:
        if call.op == "all_reduce":
            tags = tag_pass.tags(result, me)
            dist.all_reduce(tags, group=call.group)
        elif call.op == "broadcast":
            tags = tag_pass.tags(result, me, placeholder=me != call.root)
            dist.broadcast(tags, src=src, group=call.group)
        else:
            mine = tag_pass.tags(source, me).reshape(-1)
            tags = tag_pass.tags(result, me, placeholder=True).reshape(-1)
            collective = dist.all_gather_into_tensor if call.op == "all_gather" else dist.reduce_scatter_tensor
            collective(tags, mine, group=call.group)
        return tags

    runs = observe_provenance(source.dtype, len(members), received)
    if runs is None:
        return None
    return [ProvenanceRun(run.start, run.length, [members[r] for r in run.ranks]) for run in runs]
