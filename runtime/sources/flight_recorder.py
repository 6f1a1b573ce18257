"""Flight Recorder dumps: what every rank had issued, on which group, with what sizes, and whether
it completed — then which ranks hang, where, and why.

torch's Flight Recorder (``TORCH_FR_BUFFER_SIZE=N``) keeps each rank's last N collective calls.
``torch._C._distributed_c10d._dump_fr_trace_json(True, True)`` returns them as JSON and
``_dump_fr_trace(True, True)`` as the pickle torch itself writes on a watchdog timeout
(``TORCH_FR_DUMP_TEMP_FILE`` followed by the rank: ``nccl_trace_rank_<r>``). The format (its
``version``: 2.3 with torch 2.5, 2.4, 2.7 with ``nccl_version``, 2.10 with ``comm_lib_version`` in
2.13): ``pg_config`` (group name → description, ranks), ``pg_status`` (each group's last enqueued,
started and completed call) and ``entries``: per call ``collective_seq_id``, ``profiling_name``
(``gloo:all_reduce``), ``process_group`` (name, description), input and output sizes and dtypes,
``state``, ``retired``, ``time_created_ns``, ``is_p2p``, ``duration_ms`` where timing was on, and
in pickles the call's Python ``frames``; since 2.7 a coalesced call's tensors share one sequence
number and end with a ``coalesced`` entry. Older names are read too (``seq_id``; an entry without
``time_created_ns`` or ``input_dtypes``).

A dump does not say which rank wrote it: as torch's own analyser does, the rank is the number its
file name ends with. Each dump is read into columns (:mod:`.fr_columns`: an array per field, no
object per call; a call is complete once ``retired`` or ``completed``), the job's dumps into one
table matched across ranks by (group, sequence number) (:mod:`.fr_table`), which the live run's own
hang and mismatch checks read (:mod:`.call_checks`) and the headless summary is made from
(:mod:`.table_summary`). An import of up to :data:`EVENTS_UP_TO` calls becomes every event
(:func:`~.run.build_run`); a larger one (a whole job: 1,024 ranks × 2,000 calls) gives the viewer
the events of its last steps, where the job stopped (:mod:`.fr_large`). A set of dumps is judged
as found: a rank without a dump is unknown — never a cause of a hang, never "not started" — and the verdict says
how many are missing. Real dumps disagree with themselves, and each disagreement is read and said
in a warning rather than refused: gloo keys the default group ``''`` in ``pg_config`` while its
entries name it ``'0'`` (torch's analyser raises ``KeyError`` on it), a subgroup's members may be
missing from ``pg_config``, a full buffer drops a rank's oldest calls, an entry may be missing
from the middle of a rank's sequence, lack fields or hold values that cannot be (:mod:`.plausible`).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Literal, TypeGuard, TypeVar

import numpy as np

from ..errors import UsageError
from ..observation.rank_lists import ranks_text
from .fr_alike import read_alike
from .fr_columns import DumpColumns, is_user_code, read_columns
from .fr_large import large_run
from .fr_table import JobTable, RankDump, group_identity, job_table
from .names import parse_ranks
from .plausible import MAX_RANKS, rank_ok
from .run import Call, Failed, ImportedRun, Origin, Progress, Step, build_run, group_label, no_progress
from .table_summary import TableSummary

__all__ = ["device_of_backend", "BLANK_KEY_WARNING", "UNLISTED", "Dump", "RankDump", "EVENTS_UP_TO", "is_dump", "rank_from_name", "read_content",
           "import_dumps", "import_read", "is_user_code", "read_calls"]

BLANK_KEY_WARNING = "is keyed '' in the dumps' pg_config"
"""Part of the warning that a group is keyed ``''`` in ``pg_config`` but named in the entries (every
gloo dump keys its default group so; it is read right)."""

UNLISTED = "neither its worker server nor a relay of it was read"
"""Why a rank of the job that a live reading did not even ask is not read (its server not found
when attach started, its relay not reported yet)."""

_RANK_AT_END = re.compile(r"(\d+)(?:\.[A-Za-z][A-Za-z0-9]*)*$")
_DEFAULT_NAMES = ("0", "default_pg")
EVENTS_UP_TO = 200_000
"""The most calls (call-ranks) an import turns into events one by one; a larger import is read as a
table, summarised from it, and viewed by its last steps (:mod:`.fr_large`)."""


@dataclass(frozen=True)
class Dump:
    """One rank's dump: the file it came from and its decoded content."""

    path: Path
    rank: int
    content: dict


