"""Reading a ``c10d`` collective call from its dispatcher arguments: which operation, on which
process group, over which tensors, and the ``Work`` it returned.

Every collective ``torch.distributed`` runs — its Python API, DDP's C++ reducer, FSDP2, and the
functional collectives DTensor uses (their kernels call these ops) — reaches the dispatcher as a
``c10d`` op such as ``c10d::allreduce_(Tensor[] tensors, ProcessGroup pg, ReduceOp op, …) ->
(Tensor[], Work)``. What one call's arguments mean is decoded here once, for every observer of
calls (the training scenarios' dispatch mode, the observer of a user's script).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.distributed as dist

from .metrics import BUS_FACTOR_OPS, algo_bytes
from .tensors import dtype_name

__all__ = ["WORLD", "OP_NAMES", "CallSizes", "C10dSignature", "tensors_in", "nbytes", "world_group", "c10d_signature",
           "c10d_group", "c10d_tensors", "c10d_root", "c10d_async", "work_of", "group_label", "call_sizes", "call_fields"]

WORLD = "world"
"""The name the default (world) group goes by in Collective events."""

OP_NAMES = {
    "allreduce_": "all_reduce", "all_reduce": "all_reduce", "all_reduce_": "all_reduce",
    "allgather_": "all_gather", "_allgather_base_": "all_gather", "all_gather_into_tensor": "all_gather",
    "allgather_into_tensor_coalesced_": "all_gather",
    "reduce_scatter_": "reduce_scatter", "_reduce_scatter_base_": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter", "reduce_scatter_tensor_coalesced_": "reduce_scatter",
    "broadcast_": "broadcast", "broadcast": "broadcast", "barrier": "barrier", "allgather_coalesced_": "all_gather",
    "scatter_": "scatter", "gather_": "gather", "reduce_": "reduce", "alltoall_base_": "all_to_all",
}
"""Dispatcher op name (``c10d`` and ``_c10d_functional``) → the collective's name in events."""


def tensors_in(obj: Any) -> list[torch.Tensor]:
    """The tensors in ``obj``: a tensor, or (nested) lists and tuples of them."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if not isinstance(obj, (list, tuple)):
        return []
    found = []
    for item in obj:  # read for every observed call: a flat list of tensors costs one pass
        if isinstance(item, torch.Tensor):
            found.append(item)
        else:
            found.extend(tensors_in(item))
    return found


def nbytes(tensors: list[torch.Tensor]) -> int:
    """Bytes held by ``tensors`` together."""
    return sum(t.nbytes for t in tensors)


def world_group() -> dist.ProcessGroup:
    """The default (world) process group, which every observed call runs in or under."""
    world = dist.group.WORLD
    if world is None:
        raise RuntimeError("torch.distributed has no default process group (not initialised)")
    return world


class C10dSignature(NamedTuple):
    """Where a ``c10d`` op's arguments are, read once from its schema."""

    group_at: int | None
    """Position of its process group (None: it takes none)."""
    async_at: int | None
    """Position of its ``async_op`` flag (None: it takes none)."""


def c10d_signature(op: torch._ops.OpOverload) -> C10dSignature:
    """Where ``op`` (a ``c10d`` op such as ``torch.ops.c10d.allreduce_.default``) takes its
    process group and its ``async_op`` flag."""
    arguments = op._schema.arguments
    group_at = next((index for index, argument in enumerate(arguments) if str(argument.type).endswith(".ProcessGroup")),
                    None)
    async_at = next((index for index, argument in enumerate(arguments) if argument.name == "async_op"), None)
    return C10dSignature(group_at, async_at)


def c10d_async(args: tuple, signature: C10dSignature) -> bool:
    """Whether a call with these arguments was issued with ``async_op`` (its default, True, when
    left out: the dispatcher drops trailing defaults). Only torch.distributed's Python functions
    pass False, and they wait on the call's Work at once, from Python."""
    at = signature.async_at
    return at is None or at >= len(args) or args[at] is not False


