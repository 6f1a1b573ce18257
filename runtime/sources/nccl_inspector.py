"""NCCL Inspector output: NCCL's own profiler plugin's per-call records, opened as a collviz run.

The format, as NCCL's repository defines it (NVIDIA/nccl ``ext-profiler/inspector/README.md`` at
e5d9a7ae1783621fecb009b33648a8a2f8ee39f4, the writer ``inspector.cc`` at
1e0c869c39bb33f1034cb9920bd2a8a8406f04a3 and ``inspector_plugin.cc`` at e5d9a7ae):

- One file per process, ``<NCCL_INSPECTOR_DUMP_DIR>/<hostname>-pid<pid>.log`` (the folder defaults
  to ``nccl-inspector-<SLURM_JOBID>`` or ``nccl-inspector-unknown-jobid``), appended to and flushed
  by a dump thread every ``NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS``: one JSON object per
  line (``jsonNewline`` after each), so a file read while the job runs may end in a cut line.
- Each object: ``header`` {``id`` (the communicator's hash, ``0x…``), ``rank`` (in that
  communicator), ``n_ranks``, ``nnodes``}; ``metadata`` {``inspector_output_format_version``
  (``v4.0``), ``git_rev``, ``rec_mechanism``, ``dump_timestamp_us``, ``hostname``, ``pid``};
  ``coll_perf`` {``coll`` (``AllReduce``, ``AllGather``, ``ReduceScatter``, ``Broadcast``,
  ``Reduce``), ``coll_sn``, ``coll_msg_size_bytes``, ``coll_exec_time_us``, ``coll_timing_source``
  (``kernel_gpu``, ``kernel_cpu`` or ``collective_cpu``; older files lack it), ``coll_algobw_gbs``,
  ``coll_busbw_gbs``}, and with ``NCCL_INSPECTOR_DUMP_VERBOSE=1`` also ``event_trace_sn`` and
  ``event_trace_ts`` {``coll_start_ts``, ``coll_stop_ts``, ``kernel_events``: per channel
  ``channel_id``, ``kernel_start_ts``, ``kernel_stop_ts``, ``kernel_record_ts``} (µs since the epoch).
- ``coll_sn`` is NCCL's ``comm->seqNumber[func]``: counted from 0 per communicator *and per
  operation* (AllReduce and AllGather each have a #0). collviz numbers from #1, so a call is
  ``coll_sn + 1`` of its operation on its communicator.
- ``coll_msg_size_bytes`` is the datatype's size × NCCL's ``count`` (an all-gather's send count, a
  reduce-scatter's receive count); the execution time is the longest channel's kernel time (GPU
  clock where NCCL has it), in whole µs; algbw and busbw are NCCL's from those, with the
  nccl-tests factors for the communicator's ``n_ranks``.
- **Sampled, not every call**: each communicator keeps only its last completed call, and the dump
  thread writes it once per interval. Numbers missing between two records are calls made but not
  written, not lost ones; a rank's record of a call need not have its peers' beside it.

Here each rank is a communicator rank of the largest communicator (the job's world); a smaller
communicator's rank is placed by the process (file) that wrote it, where that process drives one
rank of the world. As NCCL numbers calls per operation, each (communicator, operation) is one
collviz group (``0x7f8c… (all_reduce calls, 4 ranks)``), so two operations' #1 are never taken for
one call. One step per (communicator, operation, number), with every rank's record of it;
its time is NCCL's execution time, its narration NCCL's own algbw/busbw, labelled as NCCL's. The
files hold no datatype, element count, values, provenance or root. Damaged values (sizes beyond
any device, ranks ≥ n_ranks, non-finite bandwidths) are warned and left out (:mod:`.plausible`).
The tests' files follow the documented format; none came from a real GPU run yet.

After the job, or as a snapshot while it runs (a cut last line is warned and left out; opening
again reads what was appended since). Its pieces (:func:`decode_line`, :class:`Comm`,
:func:`call_of`, :func:`step_text`) also serve :mod:`collviz.runtime.live.inspector_reader`, which
reads a running job's folder as its files grow (``collviz replay --follow``).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from ..errors import UsageError
from ..observation.rank_lists import ranks_text
from .names import op_name
from .plausible import MAX_DURATION_NS, MAX_RANKS, bytes_ok, rank_ok
from .run import Call, ImportedRun, Origin, Progress, Step, build_run, group_label, no_progress, order_steps

__all__ = ["INSPECTOR_LABEL", "REASON", "UNTIMED", "NOT_RECORDED", "OPS", "Record", "Comm", "is_inspector_record", "is_inspector_log", "decode_line",
           "call_of", "figures", "step_text", "import_inspector"]

INSPECTOR_LABEL = "NCCL Inspector's own figures (NCCL's kernel timing)"
"""How NCCL's measured time and bandwidths are labelled wherever they are shown."""