def is_dump(content: object) -> TypeGuard[dict]:
    """Whether decoded JSON or pickle content has the shape of a Flight Recorder dump."""
    return (isinstance(content, dict) and isinstance(content.get("entries"), list) and "version" in content
            and ("pg_config" in content or "pg_status" in content))


def rank_from_name(path: Path) -> int | None:
    """The rank a dump's file name ends with (``nccl_trace_rank_3`` → 3, ``fr_2.json`` → 2), or None.
    Raises :class:`~..errors.UsageError` (one line) for a number no job's rank can be."""
    match = _RANK_AT_END.search(path.name)
    if match is None:
        return None
    digits = match.group(1).lstrip("0") or "0"
    if len(digits) > len(str(MAX_RANKS)) or not rank_ok(int(digits)):
        shown = digits if len(digits) <= 12 else f"{digits[:6]}…({len(digits)} digits)"
        raise UsageError(f"{path}: its name ends with rank {shown}, more than any job has "
                         f"(at most {MAX_RANKS:,}): not a dump's rank")
    return int(digits)


@dataclass
class _Groups:
    """Each group's members, resolved once over every dump, and the warnings that took."""

    dumps: Sequence[RankDump]
    mentions: dict[str, set[int]]
    warnings: list[str]
    not_read_yet: Mapping[int, str] = field(default_factory=dict)
    """Ranks a live reading could not read this time but will (rank → why): no group's members are
    guessed from the dumps of the others (see :meth:`members`)."""
    unknown: set[str] = field(default_factory=set)
    """The groups whose members are not known yet (a rank not read yet may be one): their calls wait."""

    @cached_property
    def _configs(self) -> list[tuple[dict[object, tuple[int, ...] | None], int]]:
        """Each ``pg_config`` the dumps hold, read, and how many dumps hold it (:func:`_by_identity`:
        a 1,024-rank reading's 1,024 configs naming 1,024 ranks each are a few, each looked at once)."""
        return [(configs, dumps) for configs, dumps in _by_identity(dump.columns.configs for dump in self.dumps)
                if configs is not None]

    def world_size(self) -> int:
        """Ranks in the job: past the highest dumped rank and the highest rank any config names."""
        highest = max(d.rank for d in self.dumps)
        for configs, _ in self._configs:
            for ranks in configs.values():
                highest = max(highest, max(ranks) if ranks else 0)
        return highest + 1

    def members(self, name: str, description: str, world: int) -> tuple[int, ...]:
        """The ranks of group ``name``: from ``pg_config`` where the dumps agree, the whole world for
        the default group, else the ranks whose dumps mention the group (each said in a warning)."""
        default = name in _DEFAULT_NAMES or description == "default_pg"
        votes: Counter[tuple[int, ...]] = Counter()
        under_blank = False
        for configs, dumps in self._configs:
            found = configs.get(name)
            if found is None and default and configs.get("") is not None:
                found = configs[""]
                under_blank = True
            if found is not None:
                votes[found] += dumps
        label = group_label(name, description)
        if under_blank:
            self.warnings.append(f"group {label} {BLANK_KEY_WARNING} but '{name}' in their entries "
                                 "(torch's own analyser fails on this): read as one group")
        if len(votes) > 1:
            self.warnings.append(f"group {label}: the dumps disagree on its ranks ("
                                 + "; ".join(f"{list(r)} in {n}" for r, n in votes.most_common()) + "): taking the most common")
        if votes:
            return votes.most_common(1)[0][0]
        if default:
            return tuple(range(world))
        seen = tuple(sorted(self.mentions.get(name, ())))
        if self.not_read_yet:  # a rank not read may be a member: a guess from the others would be wrong
            self.unknown.add(name)
            for rank, why in sorted(self.not_read_yet.items()):
                self.warnings.append(f"rank {rank} not read ({why}): group {label}'s ranks, not in the dumps' "
                                     "pg_config, are not guessed from the other ranks; its calls are shown once "
                                     "every rank is read")
            return seen
        self.warnings.append(f"group {label}: its ranks are not in the dumps' pg_config; taken as the ranks whose "
                             f"dumps mention it: {ranks_text(seen)}")
        return seen


_Shared = TypeVar("_Shared")


def _by_identity(values: Iterable[_Shared]) -> list[tuple[_Shared, int]]:
    """Each object of ``values`` once, by identity (not equality), with how many times it came, in
    the order first seen: dumps of one shape share their columns' fields (:func:`~.fr_alike.read_alike`),
    so what is worked out of such a field is worked out once per shape, not once per rank."""
    held: dict[int, tuple[_Shared, int]] = {}
    for value in values:
        counted = held.get(id(value))
        held[id(value)] = (value, counted[1] + 1 if counted is not None else 1)
    return list(held.values())