def c10d_group(args: tuple, at: int | None = None) -> dist.ProcessGroup:
    """The process group among a ``c10d`` op's arguments (boxed as a script object), at position
    ``at`` when the op's :class:`C10dSignature` says where."""
    if at is not None and at < len(args):
        arg = args[at]
        return dist.ProcessGroup.unbox(arg) if type(arg) is torch._C.ScriptObject else arg
    for arg in args:
        if isinstance(arg, dist.ProcessGroup):
            return arg
        if type(arg).__name__ == "ScriptObject":
            try:
                return dist.ProcessGroup.unbox(arg)
            except RuntimeError:  # another script object: a ReduceOp
                continue
    return world_group()


def c10d_tensors(args: tuple) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(inputs, outputs) of a ``c10d`` op: its first argument is written (the outputs, or the
    tensors reduced in place); a second tensor argument, when there is one, is read."""
    first = args[0] if args else None
    outputs = [first] if isinstance(first, torch.Tensor) else tensors_in(first)
    second = args[1] if len(args) > 1 else None
    if isinstance(second, torch.Tensor):
        return [second], outputs
    return tensors_in(second) or outputs, outputs


def c10d_root(op: str, args: tuple) -> int | None:
    """A ``c10d`` broadcast's root, as a rank of its group (None for every other op)."""
    if op == "broadcast" and len(args) > 2 and isinstance(args[2], int):
        return args[2]
    return None


def work_of(out: Any) -> dist.Work | None:
    """The Work a ``c10d`` op returned (boxed as a script object), or None.

    NCCL returns no Work object for some calls (``Work.unbox`` gives None): since torch 2.8 every
    synchronous call (``async_op=False``), which ran on the caller's current stream, and coalesced
    calls. Observers time the synchronous ones by CUDA events on that stream
    (:mod:`.timing`)."""
    for item in out if isinstance(out, (tuple, list)) else (out,):
        if type(item).__name__ == "ScriptObject":
            try:
                work = dist.Work.unbox(item)
            except RuntimeError:
                continue
            if work is not None:
                return work
    return None


def group_label(group: dist.ProcessGroup) -> str:
    """How ``group`` is named in the events of collviz's own programs: ``world``; else its
    description (a device mesh's ``mesh_dp``), or ``group N`` after its name when it has none
    (``new_group()`` says ``undefined`` for every group, which would merge them). A user's script's
    groups are named as torch's Flight Recorder names them (:mod:`.group_names`)."""
    if group is dist.group.WORLD or group == dist.group.WORLD:
        return WORLD
    description = getattr(group, "group_desc", "")
    return description if description and description != "undefined" else f"group {group.group_name}"


class CallSizes(NamedTuple):
    """What one call moves, read from its tensors: this rank's input element count, bytes in and
    out, and the dtype (of the first tensor)."""

    elements: int
    """This rank's input element count (not ``count``: that name is tuple's method)."""
    bytes_in: int
    bytes_out: int
    dtype: str


def call_sizes(inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> CallSizes:
    """The sizes of a call reading ``inputs`` and writing ``outputs``."""
    sample = inputs[0] if inputs else outputs[0] if outputs else None
    return CallSizes(sum(t.numel() for t in inputs), nbytes(inputs), nbytes(outputs),
                     dtype_name(sample.dtype if sample is not None else torch.get_default_dtype()))


def call_fields(op: str, group: str, members: list[int], sizes: CallSizes, reduce_op: str | None,
                root: int | None) -> dict:
    """The fields of a ``Collective`` event describing one call, but its phase and number: op,
    group (its label and global ranks, ``members``), dtype, element count, bytes in and out, S of
    the nccl-tests formulas, reduce op and root (given as a rank of the group; a global rank)."""
    return dict(
        op=op, group=group, group_ranks=members, dtype=sizes.dtype, count=sizes.elements, bytes_in=sizes.bytes_in,
        bytes_out=sizes.bytes_out,
        algo_bytes=(algo_bytes(op, len(members), sizes.bytes_in, sizes.bytes_out) if op in BUS_FACTOR_OPS
                    else sizes.bytes_in),
        reduce_op=reduce_op, root=None if root is None else members[root],
    )
