"""One Flight Recorder dump read into columns: an array per field over its calls, no object per call.

A job's dumps hold millions of entries (1,024 ranks × ``TORCH_FR_BUFFER_SIZE=2000``); an object per
entry costs tens of microseconds and hundreds of bytes each, so :func:`read_columns` turns a dump's
``entries`` into :class:`DumpColumns`: numpy arrays of group, sequence number, op, element type,
element counts, time, duration and state, the strings interned once per dump. Each field is read a
column at a time: a check over the whole column (``set(map(type, column))``) proves the common case
of a well-formed dump at C speed; only a column that fails it is checked entry by entry, to name
each damaged entry's first bad field exactly as the per-entry check does (:func:`_fault_masks`).

What a dump says about itself (``pg_config``'s groups and their ranks, ``pg_status``'s group names,
the format version, the communication library's version) is kept in its small decoded form.
The checks and warnings are those :mod:`.flight_recorder` documents: p2p, damaged and repeated
entries counted and left out, impossible durations dropped, a coalesced call's entries folded
into one with their sizes summed, and holes in a group's sequence said. Entries are read in the
order of their ``record_id`` (torch numbers each entry so), else of their ``time_created_ns``: a dump
listing them otherwise is read in that order, and said. An entry whose ``state`` is none of torch's three (``scheduled``,
``started``, ``completed``) is a failed call, named by that state; each call not completed keeps
its deadline (its start plus its ``timeout_ms``), so the job's dumps can say which ran past it.
A pickle may hold one object under many references (its memo): each is read once, so the work is
bounded by what the file holds, not by how often it refers to it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from math import prod
from pathlib import Path
from typing import cast

import numpy as np

from .names import P2P_OPS, dtype_name, op_name
from .plausible import MAX_CALL_BYTES, bytes_ok, duration_ok
from .run import group_label

__all__ = ["DumpColumns", "read_columns", "rank_own_times", "is_user_code", "where_in_user_code", "holes_text"]

_NOT_USER_CODE = ("/site-packages/", "/dist-packages/", "/torch/", "/lib/python3.", "<frozen")
"""Frames of paths with these parts are torch's, a library's or the interpreter's, not the user's."""

_OWN_CODE = f"{Path(__file__).resolve().parents[1].as_posix()}/"
"""collviz's runtime (where the ranks of ``collviz run`` run the script from, and dump): never the user's."""

_SEQUENCES = frozenset((list, tuple))
_TORCH_STATES = frozenset({"scheduled", "started", "completed", None})
"""The states torch writes (None: a dump older than the field); any other marks a failed call."""
_LARGEST_NUMBER = 1 << 62
"""A sequence number or a time (ns since 1970: the year 2116) past which a value is damaged input:
columns are 64-bit."""


def is_user_code(filename: str) -> bool:
    """Whether a frame in ``filename`` is the user's own code, not torch's, a library's or the
    interpreter's (the frame a hang's report points at: a dump's stack, a live rank's traceback)."""
    path = filename.replace("\\", "/")
    return not path.startswith(_OWN_CODE) and not any(part in path for part in _NOT_USER_CODE)


def where_in_user_code(frames: object) -> str:
    """The first frame of the user's code in a dump's ``frames`` as ``file:line in name``, or ''."""
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


def holes_text(ordered: Sequence[int], most: int = 8) -> str:
    """The first ``most`` gaps between consecutive numbers of ``ordered`` as ``#4, #7–#9``."""
    gaps = [(a + 1, b - 1) for a, b in zip(ordered, ordered[1:]) if b > a + 1]
    text = ", ".join(f"#{lo}" if lo == hi else f"#{lo}–#{hi}" for lo, hi in gaps[:most])
    return text + (", …" if len(gaps) > most else "")