def device_of_backend(backend: str) -> Literal["cpu", "cuda"]:
    """The device a Flight Recorder job's calls ran on, as far as its backend says (a dump names no
    device): ``cuda`` for NCCL's, ``cpu`` for any other's (gloo's usual one). The header's
    ``gloo on cpu`` and each rank's panel say the same."""
    return "cuda" if backend == "nccl" else "cpu"


def _ranks(value: object) -> tuple[int, ...] | None:
    """A group's ranks as :func:`~.names.parse_ranks` reads them; None also where one is beyond any job."""
    return _ranks_of_text(value) if isinstance(value, str) else _in_a_job(parse_ranks(value))


@lru_cache(maxsize=256)
def _ranks_of_text(text: str) -> tuple[int, ...] | None:
    """:func:`_ranks` of a dump's ``"[0, 1, …]"``, read once however many dumps repeat it (every
    rank's dump names the default group's 1,024 ranks, twice)."""
    return _in_a_job(parse_ranks(text))


def _in_a_job(ranks: tuple[int, ...] | None) -> tuple[int, ...] | None:
    return ranks if ranks is None or rank_ok(ranks[-1]) else None


def _read_dump(dump: Dump) -> RankDump:
    """``dump`` read into columns (its decoded content can then go)."""
    return RankDump(dump.rank, dump.path, read_columns(dump.content, _ranks))


def read_content(content: dict) -> DumpColumns:
    """A decoded dump's calls as columns (the content can then go)."""
    return read_columns(content, _ranks)


def _narration(key: tuple[str, int], calls: list[Call]) -> str:
    """What the dumps say about one call: sizes per rank, states, where the code made it."""
    sizes: dict[str, list[int]] = defaultdict(list)
    states: dict[str, list[int]] = defaultdict(list)
    for call in sorted(calls, key=lambda c: c.rank):
        out = f" → {call.bytes_out:,} B out" if call.bytes_out != call.bytes_in else ""
        sizes[f"{call.op}({call.dtype} ×{call.count}, {call.bytes_in:,} B in{out})"].append(call.rank)
        states["completed" if call.completed else "still inside when the dump was taken"].append(call.rank)
    members = calls[0].group_ranks
    present = {c.rank for c in calls}
    absent = [r for r in members if r not in present]
    lines = [f"Flight Recorder: call #{key[1]} on group {key[0]} (ranks {ranks_text(members)})."]
    lines += [f"{text} on rank{'s' if len(r) > 1 else ''} {ranks_text(r)}" for text, r in sizes.items()]
    lines += [f"{text}: rank{'s' if len(r) > 1 else ''} {ranks_text(r)}" for text, r in states.items()]
    if absent:
        lines.append(f"not in the dumps of rank{'s' if len(absent) > 1 else ''} {ranks_text(absent)}")
    places = sorted({c.where for c in calls if c.where})
    if places:
        lines.append("called at " + "; ".join(places))
    lines.append("A dump holds sizes and states: no values, no provenance"
                 + ("." if any(c.duration_ns for c in calls) else ", no durations."))
    return "\n".join(lines)


def steps_of(job: JobTable, indices: Sequence[int]) -> list[Step]:
    """The steps ``indices`` of ``job`` with a :class:`~.run.Call` per rank (their events' source)."""
    starts = job.table.step_starts()
    steps = []
    for index in indices:
        calls = _calls(job, range(int(starts[index]), int(starts[index + 1])))
        name = job.step_names[index]
        key = (calls[0].group, calls[0].group_seq)
        steps.append(Step(name=name, narration=_narration(key, calls), calls=calls, t_ns=int(job.step_t_ns[index])))
    return steps


def _calls(job: JobTable, rows: range) -> list[Call]:
    """The calls at ``rows`` (consecutive) of ``job``'s table, one :class:`~.run.Call` each (the
    columns read as lists once: a numpy element read one by one costs ten times a list's)."""
    table = job.table
    part = slice(rows.start, rows.stop)
    columns = [column[part].tolist() for column in (table.rank, table.group, table.seq, table.op, table.dtype,
                                                    table.count, table.bytes_in, table.bytes_out, table.t_ns,
                                                    table.duration_ns, table.completed, table.where)]
    ids, backends = table.group_ids, table.backends
    return [Call(rank=rank, group=table.groups[group], group_ranks=table.members[group], group_seq=seq,
                 op=table.ops[op], dtype=table.dtypes[dtype], count=count, bytes_in=bytes_in, bytes_out=bytes_out,
                 t_ns=t_ns, duration_ns=duration if duration > 0 else None, completed=completed,
                 where=table.places[where], group_id=ids[group] if ids else "", backend=backends[group] if backends else "")
            for rank, group, seq, op, dtype, count, bytes_in, bytes_out, t_ns, duration, completed, where in zip(*columns)]


