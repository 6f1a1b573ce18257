"""torch.profiler traces, one per rank: every collective call with its sizes, group and own time.

``prof.export_chrome_trace(f"trace_{rank}.json")`` (or ``tensorboard_trace_handler``, gzip or not)
writes Chrome trace-event JSON whose ``distributedInfo`` names the backend, the rank, the world size
and, since torch 2.1, the process groups the rank belongs to (``pg_config``: name, description,
ranks). Its calls, by what each torch records:

- torch 2.1 on, NCCL: ``record_param_comms`` rows (``Collective name``, ``dtype``, ``In msg nelems``,
  ``Out msg nelems``, ``Process Group Name``/``Description``/``Ranks``, ``Seq``) and the NCCL
  kernels (``ncclDevKernel_…``), paired by ``External id`` (else by group and ``Seq``, else by op in
  order), whose own GPU time is the call's;
- every backend and torch 1.13 on: the dispatcher's ``c10d::allreduce_``, ``c10d::_allgather_base_`` …
  slices with ``Input Dims`` and ``Input type`` (``record_shapes=True``); where a tensor list's
  shapes are not recorded (torch ≤ 2.0) the ``nccl:all_reduce`` slice inside gives the input's, and
  an ``nccl:`` slice outside any (torch 1.13's all-to-all) is a call of its own. torch ≤ 2.0 names
  no groups: calls are shown on the default group, and said so. These slices time only the
  enqueueing; each call's time is the work's, paired in order with a work slice of its op:
- gloo: its worker threads' ``gloo:all_reduce`` … slices, the work itself (which includes waiting
  for the other ranks), which also give the element type; on torch 2.13 gloo runs
  ``reduce_scatter_tensor`` as an all-reduce, named so. A rank in several groups has its calls
  shown on the default group, with a warning, and calls are then not compared across ranks;
- NCCL up to torch 2.0: its ``ncclKernel_AllReduce_RING_LL_Sum_float`` … kernels (an all-to-all
  runs as ``SendRecv``), whose ``External id`` is not the CPU row's.

The NCCL paths are written from torch's documented trace format and the traces of Holistic Trace
Analysis' test data, and labelled *not verified here (no GPU)*: the machines this was built on
have none. A value that cannot be (a zero or negative duration, a size beyond any device) is
damaged input, warned and not shown (:mod:`.plausible`).

Collectives a rank made outside c10d (vLLM's custom all-reduce, symmetric memory) are no c10d
call: each rank's are listed in a warning, by name, with their count and time (:mod:`.outside_c10d`).

Each call's ``algo_bytes`` is S of the nccl-tests formulas for its group's size, so the summary and
the cost pane give algbw and busbw with the formula (:mod:`~..observation.metrics`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import TypeGuard, cast

from ..errors import UsageError
from ..observation.metrics import BUS_FACTOR_OPS
from ..observation.rank_lists import ranks_text
from .names import P2P_OPS, dtype_name, op_name, parse_ranks
from .outside_c10d import outside_c10d, outside_text
from .plausible import MAX_RANKS, bytes_ok, rank_ok
from .run import (
    Call,
    ImportedRun,
    Origin,
    Progress,
    Step,
    build_run,
    group_label,
    no_progress,
    order_steps,
)

from .trace_work import (
    Pending,
    RankCalls,
    args_of,
    by_op,
    external_id,
    gloo_works,
    kernels_of,
    list_arg,
    time_by_kernels,
    time_by_work,
)

__all__ = ["ProfilerTrace", "GPU_LABEL", "is_profiler_trace", "import_traces"]

GPU_LABEL = "not verified here (no GPU)"
"""How every figure read from ``record_param_comms`` rows and NCCL kernels is labelled."""

_C10D_ARGS: dict[str, tuple[int | None, int | None, int | None]] = {
    # c10d op → positions of (its input tensors, its output tensors, its root) in the op's schema;
    # None: not recorded (a list of lists) or not there
    "c10d::allreduce_": (0, 0, None), "c10d::allreduce_coalesced_": (0, 0, None),
    "c10d::broadcast_": (0, 0, 2), "c10d::reduce_": (0, 0, 3),
    "c10d::allgather_": (1, None, None), "c10d::allgather_coalesced_": (1, None, None),
    "c10d::_allgather_base_": (1, 0, None), "c10d::allgather_into_tensor_coalesced_": (1, 0, None),
    "c10d::reduce_scatter_": (None, 0, None), "c10d::_reduce_scatter_base_": (1, 0, None),
    "c10d::reduce_scatter_tensor_coalesced_": (1, 0, None),
    "c10d::alltoall_base_": (1, 0, None), "c10d::alltoall_": (1, 0, None),
    "c10d::gather_": (1, None, 3), "c10d::scatter_": (None, 0, 3), "c10d::barrier": (0, None, None),
    "c10d::send": (0, None, None), "c10d::recv_": (0, None, None),
}

_KNOWN_OPS = BUS_FACTOR_OPS | {"barrier"}

_LARGEST = 2**53
"""Past this a trace's time (µs) is not one it can hold."""