@dataclass
class DumpColumns:
    """One dump's collective calls as columns (row ``i`` of every array is one call, in the dump's
    order), and what the dump says about itself.

    ``group`` indexes ``groups`` (name, description, and the backend its calls name: a group made
    with ``"cpu:gloo,cuda:nccl"`` has a sequence of calls per backend); ``op``, ``dtype`` and ``where`` index ``ops``,
    ``dtypes`` and ``places``. ``duration_ns`` is -1 where the call holds no duration.
    ``configs``: ``pg_config``'s group name → its ranks (None where unreadable), or None where the
    dump has no ``pg_config`` object. ``notes``: warnings about this dump, each to follow
    ``rank R: ``; ``version_note``: the format's, to follow ``rank R (file): ``.
    """

    groups: list[tuple[str, str, str]]
    ops: list[str]
    dtypes: list[str]
    places: list[str]
    group: np.ndarray
    seq: np.ndarray
    op: np.ndarray
    dtype: np.ndarray
    in_count: np.ndarray
    out_count: np.ndarray
    t_ns: np.ndarray
    duration_ns: np.ndarray
    completed: np.ndarray
    where: np.ndarray
    deadlines: dict[int, int] = field(default_factory=dict)
    """Row → when that call, not completed, ran past its ``timeout_ms`` (its start plus it)."""
    failures: dict[int, str] = field(default_factory=dict)
    """Row → the state the dump marks that call failed with (none of torch's)."""
    backends: Counter[str] = field(default_factory=Counter)
    configs: dict[object, tuple[int, ...] | None] | None = None
    status_groups: list[str] = field(default_factory=list)
    comm_lib_version: str = ""
    version_note: str = ""
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.seq)

    @property
    def nbytes(self) -> int:
        """The bytes of the columns' arrays (and of the few rows' deadlines and failures)."""
        return (sum(value.nbytes for value in vars(self).values() if isinstance(value, np.ndarray))
                + 16 * (len(self.deadlines) + len(self.failures)))


def _interned(values: list, table: dict) -> list[int]:
    """Each value's index in ``table`` (value → index), new values added in order of appearance."""
    for value in dict.fromkeys(values):
        table.setdefault(value, len(table))
    return list(map(table.__getitem__, values))


def _group_ok(group: object) -> bool:
    return isinstance(group, (list, tuple)) and bool(group) and all(isinstance(g, str) for g in group)


def _number_ok(value: object) -> bool:
    return type(value) is int and 0 <= value < _LARGEST_NUMBER


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


def _once_each(column: list, read: Callable[[list], list]) -> list:
    """``read(column)``, computed once per distinct object of ``column`` where it repeats objects (a
    pickle's shared references: a million references to one list of shapes are one read)."""
    ids = list(map(id, column))
    distinct = dict(zip(ids, column))
    if len(distinct) == len(column):
        return read(column)
    results = dict(zip(distinct, read(list(distinct.values()))))
    return list(map(results.__getitem__, ids))


def _element_counts(column: list) -> list[int | None]:
    """:func:`_elements` of every item of ``column``: for a column of lists of shapes of
    non-negative integers, computed with no per-dimension check in Python."""
    if set(map(type, column)) <= _SEQUENCES:
        shapes = list(chain.from_iterable(column))
        if set(map(type, shapes)) <= _SEQUENCES:
            dims = list(chain.from_iterable(shapes))
            if not dims or (set(map(type, dims)) == {int} and min(dims) >= 0):
                if len(shapes) == len(column) and all(column):  # one tensor per call: no sum to make
                    return list(map(prod, shapes))
                return [sum(map(prod, item)) for item in column]
    return list(map(_elements, column))


def _mask(column: list, ok: Callable[[object], bool], all_ok: bool) -> np.ndarray:
    """Where ``column``'s items fail ``ok`` (``all_ok``: a whole-column check already proved none does)."""
    if all_ok:
        return np.zeros(len(column), dtype=bool)
    return np.fromiter((not ok(v) for v in column), dtype=bool, count=len(column))


def _kinds(column: list) -> set[type]:
    return set(map(type, column))


