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
file name ends with. Every call becomes a :class:`~.run.Call` (complete once ``retired`` or
``completed``); :func:`~.run.build_run` matches them across ranks by (group, sequence number) and
runs the live run's own hang and mismatch checks. A set of dumps is judged as found: a rank
without a dump is unknown — never a cause of a hang, never "not started" — and the verdict says
how many are missing. Real dumps disagree with themselves, and each disagreement is read and said
in a warning rather than refused: gloo keys the default group ``''`` in ``pg_config`` while its
entries name it ``'0'`` (torch's analyser raises ``KeyError`` on it), a subgroup's members may be
missing from ``pg_config``, a full buffer drops a rank's oldest calls, an entry may be missing
from the middle of a rank's sequence, lack fields or hold values that cannot be (:mod:`.plausible`).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TypeGuard

from ..errors import UsageError
from ..observation.rank_lists import ranks_text
from .names import P2P_OPS, dtype_name, itemsize, op_name, parse_ranks
from .plausible import MAX_RANKS, bytes_ok, duration_ok, rank_ok
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

__all__ = ["Dump", "is_dump", "rank_from_name", "import_dumps", "is_user_code"]

_RANK_AT_END = re.compile(r"(\d+)(?:\.[A-Za-z][A-Za-z0-9]*)*$")
_DEFAULT_NAMES = ("0", "default_pg")
_NOT_USER_CODE = ("/site-packages/", "/dist-packages/", "/torch/", "/lib/python3.", "<frozen")
"""Frames of paths with these parts are torch's, a library's or the interpreter's, not the user's."""


def is_user_code(filename: str) -> bool:
    """Whether a frame in ``filename`` is the user's own code, not torch's, a library's or the
    interpreter's (the frame a hang's report points at: a dump's stack, a live rank's traceback)."""
    return not any(part in filename.replace("\\", "/") for part in _NOT_USER_CODE)


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


@dataclass(frozen=True)
class _Entry:
    """The fields of one entry this module uses, checked."""

    group: str
    description: str
    seq: int
    backend: str
    op: str
    in_count: int
    out_count: int
    in_dtype: str
    completed: bool
    state: str
    t_ns: int
    duration_ns: int | None
    impossible_duration: bool
    where: str


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _elements(shapes: object) -> int | None:
    """The elements of the tensors of ``shapes`` (a list of shapes, each a list of dimensions), or
    None where it is not one (a dimension negative or not an integer)."""
    if not isinstance(shapes, (list, tuple)):
        return None
    total = 0
    for shape in shapes:
        if not isinstance(shape, (list, tuple)):
            return None
        elements = 1
        for dim in shape:
            if type(dim) is not int or dim < 0:  # decoded JSON and plain pickles hold no int subclass but bool
                return None
            elements *= dim
        total += elements
    return total


def _where(frames: object) -> str:
    """The first frame of the user's code (not torch's, a library's or the interpreter's) as
    ``file:line in name``."""
    if not isinstance(frames, (list, tuple)):
        return ""
    for frame in frames:
        if not isinstance(frame, dict):
            continue
        filename, line, name = frame.get("filename"), frame.get("line"), frame.get("name")
        if not isinstance(filename, str) or not is_user_code(filename):
            continue
        return f"{Path(filename).name}:{line} in {name}"
    return ""


def _entry(raw: object) -> _Entry | str:
    """The checked entry, or the name of the field that is missing, malformed or impossible (a size
    no device holds). Older dumps' names are read too: ``seq_id`` (format 1.x) for
    ``collective_seq_id``; an entry without ``time_created_ns`` or ``input_dtypes`` (format < 2.0)
    is placed by its order and typed ``unknown``."""
    if not isinstance(raw, dict):
        return "entry"
    group = raw.get("process_group")
    if not isinstance(group, (list, tuple)) or not group or not all(isinstance(g, str) for g in group):
        return "process_group"
    seq = raw.get("collective_seq_id", raw.get("seq_id"))
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        return "collective_seq_id"
    profiling = raw.get("profiling_name")
    if not isinstance(profiling, str):
        return "profiling_name"
    created = raw.get("time_created_ns", 0)
    if not _int(created) or created < 0:
        return "time_created_ns"
    in_count, out_count = _elements(raw.get("input_sizes")), _elements(raw.get("output_sizes"))
    if in_count is None or not bytes_ok(in_count):
        return "input_sizes"
    if out_count is None or not bytes_ok(out_count):
        return "output_sizes"
    dtypes = raw.get("input_dtypes", [])
    if not isinstance(dtypes, (list, tuple)):
        return "input_dtypes"
    backend = profiling.split(":", 1)[0] if ":" in profiling else ""
    state = raw.get("state") if isinstance(raw.get("state"), str) else ""
    completed = raw.get("retired") is True or state == "completed"
    duration = raw.get("duration_ms")
    timed = isinstance(duration, (int, float)) and not isinstance(duration, bool) and completed
    duration_ns = duration * 1e6 if isinstance(duration, (int, float)) and abs(duration) < 1 << 60 else float("inf")
    named = [d for d in dtypes if isinstance(d, str)]
    return _Entry(
        group=group[0], description=group[1] if len(group) > 1 else "", seq=seq,
        backend=backend, op=op_name(profiling), in_count=in_count,
        out_count=out_count, in_dtype=dtype_name(named[0]) if named else "unknown",
        completed=completed, state=state or ("completed" if completed else "not completed"),
        t_ns=created, duration_ns=int(duration_ns) if timed and duration_ok(duration_ns) else None,
        impossible_duration=timed and not duration_ok(duration_ns), where=_where(raw.get("frames")))


@dataclass
class _Groups:
    """Each group's members, resolved once over every dump, and the warnings that took."""

    dumps: Sequence[Dump]
    mentions: dict[str, set[int]]
    warnings: list[str]

    def world_size(self) -> int:
        """Ranks in the job: past the highest dumped rank and the highest rank any config names."""
        highest = max(d.rank for d in self.dumps)
        for dump in self.dumps:
            for config in _configs(dump):
                ranks = _ranks(config.get("ranks"))
                highest = max(highest, max(ranks) if ranks else 0)
        return highest + 1

    def members(self, name: str, description: str, world: int) -> tuple[int, ...]:
        """The ranks of group ``name``: from ``pg_config`` where the dumps agree, the whole world for
        the default group, else the ranks whose dumps mention the group (each said in a warning)."""
        default = name in _DEFAULT_NAMES or description == "default_pg"
        votes: Counter[tuple[int, ...]] = Counter()
        under_blank = False
        for dump in self.dumps:
            configs = dump.content.get("pg_config")
            if not isinstance(configs, dict):
                continue
            found = _ranks(configs[name].get("ranks")) if isinstance(configs.get(name), dict) else None
            if found is None and default and isinstance(configs.get(""), dict):
                found = _ranks(configs[""].get("ranks"))
                under_blank = under_blank or found is not None
            if found is not None:
                votes[found] += 1
        label = group_label(name, description)
        if under_blank:
            self.warnings.append(f"group {label} is keyed '' in the dumps' pg_config but '{name}' in their entries "
                                 "(torch's own analyser fails on this): read as one group")
        if len(votes) > 1:
            self.warnings.append(f"group {label}: the dumps disagree on its ranks ("
                                 + "; ".join(f"{list(r)} in {n}" for r, n in votes.most_common()) + "): taking the most common")
        if votes:
            return votes.most_common(1)[0][0]
        if default:
            return tuple(range(world))
        seen = tuple(sorted(self.mentions.get(name, ())))
        self.warnings.append(f"group {label}: its ranks are not in the dumps' pg_config; taken as the ranks whose "
                             f"dumps mention it: {ranks_text(seen)}")
        return seen


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


def _configs(dump: Dump) -> list[dict]:
    configs = dump.content.get("pg_config")
    return [c for c in configs.values() if isinstance(c, dict)] if isinstance(configs, dict) else []


def _call(rank: int, entry: _Entry, group: str, members: tuple[int, ...]) -> Call:
    size = itemsize(entry.in_dtype)
    count, out = entry.in_count, entry.out_count
    return Call(rank=rank, group=group, group_ranks=members, group_seq=entry.seq, op=entry.op, dtype=entry.in_dtype,
                count=count, bytes_in=count * (size or 0), bytes_out=out * (size or 0), t_ns=entry.t_ns,
                duration_ns=entry.duration_ns, completed=entry.completed, where=entry.where)


def _read_entries(dump: Dump, warnings: list[str]) -> list[_Entry]:
    """The dump's collective entries in its own order; p2p, damaged and repeated entries are
    counted in warnings and left out, impossible durations are dropped, the entries of one
    coalesced call (the same sequence number: its tensors, then a ``coalesced`` entry) become one
    with their sizes summed, and a hole in the sequence numbers of a group (entries lost between
    ones the dump holds) is said."""
    version = str(dump.content.get("version"))
    if not version.startswith("2."):
        warnings.append(f"rank {dump.rank} ({dump.path.name}): Flight Recorder format {version}, read as 2.x")
    entries: list[_Entry] = []
    bad: Counter[str] = Counter()
    p2p, repeated, untimed, coalesced = 0, 0, 0, 0
    seen: dict[tuple[str, int], int] = {}
    numbered: dict[str, set[int]] = defaultdict(set)
    for raw in dump.content["entries"]:
        entry = _entry(raw)
        if isinstance(entry, str):
            bad[entry] += 1
            continue
        numbered[group_label(entry.group, entry.description)].add(entry.seq)
        if (isinstance(raw, dict) and raw.get("is_p2p") is True) or entry.op in P2P_OPS:
            p2p += 1
        elif (entry.group, entry.seq) in seen:
            first = entries[seen[(entry.group, entry.seq)]]
            if entry.op == "coalesced" or entry.op == first.op:  # one coalesced call's tensors (format 2.7 on)
                coalesced += 1
                if entry.op == first.op:
                    entries[seen[(entry.group, entry.seq)]] = replace(
                        first, in_count=first.in_count + entry.in_count, out_count=first.out_count + entry.out_count)
            else:
                repeated += 1
        else:
            seen[(entry.group, entry.seq)] = len(entries)
            entries.append(entry)
            untimed += entry.impossible_duration
    if bad:
        warnings.append(f"rank {dump.rank}: {sum(bad.values())} entries left out as damaged (a field missing, "
                        "malformed or impossible): " + ", ".join(f"{field} ({n})" for field, n in bad.most_common()))
    if untimed:
        warnings.append(f"rank {dump.rank}: {untimed} entries hold an impossible duration (zero, negative or over "
                        "a week): damaged input, shown untimed")
    if p2p:
        warnings.append(f"rank {dump.rank}: {p2p} point-to-point entries (send/recv) are not shown")
    if repeated:
        warnings.append(f"rank {dump.rank}: {repeated} entries repeat a call number already seen on their group with "
                        "another op: left out")
    if coalesced:
        warnings.append(f"rank {dump.rank}: {coalesced} entries are further tensors of coalesced calls: each "
                        "coalesced call is shown as one, its sizes summed")
    for group, seqs in sorted(numbered.items()):
        ordered = sorted(seqs)
        count = ordered[-1] - ordered[0] + 1 - len(ordered)
        if count:
            warnings.append(f"rank {dump.rank}: {count:,} calls missing inside its dump's sequence on group {group} "
                            f"({_holes_text(ordered)}): lost or damaged entries; what the rank did there is unknown")
    return entries


def _holes_text(ordered: Sequence[int], most: int = 8) -> str:
    """The first ``most`` gaps between consecutive numbers of ``ordered`` as ``#4, #7–#9``."""
    gaps = [(a + 1, b - 1) for a, b in zip(ordered, ordered[1:]) if b > a + 1]
    text = ", ".join(f"#{lo}" if lo == hi else f"#{lo}–#{hi}" for lo, hi in gaps[:most])
    return text + (", …" if len(gaps) > most else "")


def _truncation_warnings(calls: Mapping[int, list[Call]], warnings: list[str]) -> None:
    """Say where a rank's dump starts later on a group than other ranks' (its buffer overflowed)."""
    first: dict[str, dict[int, int]] = defaultdict(dict)
    for rank, rank_calls in calls.items():
        for call in rank_calls:
            first[call.group][rank] = min(first[call.group].get(rank, call.group_seq), call.group_seq)
    for group, by_rank in first.items():
        earliest = min(by_rank.values())
        for rank, seq in sorted(by_rank.items()):
            if seq > earliest:
                warnings.append(f"rank {rank}'s dump starts at call #{seq} on group {group}, after calls other ranks "
                                "recorded (its older entries were overwritten; a larger TORCH_FR_BUFFER_SIZE keeps more)")


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


def _step(key: tuple[str, int], calls: list[Call]) -> Step:
    op = Counter(c.op for c in calls).most_common(1)[0][0]
    return Step(name=f"{op} #{key[1]} on group {key[0]}", narration=_narration(key, calls), calls=calls,
                t_ns=min(c.t_ns for c in calls))


def import_dumps(dumps: Sequence[Dump], warnings: list[str], progress: Progress = no_progress) -> ImportedRun:
    """The run these per-rank dumps describe (one dump per rank; ``warnings`` gains what could not
    be matched or shown; ``progress`` is told each dump read and each step built). Exit status 1
    when ranks hang or disagree, as for a live run."""
    if not dumps:
        raise UsageError("no Flight Recorder dump to open")
    entries = {}
    for done, dump in enumerate(dumps):
        progress("reading calls", done, len(dumps))
        entries[dump.rank] = _read_entries(dump, warnings)
    progress("reading calls", len(dumps), len(dumps))
    mentions: dict[str, set[int]] = defaultdict(set)
    for dump in dumps:
        status = dump.content.get("pg_status")
        for name in status if isinstance(status, dict) else ():
            mentions[str(name)].add(dump.rank)
        for entry in entries[dump.rank]:
            mentions[entry.group].add(dump.rank)
    if not any(entries.values()):
        raise UsageError(f"{dumps[0].path}: the dumps hold no collective calls (is TORCH_FR_BUFFER_SIZE set in the job?)")
    groups = _Groups(dumps, mentions, warnings)
    world = groups.world_size()
    resolved: dict[str, tuple[str, tuple[int, ...]]] = {}
    calls: dict[int, list[Call]] = {}
    for rank, rank_entries in entries.items():
        calls[rank] = []
        for entry in rank_entries:
            if entry.group not in resolved:
                members = groups.members(entry.group, entry.description, world)
                resolved[entry.group] = (group_label(entry.group, entry.description), members)
            label, members = resolved[entry.group]
            calls[rank].append(_call(rank, entry, label, members))
    _truncation_warnings(calls, warnings)
    by_key: dict[tuple[str, int], list[Call]] = defaultdict(list)
    for rank_calls in calls.values():
        for call in rank_calls:
            by_key[(call.group, call.group_seq)].append(call)
    first_seen = {key: min(c.t_ns for c in found) for key, found in by_key.items()}
    order = order_steps({rank: [(c.group, c.group_seq) for c in found] for rank, found in calls.items()}, first_seen)
    steps = [_step(key, by_key[key]) for key in order]
    ranks = sorted(calls)
    missing = {r: "no dump of this rank" for r in range(world) if r not in calls}
    if missing:
        warnings.append(f"no dump of rank{'s' if len(missing) > 1 else ''} {ranks_text(sorted(missing))} "
                        f"(the dumps name {world} ranks): what {'they' if len(missing) > 1 else 'it'} did is unknown")
    backends = Counter(e.backend for found in entries.values() for e in found if e.backend)
    backend = backends.most_common(1)[0][0] if backends else "unknown"
    versions = {str(d.content.get("comm_lib_version") or "") for d in dumps} - {""}
    timed = any(c.duration_ns for found in calls.values() for c in found)
    origin = Origin(
        scenario="flight-recorder",
        description=(f"Flight Recorder dumps of rank{'s' if len(ranks) > 1 else ''} {ranks_text(ranks)} "
                     f"({world} in the job): one step per collective call, matched across ranks by group and "
                     "sequence number. A dump records each call's op, group, sizes, element type and state; it holds "
                     "no values and no provenance" + ("." if timed else ", and no durations (timing was off).")),
        reason=f"{backend}, imported from Flight Recorder dumps: sizes and states, no values or provenance",
        backend=backend, device_kind="cuda" if backend == "nccl" else "cpu", world_size=world,
        device="device unknown", untimed="a Flight Recorder dump records durations only with timing on",
        not_recorded="a Flight Recorder dump holds each call's sizes and state: no values, provenance or transfers",
        nccl_version=", ".join(sorted(versions)))
    return build_run(origin, steps, warnings, ranks, missing, progress)