@dataclass(frozen=True)
class ProfilerTrace:
    """One rank's trace: the file it came from and its decoded JSON."""

    path: Path
    content: dict


def is_profiler_trace(content: object) -> TypeGuard[dict]:
    """Whether decoded JSON is a torch.profiler trace of a distributed job."""
    return (isinstance(content, dict) and isinstance(content.get("traceEvents"), list)
            and isinstance(content.get("distributedInfo"), dict))


def _num(value: object, largest: float = 1e300) -> float | None:
    """A number of a trace (below ``largest`` in size: a time stays below 2^53 µs), else None."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not -largest < value < largest:
        return None
    return float(value)


def _slices(content: dict) -> list[dict]:
    """Complete events (``ph: X``) with a name, a start and a duration, by start time."""
    found = [e for e in content["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"
             and isinstance(e.get("name"), str) and _num(e.get("ts"), _LARGEST) is not None
             and _num(e.get("dur"), _LARGEST) is not None]
    return sorted(found, key=lambda e: e["ts"])


def _groups(info: dict) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The rank's groups from ``distributedInfo.pg_config``: name → (label, ranks)."""
    groups = {}
    configs = info.get("pg_config")
    for config in configs if isinstance(configs, list) else []:
        if isinstance(config, dict) and isinstance(config.get("pg_name"), str):
            ranks = parse_ranks(config.get("ranks")) or ()
            groups[config["pg_name"]] = (group_label(config["pg_name"], str(config.get("pg_desc") or "")), ranks)
    return groups


def _tensor_count(dims: object, kind: object) -> tuple[int | None, str]:
    """(elements, element type) of one recorded argument: a tensor, a tensor list, or unrecorded."""
    if kind == "TensorList" and isinstance(dims, list) and dims and all(_shape(d) for d in dims):
        return sum(prod(d) for d in dims), ""
    if isinstance(kind, str) and kind and kind not in ("Scalar", "ScalarList", "TensorList") and _shape(dims):
        return prod(cast(list[int], dims)), dtype_name(kind)
    return None, ""


def _shape(dims: object) -> bool:
    """Whether ``dims`` is a tensor's shape: a list of sizes (whole numbers, none negative)."""
    return isinstance(dims, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims)


def _c10d_call(rank: RankCalls, event: dict, group: tuple[str, tuple[int, ...]], seq: int,
               annotation: dict | None) -> Pending | None:
    """The call a ``c10d::`` slice made, its sizes from its ``Input Dims``, else from those of the
    backend's own slice inside it (``nccl:all_reduce``: torch 1.13–2.0 record no shapes of a
    c10d op's tensor list)."""
    inputs, outputs, root_at = _C10D_ARGS[event["name"]]
    args = args_of(event)
    dims, kinds, concrete = (list_arg(args, key) for key in ("Input Dims", "Input type", "Concrete Inputs"))

    def argument(at: int | None) -> tuple[int | None, str]:
        return _tensor_count(dims[at], kinds[at]) if at is not None and at < min(len(dims), len(kinds)) else (None, "")

    count, dtype = argument(inputs)
    out, out_dtype = argument(outputs)
    if count is None and out is None and annotation is not None:
        count, dtype = _annotated_input(annotation)
    root = concrete[root_at] if root_at is not None and root_at < len(concrete) else None
    return _sized_call(rank, op_name(event["name"]), group, seq, event["ts"], (count, dtype), (out, out_dtype),
                       int(root) if isinstance(root, str) and root.isdigit() and rank_ok(int(root[:7]), rank.world)
                       else None)


def _annotated_input(annotation: dict) -> tuple[int | None, str]:
    """(elements, element type) of the input a backend's slice (``nccl:all_reduce``) records."""
    args = args_of(annotation)
    dims, kinds = list_arg(args, "Input Dims"), list_arg(args, "Input type")
    return _tensor_count(dims[0], kinds[0]) if dims and kinds else (None, "")