def _fault_masks(entries: list[dict]) -> tuple[dict[str, list], list[tuple[str, np.ndarray]]]:
    """The columns this module reads from well-typed ``entries`` (each a dict), and for each field,
    in the order an entry is checked, where it is missing, malformed or impossible. Older names are
    read too: ``seq_id`` (format 1.x) for ``collective_seq_id``; an entry without
    ``time_created_ns`` or ``input_dtypes`` (format < 2.0) is placed at 0 and typed ``unknown``."""

    def column(name: str, default: object = None) -> list:
        return list(map(dict.get, entries, repeat(name), repeat(default)))

    groups = column("process_group")
    try:
        groups_ok = _kinds(groups) <= _SEQUENCES and all(map(_group_ok, set(map(tuple, groups))))
    except TypeError:  # a group holding something unhashable: checked entry by entry
        groups_ok = False
    seqs = column("collective_seq_id")
    if None in seqs:  # format 1.x's name, where the entry has no collective_seq_id
        seqs = [raw.get("seq_id") if seq is None and "collective_seq_id" not in raw else seq
                for raw, seq in zip(entries, seqs)]
    seqs_ok = _kinds(seqs) == {int} and 0 <= min(seqs) and max(seqs) < _LARGEST_NUMBER
    names = column("profiling_name")
    created = column("time_created_ns", 0)
    created_ok = _kinds(created) == {int} and 0 <= min(created) and max(created) < _LARGEST_NUMBER
    counts_in, counts_out = (_once_each(column(name), _element_counts) for name in ("input_sizes", "output_sizes"))
    dtypes = column("input_dtypes", [])
    columns = {"process_group": groups, "seq": seqs, "profiling_name": names, "time_created_ns": created,
               "in_count": counts_in, "out_count": counts_out, "input_dtypes": dtypes}
    return columns, [
        ("process_group", _mask(groups, _group_ok, groups_ok)),
        ("collective_seq_id", _mask(seqs, _number_ok, seqs_ok)),
        ("profiling_name", _mask(names, lambda v: isinstance(v, str), _kinds(names) == {str})),
        ("time_created_ns", _mask(created, _number_ok, created_ok)),
        ("input_sizes", _mask(counts_in, _count_ok, _counts_ok(counts_in))),
        ("output_sizes", _mask(counts_out, _count_ok, _counts_ok(counts_out))),
        ("input_dtypes", _mask(dtypes, lambda v: isinstance(v, (list, tuple)), _kinds(dtypes) <= _SEQUENCES)),
    ]


def _count_ok(count: object) -> bool:
    return isinstance(count, int) and bytes_ok(count)


def _counts_ok(counts: list[int | None]) -> bool:
    """Whether every count of ``counts`` is one (:func:`_count_ok`), checked over the whole list at once."""
    numbers = [n for n in counts if n is not None]
    return len(numbers) == len(counts) and (not numbers or (min(numbers) >= 0 and max(numbers) <= MAX_CALL_BYTES))


def _first_dtype(dtypes: object) -> str:
    """collviz's name of the first element type a dump names for a call's inputs, or ``unknown``."""
    named = [d for d in dtypes if isinstance(d, str)] if isinstance(dtypes, (list, tuple)) else []
    return dtype_name(named[0]) if named else "unknown"


def _first_dtypes(column: list) -> list[str]:
    """:func:`_first_dtype` of every item of ``column`` (lists of type names, each name read once)."""
    heads = [d[0] if d else None for d in column]
    if not _kinds(heads) <= {str, type(None)}:
        return list(map(_first_dtype, column))
    names = {head: "unknown" if head is None else dtype_name(head) for head in set(heads)}
    return list(map(names.__getitem__, heads))


def _durations(entries: list[dict], completed: list[bool]) -> tuple[list[int], list[bool]]:
    """Each call's duration in ns (-1: none) and whether it held an impossible one (zero, negative,
    over a week: damaged input, shown untimed). A duration counts only for a completed call."""
    raw = list(map(dict.get, entries, repeat("duration_ms")))
    if _kinds(raw) == {type(None)}:
        return [-1] * len(raw), [False] * len(raw)
    kept, impossible = [], []
    for duration, done in zip(raw, completed):
        number = isinstance(duration, (int, float)) and not isinstance(duration, bool)
        timed = number and done
        ns = duration * 1e6 if isinstance(duration, (int, float)) and abs(duration) < 1 << 60 else float("inf")
        ok = timed and duration_ok(ns)
        kept.append(int(ns) if ok else -1)
        impossible.append(timed and not ok)
    return kept, impossible


def _places(entries: list[dict]) -> list[str]:
    frames = list(map(dict.get, entries, repeat("frames")))
    if not any(frames):
        return [""] * len(frames)
    return _once_each(frames, lambda distinct: list(map(where_in_user_code, distinct)))


def _failed_states(entries: list[dict]) -> list[str]:
    """Each entry's state where it is none of torch's (a failed call), else ''."""
    states = list(map(dict.get, entries, repeat("state")))
    try:
        if set(states) <= _TORCH_STATES:
            return [""] * len(states)
    except TypeError:  # a state holding something unhashable: damaged, read entry by entry
        pass
    return [s if isinstance(s, str) and s not in _TORCH_STATES else "" for s in states]


