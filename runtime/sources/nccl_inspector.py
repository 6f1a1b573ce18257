"""NCCL Inspector output: NCCL's own profiler plugin's per-call records, opened as a collviz run.

The files (one per process, ``<NCCL_INSPECTOR_DUMP_DIR>/<hostname>-pid<pid>.log``, appended to by
a dump thread every ``NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS``) are read in every layout
NCCL writes by :mod:`.inspector_records`: one record a line, pretty-printed, or v4.3's header once
per ``dump_stats`` marker; collectives (``coll_perf``) and NCCL 2.30's sends and receives
(``p2p_perf``). What the records mean (NVIDIA/nccl ``plugins/profiler/inspector``):

- ``coll_sn`` (``p2p_sn``) is NCCL's ``comm->seqNumber[func]``: counted from 0 per communicator
  *and per operation* (AllReduce and AllGather each have a #0). collviz numbers from #1, so a call
  is ``sn + 1`` of its operation on its communicator.
- ``coll_msg_size_bytes`` is the datatype's size × NCCL's ``count`` (an all-gather's send count, a
  reduce-scatter's receive count; a send's or receive's own bytes); the execution time is the
  longest channel's kernel time (GPU clock where NCCL has it); algbw and busbw are NCCL's.
- **Sampled, not every call**: each communicator keeps a ring of its last completed calls, which
  the dump thread writes once per interval. Numbers missing between two records are calls made but
  not written, not lost ones; a rank's record of a call need not have its peers' beside it. The
  Inspector writes completed calls only: no record says a call failed or timed out.

Here the job's ranks are the largest communicator's (the world); a smaller communicator's rank is
placed by the process (file) that wrote it, where that process drives one rank of the world. A
communicator none of whose processes is placed (two equal-size communicators of separate
processes: two data-parallel replicas' files) is shown side by side, on job ranks after those
placed, and said so. As NCCL numbers calls per operation, each (communicator, operation) is one
collviz group (``0x7f8c… (all_reduce calls, 4 ranks)``), so two operations' #1 are never taken for
one call. One step per (communicator, operation, number), with every rank's record of it, a send's
or receive's as a transfer between its two ranks; its time is NCCL's execution time, its narration
NCCL's own algbw/busbw, labelled as NCCL's. The files hold no datatype, element count, values,
provenance or root. The work is linear in the records (10,000 communicators: benchmarks/inspector_scale.py).

After the job, or as a snapshot while it runs (a cut last line is warned and left out; opening
again reads what was appended since). Its pieces (:class:`Comm`, :func:`call_of`,
:func:`step_text`) also serve :mod:`collviz.runtime.live.inspector_reader`, which reads a running
job's folder as its files grow (``collviz replay --follow``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ..errors import UsageError
from ..observation.rank_lists import ranks_text
from .inspector_records import Record, records_of
from .run import Call, Hop, ImportedRun, Origin, Progress, Step, build_run, group_label, no_progress, order_steps

__all__ = ["INSPECTOR_LABEL", "REASON", "UNTIMED", "NOT_RECORDED", "OPS", "Comm", "call_of", "hop_of", "figures",
           "step_text", "import_inspector"]

INSPECTOR_LABEL = "NCCL Inspector's own figures (NCCL's kernel timing)"
"""How NCCL's measured time and bandwidths are labelled wherever they are shown."""

