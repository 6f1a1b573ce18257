"""Ranks' Flight Recorder dumps that differ only in their ranks' own times, read into columns once.

A live reading decodes each rank's tail (:mod:`collviz.runtime.live.tail`): at 1,024 ranks making
10 calls between readings, 1,024 dumps of about a dozen entries, and reading each into columns
(:func:`.fr_columns.read_columns`) cost about 0.2 ms a dump, 0.19 s a reading — most of it per
dump, not per entry. A rank's call differs from its peers' only in what the rank itself recorded
of it (:data:`RANK_OWN`: when it was made, started and completed, its duration, its record number
and thread). :func:`read_alike` reads one dump of each *shape* (the dump with those fields left
out) and gives every other dump of that shape the first one's columns with its own times,
durations and deadlines. A dump whose own fields would make its reading differ — its entries
listed out of their order, a time out of range, an impossible duration, an entry listed twice —
and every dump of a shape whose first reading left anything out, folded or noted are read on their
own: the columns are :func:`~.fr_columns.read_columns`'s, dump by dump (tests/runtime/test_fr_alike.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from copy import copy

import msgspec
import numpy as np

from .fr_columns import DumpColumns, read_columns, rank_own_times

__all__ = ["RANK_OWN", "read_alike"]

RANK_OWN = frozenset({"record_id", "time_created_ns", "time_discovered_started_ns", "time_discovered_completed_ns",
                      "duration_ms", "thread_id", "thread_name"})
"""The fields of an entry that are its rank's own record of a call its peers made too."""


def read_alike(contents: Sequence[dict], ranks_of: Callable[[object], tuple[int, ...] | None]) -> list[DumpColumns]:
    """Each decoded dump of ``contents`` as :func:`~.fr_columns.read_columns` reads it (``ranks_of``
    as there), each shape read once (see the module)."""
    firsts: dict[bytes, DumpColumns | None] = {}
    """Each shape seen → its first dump's columns, where other dumps may share them (else None)."""
    read = []
    for content in contents:
        shape = _shape(content)
        first = firsts.get(shape) if shape is not None else None
        own = _with_own_times(first, content["entries"]) if first is not None else None
        if own is None:
            own = read_columns(content, ranks_of)
            if shape is not None and shape not in firsts:
                firsts[shape] = own if not own.notes and len(own) == len(content["entries"]) else None
        read.append(own)
    return read


def _shape(content: dict) -> bytes | None:
    """``content`` without its ranks' own fields, as bytes (None: not a plain dump of entries)."""
    entries = content.get("entries")
    if type(entries) is not list or any(type(entry) is not dict for entry in entries):
        return None
    stripped = []
    for entry in entries:
        entry = dict(entry)  # a copy with a few keys popped: a third of a comprehension over every key
        for name in RANK_OWN:
            entry.pop(name, None)
        stripped.append(entry)
    try:
        return msgspec.json.encode((stripped, {k: v for k, v in content.items() if k != "entries"}))
    except (TypeError, ValueError, msgspec.EncodeError):
        return None


def _with_own_times(first: DumpColumns, entries: list[dict]) -> DumpColumns | None:
    """``first``'s columns with the times, durations and deadlines of ``entries`` (a dump of its
    shape), or None where those would make its reading differ (see the module)."""
    if len({id(entry) for entry in entries}) != len(entries):
        return None
    own = rank_own_times(entries, first.completed.tolist())
    if own is None:
        return None
    t_ns, duration_ns, deadlines = own
    columns = copy(first)  # its other fields shared, as dataclasses.replace shares them, at a third of its cost
    columns.t_ns, columns.duration_ns = np.asarray(t_ns, dtype=np.int64), np.asarray(duration_ns, dtype=np.int64)
    columns.deadlines = {row: deadline for row, deadline in enumerate(deadlines) if deadline >= 0}
    columns.notes = []
    return columns