def _deadlines(entries: list[dict], completed: list[bool]) -> list[int]:
    """When each call not completed ran past its timeout: its start (``time_discovered_started_ns``,
    else ``time_created_ns``) plus its ``timeout_ms``; -1 where it completed or either is missing
    (or 0, as torch writes a time it did not discover)."""
    found = [-1] * len(entries)
    for row in (i for i, done in enumerate(completed) if not done):
        raw = entries[row]
        starts = [t for t in (raw.get("time_discovered_started_ns"), raw.get("time_created_ns")) if type(t) is int]
        start = next((t for t in starts if 0 < t < _LARGEST_NUMBER), None)  # torch writes 0 for a time not discovered
        timeout = raw.get("timeout_ms")
        if start is not None and type(timeout) is int and 0 < timeout < _LARGEST_NUMBER // 1_000_000:
            found[row] = min(start + timeout * 1_000_000, _LARGEST_NUMBER)
    return found


def _in_record_order(entries: list[dict], at: np.ndarray) -> tuple[list[dict], np.ndarray, str]:
    """``entries`` (and their places ``at``) in the order torch recorded them, where the dump lists
    them otherwise: by ``record_id`` where every entry has its own (as torch numbers them), else by
    ``time_created_ns`` where every entry has one (older dumps; equal times keep their order); the
    note that says so, or ''."""
    for key, distinct in (("record_id", True), ("time_created_ns", False)):
        found = list(map(dict.get, entries, repeat(key)))
        if not found or _kinds(found) != {int}:
            continue
        keys = cast(list[int], found)  # every one an int, as the check above proved
        if all(a <= b for a, b in zip(keys, keys[1:])) or (distinct and len(set(keys)) < len(keys)):
            return entries, at, ""
        order = sorted(range(len(keys)), key=keys.__getitem__)
        return ([entries[i] for i in order], at[order],
                f"its entries are not listed in the order of their {key}: read in that order")
    return entries, at, ""


def rank_own_times(entries: list[dict], completed: list[bool]) -> tuple[list[int], list[int], list[int]] | None:
    """What ``entries`` (a dump's, none of which its reading leaves out or folds) say of their
    rank's own record as :func:`read_columns` reads it, given which calls ``completed``: each
    call's time, duration and deadline (-1: none); or None where reading them would note something
    (a time out of range, an impossible duration, entries listed out of their order)."""
    created = list(map(dict.get, entries, repeat("time_created_ns"), repeat(0)))
    if not created or _kinds(created) != {int} or min(created) < 0 or max(created) >= _LARGEST_NUMBER:
        return None
    if _in_record_order(entries, np.arange(len(entries)))[2]:
        return None
    durations, impossible = _durations(entries, completed)
    if any(impossible):
        return None
    return cast(list[int], created), durations, _deadlines(entries, completed)


def _shared_once(entries: list) -> tuple[list, int]:
    """``entries`` with each object kept once (a pickle may refer to one entry many times), and how
    many references were dropped."""
    distinct = list({id(e): e for e in entries}.values())
    return (entries, 0) if len(distinct) == len(entries) else (distinct, len(entries) - len(distinct))


def _configs(content: dict, ranks_of: Callable[[object], tuple[int, ...] | None]) -> dict[object, tuple[int, ...] | None] | None:
    configs = content.get("pg_config")
    if not isinstance(configs, dict):
        return None
    return {name: ranks_of(config.get("ranks")) for name, config in configs.items() if isinstance(config, dict)}