def import_dumps(dumps: Sequence[Dump], warnings: list[str], progress: Progress = no_progress) -> ImportedRun:
    """The run these per-rank decoded dumps describe (one dump per rank): :func:`import_read` of
    each read into columns."""
    if not dumps:
        raise UsageError("no Flight Recorder dump to open")
    return import_read([_read_dump(dump) for dump in dumps], warnings, progress)


def import_read(dumps: Sequence[RankDump], warnings: list[str], progress: Progress = no_progress) -> ImportedRun:
    """The run these per-rank dumps, read into columns, describe (one per rank; ``warnings`` gains
    what could not be matched or shown; ``progress`` is told each dump taken and each step built).
    Exit status 1 when ranks hang or disagree, as for a live run."""
    if not dumps:
        raise UsageError("no Flight Recorder dump to open")
    for done, dump in enumerate(dumps):
        progress("reading calls", done, len(dumps))
        columns = dump.columns
        if columns.version_note:
            warnings.append(f"rank {dump.rank} ({dump.path.name}): {columns.version_note}")
        warnings.extend(f"rank {dump.rank}: {note}" for note in columns.notes)
    progress("reading calls", len(dumps), len(dumps))
    if not any(len(dump.columns) for dump in dumps):
        raise UsageError(f"{dumps[0].path}: the dumps hold no collective calls (is TORCH_FR_BUFFER_SIZE "
                         "set in the job?)")
    job, world, _ = _job(dumps, warnings)
    ranks = sorted({dump.rank for dump in dumps})
    missing = {r: "no dump of this rank" for r in range(world) if r not in ranks}
    if missing:
        warnings.append(f"no dump of rank{'s' if len(missing) > 1 else ''} {ranks_text(sorted(missing))} "
                        f"(the dumps name {world} ranks): what {'they' if len(missing) > 1 else 'it'} did is unknown")
    origin = _origin(dumps, job, ranks, world)
    if len(job.table) > EVENTS_UP_TO:
        return large_run(origin, job, warnings, ranks, missing, steps_of, EVENTS_UP_TO)
    run = build_run(origin, steps_of(job, range(job.table.step_count)), warnings, ranks, missing, progress)
    return replace(run, summary=TableSummary.of(job.table, job.step_names, run.events))  # the headless one: no event pass


def _job(dumps: Sequence[RankDump], warnings: list[str], not_read_yet: Mapping[int, str] | None = None,
         ended: Collection[int] = ()) -> tuple[JobTable, int, _Groups]:
    """The calls of ``dumps`` matched across ranks (each group resolved once: :class:`_Groups`, not
    guessed while a rank not read may be a member: one of ``not_read_yet``, or, in a live reading
    (``not_read_yet`` given), any rank of the job neither read nor ``ended``), the job's world
    size, and the groups."""
    mentions: dict[str, set[int]] = defaultdict(set)
    named_by: dict[tuple[int, int, int], set[str]] = {}
    """The groups a dump names, by the identity of the columns they come from (:func:`_by_identity`)."""
    for dump in dumps:
        columns = dump.columns
        named = named_by.get(shared := (id(columns.groups), id(columns.group), id(columns.status_groups)))
        if named is None:
            named = named_by[shared] = {columns.groups[g][0] for g in set(columns.group.tolist())}
            if named <= set(columns.status_groups):  # else its pg_status numbers groups its own way (gloo's)
                named.update(columns.status_groups)
        for name in named:
            mentions[name].add(dump.rank)
    groups = _Groups(dumps, mentions, warnings, not_read_yet or {})
    world = groups.world_size()
    if not_read_yet is not None:
        read = {dump.rank for dump in dumps}
        groups.not_read_yet = {**{rank: UNLISTED for rank in range(world) if rank not in read and rank not in ended},
                               **not_read_yet}
    job = job_table(dumps, lambda name, description: (group_label(name, description),
                                                      groups.members(name, description, world)), warnings)
    return job, world, groups