def _sized_call(rank: RankCalls, op: str, group: tuple[str, tuple[int, ...]], seq: int, ts: float,
                given: tuple[int | None, str], taken: tuple[int | None, str], root: int | None) -> Pending | None:
    """A call with its input and output elements, either derived from the other where only one was
    recorded (an all-gather's output is n inputs, a reduce-scatter's input n outputs)."""
    (count, dtype), (out, out_dtype) = given, taken
    n = len(group[1]) or rank.world
    if count is None and out is not None:
        count = out * n if op in ("reduce_scatter", "scatter") else out
    if out is None and count is not None:
        out = count * n if op in ("all_gather", "gather") else count // n if op in ("reduce_scatter", "scatter") else count
    if count is None or out is None:
        return None
    call = Call(rank=rank.rank, group=group[0], group_ranks=group[1], group_seq=seq, op=op,
                dtype=dtype or out_dtype or "unknown", count=count, bytes_in=0, bytes_out=0, t_ns=int(ts * 1000), root=root)
    return Pending(call, ts, out)


def _param_comms_call(rank: RankCalls, args: dict, groups: dict, counters: Counter, ts: float) -> Pending | None:
    """The call a ``record_param_comms`` row describes (GPU path, not verified here)."""
    op = op_name(str(args.get("Collective name", "")))
    name = str(args.get("Process Group Name", ""))
    label, ranks = groups.get(name, (group_label(name, str(args.get("Process Group Description") or "")), ()))
    ranks = parse_ranks(args.get("Process Group Ranks")) or ranks
    size = _num(args.get("Group size"))
    if not ranks and size and 0 < size <= rank.world and _num(args.get("Global rank start")) is not None:
        start, stride = int(args["Global rank start"]), int(_num(args.get("Global rank stride")) or 1)
        ranks = tuple(start + i * stride for i in range(int(size)))
    if ranks and not (rank_ok(ranks[0], rank.world) and rank_ok(ranks[-1], rank.world)):
        rank.damaged[f"on a group naming a rank beyond the job's {rank.world} (its ranks taken as unknown)"] += 1
        ranks = ()
    counters[name] += 1
    seq = args.get("Seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        seq = counters[name]  # from #1, as torch's own Seq (the group's sequence number + 1)
    count, out = _num(args.get("In msg nelems")), _num(args.get("Out msg nelems"))
    if count is None:
        return None
    call = Call(rank=rank.rank, group=label, group_ranks=ranks, group_seq=seq, op=op,
                dtype=dtype_name(str(args.get("dtype") or "unknown")), count=int(count), bytes_in=0, bytes_out=0,
                t_ns=int(ts * 1000))
    pending = Pending(call, ts, int(out if out is not None else count), external_id(args), (name, seq))
    pending.settle()
    return pending


def _read_param_comms(rank: RankCalls, slices: list[dict], groups: dict, skipped: Counter) -> None:
    counters: Counter[str] = Counter()
    for event in slices:
        args = args_of(event)
        if event["name"] != "record_param_comms" or op_name(str(args.get("Collective name", ""))) not in _KNOWN_OPS:
            if event["name"] == "record_param_comms" and op_name(str(args.get("Collective name", ""))) in P2P_OPS:
                skipped["point-to-point"] += 1
            continue
        pending = _param_comms_call(rank, args, groups, counters, event["ts"])
        if pending is None:
            skipped["without sizes"] += 1
        elif _plausible(rank, pending):
            rank.calls.append(pending)


def _plausible(rank: RankCalls, pending: Pending) -> bool:
    """Whether the call's sizes can be (else it is counted as damaged input, not shown)."""
    if bytes_ok(pending.call.count) and bytes_ok(pending.out_count):
        return True
    rank.damaged["with a size beyond any device (left out)"] += 1
    return False


def _read_c10d(rank: RankCalls, slices: list[dict], groups: dict, skipped: Counter, warnings: list[str]) -> bool:
    """Calls from ``c10d::`` slices and from NCCL's own ``nccl:`` slices outside them (torch 1.13
    records an all-to-all only so); returns whether their groups were known (not assumed)."""
    default = next((g for name, g in groups.items() if name == "0" or g[0].endswith("(default_pg)")),
                   ("0 (default_pg)", tuple(range(rank.world))))
    known = len(groups) <= 1
    group = next(iter(groups.values())) if len(groups) == 1 else default
    if not known:
        warnings.append(f"rank {rank.rank} belongs to groups {', '.join(g[0] for g in groups.values())} and its "
                        f"c10d slices do not name theirs ({rank.backend} records no record_param_comms): its calls "
                        f"are shown on group {default[0]}, and calls are not compared across ranks")
    made = [e for e in slices if e["name"] in _C10D_ARGS or e["name"].startswith("nccl:")]
    nested = _nested(made)
    seq = 1  # numbered from #1 on the group, as Flight Recorder and torch's own Seq number calls
    for event in made:
        if event["name"].startswith("nccl:") and id(event) in nested["inner"]:
            continue  # the backend's record of a c10d call already read
        if op_name(event["name"]) in P2P_OPS:
            skipped["point-to-point"] += 1
            continue
        if event["name"] in _C10D_ARGS:
            pending = _c10d_call(rank, event, group, seq, nested["outer"].get(id(event)))
        else:
            pending = _sized_call(rank, op_name(event["name"]), group, seq, event["ts"], _annotated_input(event),
                                  (None, ""), None)
        if pending is None:
            skipped["without recorded shapes (record_shapes=True records them)"] += 1
            continue
        seq += 1
        if _plausible(rank, pending):
            rank.calls.append(pending)
    if not groups and rank.calls:
        warnings.append(f"rank {rank.rank}'s trace names no process groups (torch before 2.1 records none): its calls "
                        f"are shown on group {default[0]}")
    return known


def _nested(made: list[dict]) -> dict[str, dict]:
    """Which ``nccl:`` slices lie inside a ``c10d::`` slice of the same thread: ``outer`` maps the
    c10d slice's id to its first such slice, ``inner`` holds theirs."""
    outer: dict[int, dict] = {}
    inner: dict[int, dict] = {}
    open_calls: dict[tuple[int | str | None, ...], dict] = {}
    for event in made:
        thread = tuple(v if isinstance(v, (int, str)) else None for v in (event.get("pid"), event.get("tid")))
        if event["name"] in _C10D_ARGS:
            open_calls[thread] = event
            continue
        around = open_calls.get(thread)
        if around is not None and event["ts"] <= around["ts"] + around["dur"] and id(around) not in outer:
            outer[id(around)] = event
            inner[id(event)] = around
    return {"outer": outer, "inner": inner}


def _read_rank(trace: ProfilerTrace, warnings: list[str]) -> tuple[RankCalls, bool, int]:
    """One rank's calls, whether their groups are known, and how many collectives it made outside c10d."""
    info = trace.content["distributedInfo"]
    rank_number, world = info.get("rank"), info.get("world_size")
    if (not isinstance(rank_number, int) or not isinstance(world, int) or world > MAX_RANKS
            or not rank_ok(rank_number, world)):
        raise UsageError(f"{trace.path}: distributedInfo has no valid rank and world_size (at most {MAX_RANKS:,} ranks)")
    rank = RankCalls(rank_number, world, str(info.get("backend") or "unknown"),
                     nccl_version=str(info.get("nccl_version") or ""))
    slices = _slices(trace.content)
    groups = _groups(info)
    for name, (label, members) in list(groups.items()):
        if members and not rank_ok(members[-1], world):
            warnings.append(f"rank {rank_number}: group {label} names rank {members[-1]} of a {world}-rank job: "
                            "damaged input, its ranks taken as unknown")
            groups[name] = (label, ())
    skipped: Counter[str] = Counter()
    known = True
    kernels = kernels_of(slices)
    if any(e["name"] == "record_param_comms" and "Collective name" in args_of(e) for e in slices):
        rank.gpu = True  # torch 2.1 on: each call's own row, linked to its kernel
        _read_param_comms(rank, slices, groups, skipped)
        time_by_work(rank, by_op(time_by_kernels(rank, kernels)), "NCCL kernel")
    else:  # gloo, and NCCL up to torch 2.0: the dispatcher's c10d:: slices and NCCL's nccl: slices
        known = _read_c10d(rank, slices, groups, skipped, warnings)
        rank.gpu = bool(kernels)
        if rank.gpu:
            time_by_work(rank, by_op(kernels), "NCCL kernel")
        else:
            time_by_work(rank, gloo_works(slices), "gloo work slice")
    untimed = sum(1 for p in rank.calls if not p.timed_by)
    if untimed and rank.calls:
        warnings.append(f"rank {rank.rank}: {untimed} of {len(rank.calls)} calls have no time of their own in the trace "
                        "(their work slice or kernel was not found)")
    for why, n in skipped.items():
        warnings.append(f"rank {rank.rank}: {n} calls {why} are not shown")
    for why, n in rank.damaged.items():
        warnings.append(f"rank {rank.rank}: {n} calls {why}: damaged input")
    outside = outside_c10d(slices)
    if outside:
        warnings.append(outside_text(rank.rank, outside))
    return rank, known, sum(n for n, _ in outside.values())


def _narration(key: tuple[str, int], calls: list[Call], sources: dict[int, str], gpu: bool) -> str:
    members = calls[0].group_ranks
    lines = [f"torch.profiler: call #{key[1]} on group {key[0]} (ranks {ranks_text(members)})."]
    for call in sorted(calls, key=lambda c: c.rank):
        took = f"{call.duration_ns / 1e6:.3f} ms ({sources[call.rank]})" if call.duration_ns else "not timed"
        lines.append(f"r{call.rank}: {call.op}({call.dtype} ×{call.count:,}, {call.bytes_in:,} B in) {took}")
    lines.append("A trace holds sizes and times: no values, no provenance."
                 + (f" Read from record_param_comms and NCCL kernels: {GPU_LABEL}." if gpu else ""))
    return "\n".join(lines)


def import_traces(traces: Sequence[ProfilerTrace], warnings: list[str], progress: Progress = no_progress) -> ImportedRun:
    """The run these per-rank profiler traces describe (``warnings`` gains what could not be shown;
    ``progress`` is told each step built)."""
    ranks: dict[int, RankCalls] = {}
    known = True
    outside = 0
    for trace in traces:
        rank, rank_known, made_outside = _read_rank(trace, warnings)
        outside += made_outside
        known = known and rank_known
        if rank.rank in ranks:
            warnings.append(f"rank {rank.rank} has two traces: {trace.path.name} left out")
            continue
        ranks[rank.rank] = rank
    if not any(r.calls for r in ranks.values()):
        beside = (f"; they hold {outside:,} collective calls made outside torch.distributed (custom all-reduce or "
                  "symmetric memory), which no process group matches across ranks" if outside else "")
        raise UsageError(f"{traces[0].path}: the traces hold no collective calls (c10d:: slices or record_param_comms "
                         f"rows){beside}")
    world = max(r.world for r in ranks.values())
    calls = {r.rank: [p.call for p in r.calls] for r in ranks.values()}
    sources = {r.rank: next((p.timed_by for p in r.calls if p.timed_by), "") for r in ranks.values()}
    by_key: dict[tuple[str, int], list[Call]] = defaultdict(list)
    for found in calls.values():
        for call in found:
            by_key[(call.group, call.group_seq)].append(call)
    counts = {r: Counter(c.group for c in found) for r, found in calls.items()}
    for group in sorted({g for c in counts.values() for g in c}):
        per_rank = {r: c[group] for r, c in counts.items() if c[group]}
        if len(set(per_rank.values())) > 1:
            warnings.append(f"the ranks' traces hold different numbers of calls on group {group} ("
                            + ", ".join(f"r{r}: {n}" for r, n in sorted(per_rank.items())) + "): calls are matched in order")
    first_seen = {key: min(c.t_ns for c in found) for key, found in by_key.items()}
    order = order_steps({r: [(c.group, c.group_seq) for c in found] for r, found in calls.items()}, first_seen)
    gpu = any(r.gpu for r in ranks.values())
    steps = []
    for key in order:
        found = by_key[key]
        op = Counter(c.op for c in found).most_common(1)[0][0]
        steps.append(Step(name=f"{op} #{key[1]} on group {key[0]}", narration=_narration(key, found, sources, gpu),
                          calls=found, t_ns=min(c.t_ns for c in found)))
    missing = {r: "no trace of this rank" for r in range(world) if r not in ranks}
    if missing:
        warnings.append(f"no trace of rank{'s' if len(missing) > 1 else ''} {ranks_text(sorted(missing))}"
                        f" ({world} in the job)")
    backend = Counter(r.backend for r in ranks.values()).most_common(1)[0][0]
    versions = {r.nccl_version for r in ranks.values()} - {""}
    timing = (f"each call's NCCL kernel time ({GPU_LABEL})" if gpu else
              "each call's gloo work slice (the work on gloo's thread, waiting for the other ranks included)")
    origin = Origin(
        scenario="profiler",
        description=(f"torch.profiler traces of ranks {ranks_text(sorted(ranks))} ({world} in the job): one "
                     f"step per collective call, matched across ranks by group and call number; times are {timing}. "
                     "A trace holds sizes and times: no values and no provenance."),
        reason=f"{backend}, imported from torch.profiler traces: sizes and times, no values or provenance",
        backend=backend, device_kind="cuda" if gpu or backend == "nccl" else "cpu", world_size=world,
        device="cuda" if gpu else "cpu", untimed="the trace holds no work slice or kernel for it",
        not_recorded="a profiler trace holds each call's sizes and times: no values, provenance or transfers",
        nccl_version=", ".join(sorted(versions)), check_calls=known)
    return build_run(origin, steps, warnings, sorted(ranks), missing, progress)