def read_columns(content: dict, ranks_of: Callable[[object], tuple[int, ...] | None]) -> DumpColumns:
    """The collective calls of one decoded dump (``content``: :func:`~.flight_recorder.is_dump`
    holds) as columns; ``ranks_of`` reads a ``pg_config`` group's ``ranks``."""
    version = str(content.get("version"))
    all_entries, shared = _shared_once(content["entries"])
    is_entry = np.fromiter((type(e) is dict for e in all_entries), dtype=bool, count=len(all_entries)) \
        if _kinds(all_entries) != {dict} else np.ones(len(all_entries), dtype=bool)
    at = np.flatnonzero(is_entry)  # each dict's place among the entries
    entries = [all_entries[i] for i in at.tolist()] if len(at) < len(all_entries) else all_entries
    entries, at, order_note = _in_record_order(entries, at)
    faults = [(int(np.argmin(is_entry)), "entry", len(all_entries) - len(at))] if len(at) < len(all_entries) else []
    columns, masks = _fault_masks(entries)
    dead = np.zeros(len(entries), dtype=bool)
    for name, mask in masks:
        fresh = mask & ~dead
        if fresh.any():
            faults.append((int(at[np.argmax(fresh)]), name, int(np.count_nonzero(fresh))))
        dead |= mask
    bad = Counter({name: count for _, name, count in sorted(faults)})  # ties said in the order the dump shows them
    good = np.flatnonzero(~dead).tolist()
    if len(good) < len(entries):
        entries = [entries[i] for i in good]
        columns = {name: [values[i] for i in good] for name, values in columns.items()}
    status = content.get("pg_status")
    status_groups = [str(name) for name in status] if isinstance(status, dict) else []
    found = _Reading(entries, columns)
    notes = found.fold()
    notes[:0] = [note for note in (order_note, _shared_note(shared)) if note]
    if bad:
        notes.insert(0, f"{sum(bad.values())} entries left out as damaged (a field missing, malformed or impossible): "
                     + ", ".join(f"{name} ({n})" for name, n in bad.most_common()))
    read = found.columns()
    read.configs = _configs(content, ranks_of)
    read.status_groups = status_groups
    read.comm_lib_version = (str(content.get("comm_lib_version") or "")  # format 2.10 on
                             or str(content.get("nccl_version") or ""))  # format 2.4 to 2.9
    read.version_note = "" if version.startswith("2.") else f"Flight Recorder format {version}, read as 2.x"
    read.notes = notes
    return read


def _shared_note(shared: int) -> str:
    return (f"{shared:,} entries are further references to an entry already read (one object, referred to again "
            "in the pickle): each read once" if shared else "")