OPS = frozenset({"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"})
"""The operations collviz draws (others are left out, and said so)."""
REASON = "nccl, imported from NCCL Inspector output: sizes and NCCL's kernel times, no values or provenance"
"""The RunStart's backend line of an Inspector run."""
UNTIMED = "the Inspector wrote 0 µs for it (below its 1 µs resolution)"
"""Why an Inspector call may have no duration."""
NOT_RECORDED = "NCCL Inspector records each call's size and NCCL's time: no values, provenance or transfers"
"""Why an Inspector run shows no values."""
_SNIFF_LINES = 5
_MAX_SN = 1 << 48
"""More calls than one communicator makes: 2⁴⁸ at a million calls a second is nine years."""


def is_inspector_record(value: object) -> bool:
    """Whether ``value`` (one decoded JSON object) is an NCCL Inspector record."""
    return (isinstance(value, dict) and isinstance(value.get("header"), dict)
            and isinstance(value.get("coll_perf"), dict) and "coll" in value["coll_perf"])


def is_inspector_log(text: str) -> bool:
    """Whether ``text`` is NCCL Inspector output: one of its first non-blank lines is a record."""
    lines = [line for line in text.split("\n", _SNIFF_LINES * 4)[: _SNIFF_LINES * 4] if line.strip()][:_SNIFF_LINES]
    for line in lines:
        try:
            if is_inspector_record(msgspec.json.decode(line)):
                return True
        except (msgspec.DecodeError, RecursionError, ValueError):
            continue
    return False


@dataclass(frozen=True)
class Record:
    """One line of an Inspector file, checked: what NCCL wrote of one call on one communicator rank."""

    file: Path
    comm: str
    rank: int
    nranks: int
    op: str
    sn: int
    size: int
    exec_us: int
    timing: str
    algbw: float | None
    busbw: float | None
    start_us: int | None
    """The first channel's kernel start (verbose files), else the collective's start, else None."""
    dump_us: int
    channels: int


def _int(value: object, low: int = 0, high: int = 1 << 63) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and low <= value < high else None


def _gbs(value: object) -> float | None:
    """A bandwidth NCCL wrote, or None where it cannot be one (not a finite number ≥ 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list:
    return value if isinstance(value, list) else []


def _record(path: Path, value: object) -> Record | str:
    """The checked record in ``value``, or why it is damaged."""
    if not isinstance(value, dict) or not is_inspector_record(value):
        return "not an Inspector record"
    header, perf, meta = value["header"], value["coll_perf"], _dict(value.get("metadata"))
    nranks = _int(header.get("n_ranks"), 1, MAX_RANKS + 1)
    rank = _int(header.get("rank"))
    if nranks is None or rank is None or not rank_ok(rank, nranks):
        return "a rank or n_ranks that cannot be"
    comm, coll = header.get("id"), perf.get("coll")
    if not isinstance(comm, str) or not comm or not isinstance(coll, str):
        return "no communicator id or operation"
    sn, size = _int(perf.get("coll_sn"), 0, _MAX_SN), _int(perf.get("coll_msg_size_bytes"))
    if sn is None or size is None or not bytes_ok(size):
        return "a call number or size that cannot be"
    exec_us = _int(perf.get("coll_exec_time_us"), 0, MAX_DURATION_NS // 1000 + 1)
    if exec_us is None:
        return "an execution time that cannot be"
    trace = _dict(perf.get("event_trace_ts"))
    kernels = _list(trace.get("kernel_events"))
    starts = [t for k in kernels if isinstance(k, dict) and (t := _int(k.get("kernel_start_ts"))) is not None]
    start = min(starts) if starts else _int(trace.get("coll_start_ts"))  # the kernel's, as its time is
    return Record(path, comm, rank, nranks, op_name(coll), sn, size, exec_us, str(perf.get("coll_timing_source") or "not recorded"),
                   _gbs(perf.get("coll_algobw_gbs")), _gbs(perf.get("coll_busbw_gbs")), start,
                   _int(meta.get("dump_timestamp_us")) or 0, len(kernels))


BROKEN = "broken JSON"
"""Why :func:`decode_line` refuses a line that is not JSON (a cut last line, or garbage)."""


def decode_line(path: Path, line: str) -> Record | str:
    """The checked record on one line of ``path``, or why it is damaged (:data:`BROKEN`: not JSON)."""
    try:
        return _record(path, msgspec.json.decode(line))
    except (msgspec.DecodeError, RecursionError, ValueError):
        return BROKEN


def _read(path: Path, text: str, warnings: list[str]) -> list[Record]:
    """Every record of one file; a cut last line (the file still being written) and damaged lines
    are warned and left out."""
    records: list[Record] = []
    damaged: Counter[str] = Counter()
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        found = decode_line(path, line)
        if found == BROKEN and number == len(lines):
            warnings.append(f"{path.name}: its last line is cut short (the file was being written): left out")
            continue
        if isinstance(found, str):
            damaged[found] += 1
        else:
            records.append(found)
    for why, n in sorted(damaged.items()):
        warnings.append(f"{path.name}: {n} line{'s' if n > 1 else ''} with {why}: damaged input, left out")
    return records


@dataclass(frozen=True)
class Comm:
    """A communicator as the files show it: its id, size and each of its ranks' global rank."""

    id: str
    nranks: int
    members: dict[int, int]

    def label(self, op: str) -> str:
        """The collviz group of ``op``'s calls on it (NCCL numbers each operation on its own):
        ``0x7f8c496ae9f661 (all_reduce calls, 4 ranks)``."""
        return group_label(self.id, f"{op} calls, {self.nranks} ranks")