def read_calls(dumps: Sequence[Dump], warnings: list[str], not_read_yet: Mapping[int, str] | None = None,
               ended: Collection[int] = ()) -> tuple[list[Call], Origin]:
    """Every call of these per-rank decoded dumps, in step order (a live reading's: calls, never
    events), and where they came from (the job's world size, backend and NCCL version); no call
    and an origin of the dumped ranks where the dumps hold none. ``not_read_yet``: the ranks a live
    reading will read later (rank → why not now: a server slow to answer, refusing, not started
    yet, an answer cut short); given, a rank of the job (as ``pg_config`` names it) not among
    ``dumps``, nor ``ended`` (never read: exited without a dump), is one of them too (its server
    not found, or not reported yet: :data:`UNLISTED`). While there are any, the
    calls of a group ``pg_config`` does not name (gloo's subgroups) are left out, said in
    ``warnings``: its members would be guessed from part of the job."""
    read = [RankDump(dump.rank, dump.path, columns) for dump, columns in
            zip(dumps, read_alike([dump.content for dump in dumps], _ranks))]  # each shape of dump read once
    job, world, groups = _job(read, warnings, not_read_yet, ended) if any(len(dump.columns) for dump in read) \
        else (None, 0, None)
    ranks = sorted(dump.rank for dump in read)
    if job is None or groups is None:
        return [], _origin(read, None, ranks, max(ranks, default=-1) + 1)
    unknown = {group_identity(name, backend) for name in groups.unknown for backend in job.table.backends}
    starts = job.table.step_starts()  # the calls in step order, each step's narration not worded (a reading has none)
    calls = [call for call in _calls(job, range(int(starts[0]), int(starts[job.table.step_count])))
             if call.group_id not in unknown]
    return calls, _origin(read, job, ranks, world)


def _failures(dumps: Sequence[RankDump]) -> tuple[str, ...]:
    """Each call a dump marks failed (a state none of torch's) or that ran past its ``timeout_ms``
    before the last time any dump recorded (so it timed out), earliest first: a sentence each."""
    latest = max((int((d.columns.t_ns + np.maximum(d.columns.duration_ns, 0)).max()) for d in dumps if len(d.columns)),
                 default=0)
    found: list[tuple[int, int, str]] = []
    for dump in dumps:
        c = dump.columns
        for row in sorted(set(c.failures) | {r for r, deadline in c.deadlines.items() if deadline < latest}):
            name, description, backend = c.groups[c.group[row]]
            on = f" on {backend}" if sum(group[0] == name for group in c.groups) > 1 else ""
            call = (f"rank {dump.rank}'s {c.ops[c.op[row]]} #{int(c.seq[row])} on group "
                    f"{group_label(name, description)}{on}")
            if row in c.failures:
                why = f"its dump marks it {c.failures[row]!r}"
            else:
                waited = latest - int(c.t_ns[row])
                shown = f"{waited / 1e9:,.1f} s" if waited >= 1e9 else f"{waited / 1e6:,.1f} ms"
                why = f"still not completed {shown} after it was issued, past its timeout_ms: timed out"
            found.append((int(c.t_ns[row]), dump.rank, f"{call}: {why}"))
    return tuple(text for _, _, text in sorted(found))


def _origin(dumps: Sequence[RankDump], job: JobTable | None, ranks: list[int], world: int) -> Origin:
    backends: Counter[str] = Counter()
    for counted, holding in _by_identity(dump.columns.backends for dump in dumps):
        backends.update({backend: calls * holding for backend, calls in counted.items()})
    backend = backends.most_common(1)[0][0] if backends else "unknown"
    versions = {d.columns.comm_lib_version for d in dumps} - {""}
    timed = job is not None and bool((job.table.duration_ns > 0).any())
    return Origin(
        scenario="flight-recorder",
        description=(f"Flight Recorder dumps of rank{'s' if len(ranks) > 1 else ''} {ranks_text(ranks)} "
                     f"({world} in the job): one step per collective call, matched across ranks by group and "
                     "sequence number. A dump records each call's op, group, sizes, element type and state; it holds "
                     "no values and no provenance" + ("." if timed else ", and no durations (timing was off).")),
        reason=f"{backend}, imported from Flight Recorder dumps: sizes and states, no values or provenance",
        backend=backend, device_kind=device_of_backend(backend), world_size=world,
        device=device_of_backend(backend), untimed="a Flight Recorder dump records durations only with timing on",
        not_recorded="a Flight Recorder dump holds each call's sizes and state: no values, provenance or transfers",
        nccl_version=", ".join(sorted(versions)), failed=Failed(accounts=_failures(dumps)))