class _Reading:
    """One dump's well-formed entries on their way to columns: p2p, repeated and coalesced entries
    folded (:meth:`fold`), then the arrays built (:meth:`columns`)."""

    def __init__(self, entries: list[dict], columns: dict[str, list]) -> None:
        self.groups: dict[tuple[str, str, str], int] = {}
        self.ops: dict[str, int] = {}
        self.dtypes: dict[str, int] = {}
        self.places: dict[str, int] = {}
        names = columns["profiling_name"]
        spelled = {name: (name.split(":", 1)[0] if ":" in name else "", op_name(name)) for name in set(names)}
        self.backend = [spelled[name][0] for name in names]
        # each group as the dump writes it with the backend its entry names, then as (name, description, backend):
        # a group made with "cpu:gloo,cuda:nccl" numbers each backend's calls on its own
        written: dict[tuple, int] = {}
        group_of = _interned(list(zip(map(tuple, columns["process_group"]), self.backend)), written)
        key_of = [self.groups.setdefault((g[0], g[1] if len(g) > 1 else "", backend), len(self.groups))
                  for g, backend in written]
        self.group = list(map(key_of.__getitem__, group_of))
        self.op = _interned([spelled[name][1] for name in names], self.ops)
        self.dtype = _interned(_first_dtypes(columns["input_dtypes"]), self.dtypes)
        self.seq = columns["seq"]
        self.t_ns = columns["time_created_ns"]
        self.in_count, self.out_count = columns["in_count"], columns["out_count"]
        states = list(map(dict.get, entries, repeat("state")))
        retired = list(map(dict.get, entries, repeat("retired")))
        failed = _failed_states(entries)
        self.completed = [(r is True or s == "completed") and not f for r, s, f in zip(retired, states, failed)]
        self.duration_ns, self.impossible = _durations(entries, self.completed)
        self.deadline_ns = _deadlines(entries, self.completed)
        self.failed = failed
        self.where = _interned(_places(entries), self.places)
        p2p_ops = {index for op, index in self.ops.items() if op in P2P_OPS}
        flags = list(map(dict.get, entries, repeat("is_p2p")))
        self.p2p = [flag is True or op in p2p_ops for flag, op in zip(flags, self.op)]
        self.kept: list[int] = []

    def fold(self) -> list[str]:
        """Choose the rows kept (one per call) and say what was left out or folded, and the holes
        in each group's sequence numbers (over every well-formed entry, p2p and repeats too)."""
        notes: list[str] = []
        numbered = [(name, backend) for name, _, backend in self.groups]  # one sequence per name and backend
        numbering_of = [numbered.index(key) for key in numbered]
        keys = list(zip(map(numbering_of.__getitem__, self.group), self.seq))
        p2p = repeated = coalesced = untimed = 0
        if not any(self.p2p) and len(set(keys)) == len(keys):  # the common case: one entry per call
            self.kept = list(range(len(keys)))
            untimed = sum(self.impossible)
            keys = []
        seen: dict[tuple[int, int], int] = {}
        coalesced_op = self.ops.get("coalesced")
        for row, (key, op) in enumerate(zip(keys, self.op)):
            if self.p2p[row]:
                p2p += 1
                continue
            first = seen.get(key)
            if first is None:
                seen[key] = row
                self.kept.append(row)
                untimed += self.impossible[row]
            elif op == coalesced_op or op == self.op[first]:  # one coalesced call's tensors (format 2.7 on)
                coalesced += 1
                if op == self.op[first]:
                    self.in_count[first] += self.in_count[row]
                    self.out_count[first] += self.out_count[row]
            else:
                repeated += 1
        if untimed:
            notes.append(f"{untimed} entries hold an impossible duration (zero, negative or over a week): damaged "
                         "input, shown untimed")
        if p2p:
            notes.append(f"{p2p} point-to-point entries (send/recv) are not shown")
        if repeated:
            notes.append(f"{repeated} entries repeat a call number already seen on their group with another op: left out")
        if coalesced:
            notes.append(f"{coalesced} entries are further tensors of coalesced calls: each coalesced call is shown as "
                         "one, its sizes summed")
        return notes + self._holes()

    def _holes(self) -> list[str]:
        numbered: dict[str, set[int]] = {}
        backends_of = Counter(name for name, _ in {(name, backend) for name, _, backend in self.groups})
        labels = [group_label(name, description) + (f" on {backend}" if backends_of[name] > 1 else "")
                  for name, description, backend in self.groups]
        if len(labels) == 1:
            numbered[labels[0]] = set(self.seq)
        else:
            for group, seq in zip(self.group, self.seq):
                numbered.setdefault(labels[group], set()).add(seq)
        notes = []
        for label, found in sorted(numbered.items()):
            ordered = sorted(found)
            count = ordered[-1] - ordered[0] + 1 - len(ordered) if ordered else 0
            if count:
                notes.append(f"{count:,} calls missing inside its dump's sequence on group {label} "
                             f"({holes_text(ordered)}): lost or damaged entries; what the rank did there is unknown")
        return notes

    def columns(self) -> DumpColumns:
        """The kept rows as :class:`DumpColumns` (what the dump says about itself is added by the caller)."""
        rows = np.asarray(self.kept, dtype=np.int64)

        def pick(values: list, dtype: type) -> np.ndarray:
            return np.asarray(values, dtype=dtype)[rows] if len(values) else np.zeros(0, dtype=dtype)

        return DumpColumns(
            groups=list(self.groups), ops=list(self.ops), dtypes=list(self.dtypes), places=list(self.places),
            group=pick(self.group, np.int32), seq=pick(self.seq, np.int64), op=pick(self.op, np.int32),
            dtype=pick(self.dtype, np.int32), in_count=pick(self.in_count, np.int64),
            out_count=pick(self.out_count, np.int64), t_ns=pick(self.t_ns, np.int64),
            duration_ns=pick(self.duration_ns, np.int64), completed=pick(self.completed, np.bool_),
            where=pick(self.where, np.int32), backends=self._backends(),
            deadlines={n: self.deadline_ns[r] for n, r in enumerate(self.kept) if self.deadline_ns[r] >= 0},
            failures={n: self.failed[r] for n, r in enumerate(self.kept) if self.failed[r]})

    def _backends(self) -> Counter[str]:
        """How many kept calls each backend named (``gloo:all_reduce``: gloo)."""
        kept = self.backend if len(self.kept) == len(self.backend) else map(self.backend.__getitem__, self.kept)
        counts = Counter(kept)
        del counts[""]
        return counts