def _comms(records: Sequence[Record], warnings: list[str]) -> tuple[str, dict[str, Comm]]:
    """The world communicator's id, and every communicator whose ranks can all be placed in it."""
    sizes = {r.comm: r.nranks for r in records}
    count = Counter(r.comm for r in records)
    world = max(sizes, key=lambda c: (sizes[c], count[c], c))
    world_ranks: dict[Path, set[int]] = defaultdict(set)
    for r in records:
        if r.comm == world:
            world_ranks[r.file].add(r.rank)
    comms = {world: Comm(world, sizes[world], {i: i for i in range(sizes[world])})}
    for comm in sorted(set(sizes) - {world}):
        members: dict[int, int] = {}
        for r in records:
            placed = world_ranks.get(r.file, set())
            if r.comm == comm and len(placed) == 1:
                members[r.rank] = next(iter(placed))
        if len(members) < sizes[comm]:
            warnings.append(f"communicator {comm}: {len(members)} of its {sizes[comm]} ranks can be placed in the job "
                            "(a process with no record of the largest communicator, or one driving several GPUs): "
                            "its calls are not shown")
            continue
        comms[comm] = Comm(comm, sizes[comm], members)
    return world, comms


def _sizes(op: str, size: int, n: int) -> tuple[int, int]:
    """(bytes in, bytes out) of one rank from NCCL's message size (an all-gather's send bytes, a
    reduce-scatter's receive bytes)."""
    if op == "all_gather":
        return size, size * n
    if op == "reduce_scatter":
        return size * n, size
    return size, size


def call_of(record: Record, comm: Comm) -> Call:
    """The collviz call of ``record``, a call on one of ``comm``'s ranks (numbered from #1)."""
    bytes_in, bytes_out = _sizes(record.op, record.size, comm.nranks)
    start = record.start_us if record.start_us is not None else record.dump_us - record.exec_us
    return Call(rank=comm.members[record.rank], group=comm.label(record.op), group_ranks=tuple(sorted(comm.members.values())),
                group_seq=record.sn + 1, op=record.op, dtype="not recorded", count=0, bytes_in=bytes_in,
                bytes_out=bytes_out, t_ns=start * 1000, duration_ns=record.exec_us * 1000 if record.exec_us else None)


def figures(record: Record, rank: int) -> str:
    """One rank's NCCL figures: ``r0 61,974 µs, algbw 277.21 GB/s, busbw 485.12 GB/s (kernel_gpu)``."""
    channels = f", {record.channels} channels" if record.channels else ""
    if not record.exec_us:
        return f"r{rank} 0 µs: below NCCL's 1 µs resolution, no bandwidth ({record.timing}{channels})"
    bw = ", ".join(f"{name} {value:,.2f} GB/s" if value is not None else f"{name} damaged"
                   for name, value in (("algbw", record.algbw), ("busbw", record.busbw)))
    return f"r{rank} {record.exec_us:,} µs, {bw} ({record.timing}{channels})"


def step_text(comm: Comm, sn: int, found: Sequence[tuple[Record, Call]], more: str = "") -> tuple[str, str]:
    """The name and narration of the step of call ``sn`` on ``comm`` from the records ``found`` of
    it (one per rank, by rank), NCCL's figures labelled as NCCL's; ``more`` ends the narration."""
    record, call = found[0]
    shown = [figures(r, c.rank) for r, c in found[:8]] + ([f"… {len(found) - 8} more ranks"] if len(found) > 8 else [])
    narration = (f"NCCL Inspector: {call.op} #{call.group_seq} on communicator {comm.id} (coll_sn {sn}: NCCL "
                 f"numbers each operation on its own), {record.size:,} B per rank. {INSPECTOR_LABEL}: " + "; ".join(shown)
                 + f". Records of ranks {ranks_text([c.rank for _, c in found])} of {comm.nranks} (the Inspector "
                 "writes each communicator's last call once per dump interval). No values, datatype or provenance."
                 + more)
    return f"{call.op} #{call.group_seq} on {comm.id}", narration


