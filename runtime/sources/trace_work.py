"""A profiler trace's calls and the work that timed them.

:mod:`.profiler` reads each rank's calls (:class:`Pending`, in a :class:`RankCalls`); each call's
own time is then the work's: an NCCL kernel linked to it by ``External id`` (torch 2.1 on,
:func:`time_by_kernels`), else the first unused work slice of a compatible op that starts after
it (:func:`time_by_work`): gloo's work on its worker threads (:func:`gloo_works`), NCCL's kernels
by the op their name says (:func:`kernels_of`, :func:`by_op`). A duration that cannot be is
counted as damaged input and left out. Also the checked readers of a slice's fields
(:func:`args_of`, :func:`list_arg`, :func:`external_id`).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import cast

import msgspec

from ..reports.nccl_log import NCCL_OPS
from .names import dtype_name, itemsize, op_name
from .plausible import duration_ok
from .run import Call

__all__ = ["Pending", "RankCalls", "args_of", "external_id", "list_arg", "time_by_kernels", "time_by_work",
           "gloo_works", "kernels_of", "by_op"]

_RUNS_AS = {"reduce_scatter": {"reduce_scatter", "all_reduce"}, "all_to_all": {"all_to_all", "sendrecv"}}
"""Work a call may run as, beyond its own op: torch 2.13's gloo reduce-scatters by all-reducing,
NCCL runs an all-to-all as a SendRecv kernel."""

_KERNEL = re.compile(r"^nccl(?:Dev)?Kernel_(?P<op>[A-Za-z]+)")


@dataclass
class Pending:
    """One call as first read, before its time and element type are settled: ``call`` has no byte
    counts yet, ``out_count`` its output elements; ``external_id`` and ``seq_key`` pair it with its
    NCCL kernel; ``timed_by`` names what timed it."""

    call: Call
    ts_us: float
    out_count: int
    external_id: int | None = None
    seq_key: tuple[str, int] | None = None
    timed_by: str = ""

    def settle(self, dtype: str | None = None) -> None:
        """Take ``dtype`` where the call's own is unknown, and count its bytes."""
        chosen = dtype if dtype and self.call.dtype == "unknown" else self.call.dtype
        size = itemsize(chosen) or 0
        self.call = msgspec.structs.replace(self.call, dtype=chosen, bytes_in=self.call.count * size, bytes_out=self.out_count * size)


@dataclass
class RankCalls:
    """What one rank's trace gave: its calls in issue order and how they were timed."""

    rank: int
    world: int
    backend: str
    calls: list[Pending] = field(default_factory=list)
    gpu: bool = False
    damaged: Counter[str] = field(default_factory=Counter)
    """Values that cannot be (a zero or negative duration, a size beyond any device), by what they are."""
    nccl_version: str = ""
    """The NCCL version its ``distributedInfo`` names (torch writes it on NCCL), or empty."""


def args_of(event: dict) -> dict:
    """The slice's ``args``; empty where it has none or they are not an object."""
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def external_id(args: dict) -> int | None:
    """The ``External id`` linking a CPU row and its kernel, where it is a number."""
    value = args.get("External id")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def list_arg(args: dict, key: str) -> list:
    """``args[key]`` where it is a list, else an empty one."""
    value = args.get(key)
    return value if isinstance(value, list) else []


def time_by_kernels(rank: RankCalls, kernels: list[dict]) -> list[dict]:
    """Each call's own GPU time from its NCCL kernel, linked by ``External id`` (else by group and
    ``Seq``); returns the kernels left unpaired."""
    by_external = {p.external_id: p for p in rank.calls if p.external_id is not None}
    by_seq = {p.seq_key: p for p in rank.calls if p.seq_key is not None}
    unpaired = []
    for kernel in kernels:
        args = args_of(kernel)
        external = external_id(args)
        pending = by_external.get(external) if external is not None else None
        if pending is None and isinstance(args.get("Seq"), int):
            pending = by_seq.get((str(args.get("Process Group Name", "")), args["Seq"]))
        if pending is None or pending.timed_by:
            unpaired.append(kernel)
            continue
        _time(rank, pending, kernel, "NCCL kernel")
    return unpaired


def _time(rank: RankCalls, pending: Pending, work: dict, source: str) -> None:
    """Time ``pending`` by ``work`` (its gloo work slice or NCCL kernel): its start and, where it can
    be one, its duration; an impossible duration is counted as damaged and left out."""
    took = work["dur"] * 1000
    if not duration_ok(took):
        rank.damaged["with a zero, negative or impossible duration (shown untimed)"] += 1
    pending.call = msgspec.structs.replace(pending.call, t_ns=int(work["ts"] * 1000),
                           duration_ns=int(took) if duration_ok(took) else None)
    pending.timed_by = source


def gloo_works(slices: list[dict]) -> dict[str, list[dict]]:
    """gloo's work slices (``gloo:all_reduce`` on its worker threads) by op."""
    works: dict[str, list[dict]] = defaultdict(list)
    for event in slices:
        if event["name"].startswith("gloo:"):
            works[op_name(event["name"])].append(event)
    return works


def kernels_of(slices: list[dict]) -> list[dict]:
    """NCCL's kernels: ``ncclKernel_AllReduce_RING_LL_Sum_float`` up to torch 2.0's NCCL,
    ``ncclDevKernel_AllGather_RING_LL`` since."""
    return [e for e in slices if _KERNEL.match(e["name"]) and e.get("cat") in ("kernel", "Kernel", None)]


def by_op(kernels: list[dict]) -> dict[str, list[dict]]:
    """Kernels by the op their name says (a ``SendRecv`` kernel runs an all-to-all)."""
    works: dict[str, list[dict]] = defaultdict(list)
    for kernel in kernels:
        op = cast(re.Match[str], _KERNEL.match(kernel["name"]))["op"]
        works[NCCL_OPS.get(op, op.lower())].append(kernel)
    return works


def time_by_work(rank: RankCalls, works: dict[str, list[dict]], source: str) -> None:
    """Pair each call not yet timed, in issue order, with the first unused work slice (gloo's work,
    an NCCL kernel) of a compatible op that starts after it: its time, and its element type where
    the call has none, are the call's. (Calls and slices both go by start time, so a slice passed
    over for one call is earlier than every later call too.)"""
    next_of: Counter[str] = Counter()
    for pending in rank.calls:
        if pending.timed_by:
            continue
        heads = []
        for op in _RUNS_AS.get(pending.call.op, {pending.call.op}):
            queue = works.get(op, [])
            while next_of[op] < len(queue) and queue[next_of[op]]["ts"] < pending.ts_us:
                next_of[op] += 1
            if next_of[op] < len(queue):
                heads.append((queue[next_of[op]]["ts"], op))
        if not heads:
            pending.settle()
            continue
        op = min(heads)[1]
        work = works[op][next_of[op]]
        next_of[op] += 1
        kinds = list_arg(args_of(work), "Input type")
        _time(rank, pending, work, source)
        pending.settle(dtype_name(kinds[0]) if kinds and isinstance(kinds[0], str) and kinds[0] else None)