OPS = frozenset({"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "send", "recv"})
"""The operations collviz draws (others are left out, and said so)."""
REASON = "nccl, imported from NCCL Inspector output: sizes and NCCL's kernel times, no values or provenance"
"""The RunStart's backend line of an Inspector run."""
UNTIMED = "the Inspector wrote 0 µs for it (below its 1 µs resolution)"
"""Why an Inspector call may have no duration."""
NOT_RECORDED = "NCCL Inspector records each call's size and NCCL's time: no values, provenance or transfers"
"""Why an Inspector run shows no values."""
_WHY_SHOWN = 3
"""How many of the reading's warnings a refusal of output with no usable record names."""


@dataclass(frozen=True)
class Comm:
    """A communicator as the files show it: its id, size, name (NCCL 2.30's ``comm_name``) and
    each of its ranks' rank in the job."""

    id: str
    nranks: int
    members: dict[int, int]
    name: str = ""

    @cached_property
    def ranks(self) -> tuple[int, ...]:
        """Its ranks in the job, in order: one tuple every call on it shares."""
        return tuple(sorted(self.members.values()))

    def label(self, op: str) -> str:
        """The collviz group of ``op``'s calls on it (NCCL numbers each operation on its own):
        ``0x7f8c496ae9f661 (all_reduce calls, 4 ranks)``, its name first where NCCL wrote one."""
        named = f"{self.name}: " if self.name else ""
        return group_label(self.id, f"{named}{op} calls, {self.nranks} ranks")


@dataclass
class _Placing:
    """Communicators being placed in the job: each process's (file's) job rank, the processes of
    communicators placed so far (some drive several ranks: no one job rank), the next free rank."""

    process_rank: dict[Path, int]
    seen: set[Path]
    next_rank: int

    def place(self, comm: str, nranks: int, found: Sequence[Record], warnings: list[str]) -> Comm | None:
        """``comm`` placed by its processes' job ranks; side by side (new job ranks) where none of
        its processes has one; None (said) where only some have."""
        ranks_of: dict[Path, set[int]] = defaultdict(set)
        for r in found:
            ranks_of[r.file].add(r.rank)
        one = {next(iter(ranks)): path for path, ranks in ranks_of.items() if len(ranks) == 1}
        members = {rank: self.process_rank[path] for rank, path in one.items() if path in self.process_rank}
        name = found[0].name
        if len(members) == nranks:
            return Comm(comm, nranks, members, name)
        if members or self.seen & set(ranks_of):
            warnings.append(f"communicator {comm}: {len(members)} of its {nranks} ranks can be placed in the job "
                            "(a process with no record of the largest communicator, or one driving several GPUs): "
                            "its calls are not shown")
            return None
        first = self.next_rank
        self.next_rank += nranks
        self.seen |= set(ranks_of)
        for rank, path in one.items():
            self.process_rank[path] = first + rank
        warnings.append(f"communicator {comm} ({nranks} ranks) shares no process with those placed before it: "
                        f"shown side by side, as ranks {ranks_text(list(range(first, first + nranks)))} of the job")
        return Comm(comm, nranks, {rank: first + rank for rank in range(nranks)}, name)


def _comms(records: Sequence[Record], warnings: list[str]) -> tuple[int, dict[str, Comm]]:
    """The job's size and its communicators: the largest (the world: its ranks are the job's), then
    each other, largest first, placed by the processes of its ranks (:class:`_Placing`)."""
    by_comm: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        by_comm[r.comm].append(r)
    sizes = {comm: found[0].nranks for comm, found in by_comm.items()}
    order = sorted(by_comm, key=lambda c: (-sizes[c], -len(by_comm[c]), c))
    world = order[0]
    world_ranks: dict[Path, set[int]] = defaultdict(set)
    for r in by_comm[world]:
        world_ranks[r.file].add(r.rank)
    placing = _Placing({path: next(iter(ranks)) for path, ranks in world_ranks.items() if len(ranks) == 1},
                       set(world_ranks), sizes[world])
    comms = {world: Comm(world, sizes[world], {i: i for i in range(sizes[world])}, by_comm[world][0].name)}
    for comm in order[1:]:
        placed = placing.place(comm, sizes[comm], by_comm[comm], warnings)
        if placed is not None:
            comms[comm] = placed
    return placing.next_rank, comms


def _sizes(op: str, size: int, n: int) -> tuple[int, int]:
    """(bytes in, bytes out) of one rank from NCCL's message size (an all-gather's send bytes, a
    reduce-scatter's receive bytes; a send's bytes go out, a receive's come in)."""
    if op == "all_gather":
        return size, size * n
    if op == "reduce_scatter":
        return size * n, size
    if op == "recv":
        return 0, size
    if op == "send":
        return size, 0
    return size, size


def call_of(record: Record, comm: Comm) -> Call:
    """The collviz call of ``record``, a call on one of ``comm``'s ranks (numbered from #1)."""
    bytes_in, bytes_out = _sizes(record.op, record.size, comm.nranks)
    start = record.start_us if record.start_us is not None else record.dump_us - round(record.exec_us)
    return Call(rank=comm.members[record.rank], group=comm.label(record.op), group_ranks=comm.ranks,
                group_seq=record.sn + 1, op=record.op, dtype="not recorded", count=0, bytes_in=bytes_in,
                bytes_out=bytes_out, t_ns=start * 1000, duration_ns=round(record.exec_us * 1000) if record.exec_us else None)


def hop_of(record: Record, comm: Comm) -> Hop | None:
    """The transfer a send or receive ``record`` shows (sender → receiver, in the job's ranks), or None."""
    if record.peer is None:
        return None
    me, peer = comm.members[record.rank], comm.members[record.peer]
    src, dst = (me, peer) if record.op == "send" else (peer, me)
    return Hop(src, dst, 1, f"NCCL {record.op} (NCCL Inspector p2p record)", record.size)


def _us(exec_us: float) -> str:
    return f"{exec_us:,.0f}" if float(exec_us).is_integer() else f"{exec_us:,.1f}"


def figures(record: Record, rank: int) -> str:
    """One rank's NCCL figures: ``r0 61,974 µs, algbw 277.21 GB/s, busbw 485.12 GB/s (kernel_gpu)``."""
    channels = f", {record.channels} channels" if record.channels else ""
    peer = f" (peer r{record.peer} of the communicator)" if record.peer is not None else ""
    if not record.exec_us:
        return f"r{rank}{peer} 0 µs: below NCCL's 1 µs resolution, no bandwidth ({record.timing}{channels})"
    bw = ", ".join(f"{name} {value:,.2f} GB/s" if value is not None else f"{name} damaged"
                   for name, value in (("algbw", record.algbw), ("busbw", record.busbw)))
    return f"r{rank}{peer} {_us(record.exec_us)} µs, {bw} ({record.timing}{channels})"


def step_text(comm: Comm, sn: int, found: Sequence[tuple[Record, Call]], more: str = "") -> tuple[str, str]:
    """The name and narration of the step of call ``sn`` on ``comm`` from the records ``found`` of
    it (one per rank, by rank), NCCL's figures labelled as NCCL's; ``more`` ends the narration."""
    record, call = found[0]
    shown = [figures(r, c.rank) for r, c in found[:8]] + ([f"… {len(found) - 8} more ranks"] if len(found) > 8 else [])
    numbered = "p2p_sn" if record.peer is not None else "coll_sn"
    narration = (f"NCCL Inspector: {call.op} #{call.group_seq} on communicator {comm.id} ({numbered} {sn}: NCCL "
                 f"numbers each operation on its own), {record.size:,} B per rank. {INSPECTOR_LABEL}: " + "; ".join(shown)
                 + f". Records of ranks {ranks_text([c.rank for _, c in found])} of {comm.nranks} (the Inspector "
                 "writes each communicator's last calls once per dump interval). No values, datatype or provenance."
                 + more)
    return f"{call.op} #{call.group_seq} on {comm.id}", narration


def _steps(records: Sequence[Record], comms: dict[str, Comm]) -> list[Step]:
    """One step per (communicator, operation, number), ordered as every rank's records agree; a
    send's or receive's step shows its transfer."""
    by_key: dict[tuple[str, str, int], list[tuple[Record, Call]]] = defaultdict(list)
    ranks_of: dict[tuple[str, str, int], set[int]] = defaultdict(set)
    sequences: dict[int, list[tuple[str, str, int]]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.start_us or r.dump_us, r.sn)):
        comm = comms.get(record.comm)
        if comm is None:
            continue
        key = (record.comm, record.op, record.sn)
        call = call_of(record, comm)
        if call.rank in ranks_of[key]:
            continue  # a second record of one call on one rank says nothing new
        ranks_of[key].add(call.rank)
        by_key[key].append((record, call))
        sequences[call.rank].append(key)
    first_seen = {key: min(c.t_ns for _, c in found) for key, found in by_key.items()}
    steps = []
    for key in order_steps(dict(sequences), first_seen):
        found = sorted(by_key[key], key=lambda rc: rc[1].rank)
        comm = comms[key[0]]
        name, narration = step_text(comm, key[2], found)
        hops = {(h.src, h.dst): h for r, _ in found if (h := hop_of(r, comm)) is not None}
        steps.append(Step(name=name, narration=narration, calls=[c for _, c in found], hops=list(hops.values()),
                          t_ns=first_seen[key]))
    return steps


def _gaps(records: Sequence[Record]) -> int:
    """How many call numbers lie between the records of each (file, communicator, rank, operation):
    calls made but not written (the Inspector samples)."""
    seen: dict[tuple[Path, str, int, str], set[int]] = defaultdict(set)
    for r in records:
        seen[(r.file, r.comm, r.rank, r.op)].add(r.sn)
    return sum(max(sns) - min(sns) + 1 - len(sns) for sns in seen.values())


def _read_all(files: Sequence[tuple[Path, str]], warnings: list[str]) -> list[Record]:
    """The records collviz draws of every file (others said)."""
    records: list[Record] = []
    for path, text in files:
        records += records_of(path, text, warnings)
    others = Counter(r.op for r in records if r.op not in OPS)
    if others:
        warnings.append("calls of operations collviz does not draw left out: "
                        + ", ".join(f"{op} ×{n}" for op, n in sorted(others.items())))
    return [r for r in records if r.op in OPS]


def import_inspector(files: Sequence[tuple[Path, str]], warnings: list[str],
                     progress: Progress = no_progress) -> ImportedRun:
    """The run NCCL Inspector files describe (one per process; ``progress`` is told each step built).
    Raises :class:`~..errors.UsageError` (one line) where no line is a usable record."""
    said = len(warnings)
    records = _read_all(files, warnings)
    if not records:
        why = warnings[said:said + _WHY_SHOWN] + ([f"and {len(warnings) - said - _WHY_SHOWN} more"]
                                                 if len(warnings) - said > _WHY_SHOWN else [])
        raise UsageError(f"{files[0][0]}: NCCL Inspector output with no usable record "
                         f"({'; '.join(why) or 'every line damaged or cut'})")
    nranks, comms = _comms(records, warnings)
    steps = _steps(records, comms)
    skipped = _gaps(records)
    if skipped:
        warnings.append(f"{skipped} calls numbered between the records are not in the files: the Inspector writes each "
                        "communicator's last completed calls once per dump interval (sampled, not lost)")
    untimed = sum(1 for r in records if not r.exec_us)
    if untimed:
        warnings.append(f"{untimed} records with an execution time of 0 µs (below NCCL's 1 µs resolution): untimed")
    ranks = sorted({c.rank for s in steps for c in s.calls})
    present = set(ranks)
    missing = {r: "no NCCL Inspector record of this rank" for r in range(nranks) if r not in present}
    if missing:
        warnings.append(f"no record of rank{'s' if len(missing) > 1 else ''} {ranks_text(sorted(missing))} "
                        f"({nranks} in the job)")
    verbose = any(r.start_us is not None for r in records)
    origin = Origin(
        scenario="nccl-inspector",
        description=(f"NCCL Inspector records of ranks {ranks_text(ranks)} ({nranks} in the job): one step per call "
                     "written, with NCCL's own execution time, algbw and busbw (" + INSPECTOR_LABEL + "); a send's "
                     "or receive's step shows its transfer. "
                     + ("Calls start where NCCL's verbose trace says. " if verbose else
                        "Without NCCL_INSPECTOR_DUMP_VERBOSE=1 a call's start is not recorded: each is placed to end "
                        "at the dump that wrote it. ")
                     + "The Inspector samples calls; it records no values, datatype or provenance."),
        reason=REASON,
        backend="nccl", device_kind="cuda", world_size=nranks, device="cuda",
        untimed=UNTIMED, not_recorded=NOT_RECORDED,
        check_calls=False)
    return build_run(origin, steps, warnings, ranks, missing, progress)