def _steps(records: Sequence[Record], comms: dict[str, Comm]) -> list[Step]:
    """One step per (communicator, operation, number), ordered as every rank's records agree."""
    by_key: dict[tuple[str, str, int], list[tuple[Record, Call]]] = defaultdict(list)
    sequences: dict[int, list[tuple[str, str, int]]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.start_us or r.dump_us, r.sn)):
        comm = comms.get(record.comm)
        if comm is None:
            continue
        key = (record.comm, record.op, record.sn)
        call = call_of(record, comm)
        if any(c.rank == call.rank for _, c in by_key[key]):
            continue  # a second record of one call on one rank says nothing new
        by_key[key].append((record, call))
        sequences[call.rank].append(key)
    first_seen = {key: min(c.t_ns for _, c in found) for key, found in by_key.items()}
    steps = []
    for key in order_steps(dict(sequences), first_seen):
        found = sorted(by_key[key], key=lambda rc: rc[1].rank)
        name, narration = step_text(comms[key[0]], key[2], found)
        steps.append(Step(name=name, narration=narration, calls=[c for _, c in found], t_ns=first_seen[key]))
    return steps


def _gaps(records: Sequence[Record]) -> int:
    """How many call numbers lie between the records of each (file, communicator, rank, operation):
    calls made but not written (the Inspector samples)."""
    seen: dict[tuple[Path, str, int, str], set[int]] = defaultdict(set)
    for r in records:
        seen[(r.file, r.comm, r.rank, r.op)].add(r.sn)
    return sum(max(sns) - min(sns) + 1 - len(sns) for sns in seen.values())


def import_inspector(files: Sequence[tuple[Path, str]], warnings: list[str],
                     progress: Progress = no_progress) -> ImportedRun:
    """The run NCCL Inspector files describe (one per process; ``progress`` is told each step built).
    Raises :class:`~..errors.UsageError` (one line) where no line is a usable record."""
    records: list[Record] = []
    for path, text in files:
        records += _read(path, text, warnings)
    others = Counter(r.op for r in records if r.op not in OPS)
    if others:
        warnings.append("calls of operations collviz does not draw left out: "
                        + ", ".join(f"{op} ×{n}" for op, n in sorted(others.items())))
    records = [r for r in records if r.op in OPS]
    if not records:
        raise UsageError(f"{files[0][0]}: NCCL Inspector output with no usable record (every line damaged or cut)")
    world, comms = _comms(records, warnings)
    steps = _steps(records, comms)
    skipped = _gaps(records)
    if skipped:
        warnings.append(f"{skipped} calls numbered between the records are not in the files: the Inspector writes each "
                        "communicator's last completed call once per dump interval (sampled, not lost)")
    untimed = sum(1 for r in records if not r.exec_us)
    if untimed:
        warnings.append(f"{untimed} records with an execution time of 0 µs (below NCCL's 1 µs resolution): untimed")
    nranks = comms[world].nranks
    ranks = sorted({c.rank for s in steps for c in s.calls})
    missing = {r: "no NCCL Inspector record of this rank" for r in range(nranks) if r not in ranks}
    if missing:
        warnings.append(f"no record of rank{'s' if len(missing) > 1 else ''} {ranks_text(sorted(missing))} "
                        f"({nranks} in the job)")
    verbose = any(r.start_us is not None for r in records)
    origin = Origin(
        scenario="nccl-inspector",
        description=(f"NCCL Inspector records of ranks {ranks_text(ranks)} ({nranks} in the job): one step per call "
                     "written, with NCCL's own execution time, algbw and busbw (" + INSPECTOR_LABEL + "). "
                     + ("Calls start where NCCL's verbose trace says. " if verbose else
                        "Without NCCL_INSPECTOR_DUMP_VERBOSE=1 a call's start is not recorded: each is placed to end "
                        "at the dump that wrote it. ")
                     + "The Inspector samples calls; it records no values, datatype or provenance."),
        reason=REASON,
        backend="nccl", device_kind="cuda", world_size=nranks, device="cuda",
        untimed=UNTIMED, not_recorded=NOT_RECORDED,
        check_calls=False)
    return build_run(origin, steps, warnings, ranks, missing, progress)
