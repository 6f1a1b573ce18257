"""An event log built from a trace a column at a time: how the viewer opens an intact trace
(a million events in about one second of CPU here, where reading and indexing them one by one
took two, and ten million in half a GiB).

:class:`~collviz.runtime.wire.scan.TraceScan` hands an intact trace over in chunks of thin
events (type, rank, and the few fields the indexes need); :func:`index_trace` files each chunk
into an :class:`~.log.EventLog` whose store is the trace's
:class:`~collviz.runtime.wire.stored.StoredEvents`, doing with numpy, per kind of event, what the
log's handlers do one event at a time: transfers grouped by phase, collectives by rank and (their
ends) by phase with each call's first end, buffers by rank and name, memory samples by rank.
The other kinds (phases, gates, checks, spans, starts and ends: a few per rank and step) go
through the log's own handlers. The result equals ``EventLog(read_trace(path).events)``, series
by series (tests/test_trace_index.py compares them).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterator
from operator import attrgetter

import numpy as np

from collviz.runtime.wire.protocol import EVENT_TYPES, Buffer, Collective, Freed, Memory, Transfer
from collviz.runtime.wire.scan import NotIntact, ScanChunk, TraceScan

from .log import EventLog

__all__ = ["THIN_FIELDS", "index_trace"]

THIN_FIELDS = {
    Transfer: ("phase",),
    Collective: ("phase", "edge", "group", "group_seq"),
    Buffer: ("phase", "name"),
    Freed: ("phase", "name"),
}
"""The fields the indexes read from each numerous kind of event (the rest are decoded when shown)."""

_FILED_IN_COLUMNS = (Transfer, Collective, Buffer, Freed, Memory)
_ONE_BY_ONE = tuple(event_type for event_type in EVENT_TYPES if event_type not in _FILED_IN_COLUMNS)
_PHASE = attrgetter("phase")
_EDGE = attrgetter("edge")
_GROUP = attrgetter("group")
_GROUP_SEQ = attrgetter("group_seq")
_NAME = attrgetter("name")


def index_trace(path: str | os.PathLike[str],
                progress: Callable[[int, int], None] | None = None) -> tuple[EventLog, str]:
    """The indexed log of the intact trace at ``path`` and the reader's warning (sequence gaps).

    ``progress(bytes read, bytes in the file)`` follows it. Raises ``TraceError`` as
    ``read_trace`` would, and :class:`~collviz.runtime.wire.scan.NotIntact` for a trace that
    needs ``read_trace`` (damaged, foreign, from a newer or much older collviz).
    """
    scan = TraceScan(path, THIN_FIELDS, progress)
    log = EventLog(store=scan.events)
    try:
        for chunk in scan.chunks():
            _file(log, chunk)
    except OverflowError:
        raise NotIntact("a phase number is out of range") from None
    return log, scan.warning


def _file(log: EventLog, chunk: ScanChunk) -> None:
    """File one chunk's events into ``log``'s indexes."""
    _file_transfers(log, chunk)
    _file_collectives(log, chunk)
    _file_buffers(log, chunk)
    _file_memory(log, chunk)
    positions, events = chunk.select(*_ONE_BY_ONE)
    for position, event in zip(positions.tolist(), events):
        log.index_event(position, event)


def _file_transfers(log: EventLog, chunk: ScanChunk) -> None:
    """Every transfer into its phase's series."""
    positions, events = chunk.select(Transfer)
    phases = np.fromiter(map(_PHASE, events), np.int64, len(events))
    for phase, where in _groups(phases):
        log.phase(phase).transfers.extend(_ints(positions[where]), _ints(phases[where]))


def _file_collectives(log: EventLog, chunk: ScanChunk) -> None:
    """Every collective into its rank's series; each end (of a phase ≥ 0) into its phase's, and
    each call's first end into the phase's calls."""
    positions, events = chunk.select(Collective)
    if not events:
        return
    phases = np.fromiter(map(_PHASE, events), np.int64, len(events))
    for rank, where in _groups(chunk.ranks[positions - chunk.first]):
        log.rank(rank).collectives.extend(_ints(positions[where]), _ints(phases[where]))
    ends = np.fromiter(map("end".__eq__, map(_EDGE, events)), bool, len(events)) & (phases >= 0)
    chosen = np.flatnonzero(ends)
    if not chosen.size:
        return
    for phase, where in _groups(phases[chosen]):
        log.phase(phase).collectives.extend(_ints(positions[chosen[where]]), _ints(phases[chosen[where]]))
    ended = list(map(events.__getitem__, chosen.tolist()))
    groups, names = _numbered(list(map(_GROUP, ended)))
    numbers = np.fromiter(map(_GROUP_SEQ, ended), np.int64, len(ended))
    phases, at = phases[chosen], positions[chosen]
    order = np.lexsort((at, numbers, groups, phases))  # each call's ends together, the earliest first
    first = np.concatenate(([True], (np.diff(phases[order]) != 0) | (np.diff(groups[order]) != 0)
                            | (np.diff(numbers[order]) != 0)))
    firsts = order[first]
    firsts = firsts[np.argsort(at[firsts])]
    for phase, group, number, position in zip(phases[firsts].tolist(), groups[firsts].tolist(),
                                              numbers[firsts].tolist(), at[firsts].tolist()):
        log.phase(phase).add_call(position, (names[group], number))


def _file_buffers(log: EventLog, chunk: ScanChunk) -> None:
    """Every Buffer and Freed event into the series of its rank's buffer of that name."""
    positions, events = chunk.select(Buffer, Freed)
    if not events:
        return
    codes, names = _numbered(list(map(_NAME, events)))
    keys = chunk.ranks[positions - chunk.first] * len(names) + codes  # one number per (rank, name)
    phases = np.fromiter(map(_PHASE, events), np.int64, len(events))
    # in order of each buffer's first event: a rank's buffers are shown in the order they appeared
    for key, where in sorted(_groups(keys), key=lambda group: group[1][0]):
        rank, name = divmod(key, len(names))
        log.rank(rank).buffer(names[name]).extend(_ints(positions[where]), _ints(phases[where]))


def _file_memory(log: EventLog, chunk: ScanChunk) -> None:
    """Every memory sample into its rank's memory series."""
    positions, events = chunk.select(Memory)
    for rank, where in _groups(chunk.ranks[positions - chunk.first]):
        log.rank(rank).memory.extend(_ints(positions[where]), list(map(events.__getitem__, where.tolist())))


def _groups(keys: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(key, the positions in ``keys`` that hold it, in order) for each distinct key, ascending."""
    if not keys.size:
        return
    if keys[0] == keys[-1] and (keys == keys[0]).all():
        yield int(keys[0]), np.arange(keys.size)
        return
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    for part in np.split(order, np.flatnonzero(ordered[1:] != ordered[:-1]) + 1):
        yield int(keys[part[0]]), part


def _numbered(values: list[str]) -> tuple[np.ndarray, list[str]]:
    """Each value's number among the distinct values (numbered in order of first appearance), and
    those values."""
    distinct = list(dict.fromkeys(values))
    number = {value: n for n, value in enumerate(distinct)}
    return np.fromiter(map(number.__getitem__, values), np.int64, len(values)), distinct


def _ints(values: np.ndarray) -> array:
    """An int64 numpy array as the ``array("q")`` the series hold."""
    return array("q", values.astype(np.int64, copy=False).tobytes())
