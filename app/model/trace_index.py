"""An event log built from a trace a column at a time: how the viewer opens an intact trace
(a million events in a few tenths of a second of CPU where its writer left an index, about one
second where it must be scanned; reading and indexing them one by one took two).

Where the trace's writer left an intact index that matches the trace byte for byte
(:func:`~collviz.runtime.wire.sidecar.read_index`), its columns are filed as they are; otherwise
:class:`~collviz.runtime.wire.scan.TraceScan` hands the trace over in chunks of columns built
from thin events. Either way :func:`index_trace` files them into an :class:`~.log.EventLog`
whose store is the trace's :class:`~collviz.runtime.wire.stored.StoredEvents`, doing with numpy,
per kind of event, what the log's handlers do one event at a time: transfers grouped by phase,
collectives by rank and (their ends) by phase with each call's first end, buffers by rank and
name. Memory samples and the other kinds (phases, gates, checks, spans, starts and ends: a few per
rank and step) are decoded whole and go through the log's own handlers or series. The result
equals ``EventLog(read_trace(path).events)``, series by series (tests/app/test_trace_index.py
compares them, with and without the index).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from collviz.runtime.wire.columns import FILED_IN_COLUMNS, EventColumns, Sequences
from collviz.runtime.wire.protocol import EVENT_TYPES, Buffer, Collective, Freed, Memory, RunStart, Transfer
from collviz.runtime.wire.scan import NotIntact, TraceScan
from collviz.runtime.wire.sanity import gaps_note
from collviz.runtime.wire.sidecar import TraceIndex, read_index
from collviz.runtime.wire.trace import PROGRESS_RECORDS

from .log import EventLog

__all__ = ["INDEX_PART", "index_trace"]

INDEX_PART = 1 << 18
"""Events of an indexed trace filed at a time (their records are read together: about 40 MB at 64
ranks; progress is reported after each)."""

_ONE_BY_ONE = tuple(event_type for event_type in EVENT_TYPES if event_type not in (*FILED_IN_COLUMNS, Memory))

_Select = Callable[..., tuple[np.ndarray, list[Any]]]
"""``select(*types)``: the log positions (int64) and whole events of those types in a part of the log."""


def index_trace(path: str | os.PathLike[str],
                progress: Callable[[int, int], None] | None = None) -> tuple[EventLog, str]:
    """The indexed log of the intact trace at ``path`` and the reader's warning (sequence gaps).

    ``progress(bytes read, bytes in the file)`` follows it. Raises ``TraceError`` as
    ``read_trace`` would, and :class:`~collviz.runtime.wire.scan.NotIntact` for a trace that
    needs ``read_trace`` (damaged, foreign, from a newer or much older collviz).
    """
    scan = TraceScan(path, progress)
    index = read_index(path, scan.layout.first_record)
    if index is not None:
        log = EventLog(store=scan.events)
        try:
            return log, _file_index(log, index, scan, progress)
        except NotIntact:
            scan = TraceScan(path, progress)  # the trace is not what its index describes: scan it afresh
    log = EventLog(store=scan.events)
    for chunk in scan.chunks():
        _file(log, chunk.first, chunk.columns, chunk.select)
    return log, scan.warning


def _file_index(log: EventLog, index: TraceIndex, scan: TraceScan,
                progress: Callable[[int, int], None] | None) -> str:
    """File the events of ``index`` (the trace ``scan`` would read) into ``log``, a part at a time,
    making the careful reader's checks across events; the reader's warning (sequence gaps). Raises
    NotIntact where they fail, or where the trace is not byte for byte the one indexed."""
    scan.events.add_records(index.offsets[:-1].data, int(index.offsets[-1]))
    sequences = Sequences()
    world: int | None = None
    for part in index.parts(INDEX_PART):
        sequences.check(part.columns.ranks, part.columns.seqs)
        if world is None:
            _, run_starts = part.select(RunStart)
            first = run_starts[0] if run_starts else None
            world = first.world_size if isinstance(first, RunStart) else None
        _file(log, part.first, part.columns, part.select)
        if progress is not None and len(index) >= PROGRESS_RECORDS:
            progress(int(index.offsets[part.first + len(part.columns)]), int(index.offsets[-1]))
    gaps = sequences.finish(world)
    return f"{scan.path}: {gaps_note(gaps)}" if gaps else ""


def _file(log: EventLog, first: int, columns: EventColumns, select: _Select) -> None:
    """File the events at log positions ``first`` on, whose columns are ``columns``, into ``log``'s indexes."""
    _file_transfers(log, first, columns)
    _file_collectives(log, first, columns)
    _file_buffers(log, first, columns)
    positions, events = select(Memory)
    _file_memory(log, positions, columns.ranks[positions - first], events)
    positions, events = select(*_ONE_BY_ONE)
    for position, event in zip(positions.tolist(), events):
        log.index_event(position, event)


def _file_transfers(log: EventLog, first: int, columns: EventColumns) -> None:
    """Every transfer into its phase's series."""
    where = columns.where(Transfer)
    positions, phases = where + first, columns.phases[where]
    dsts, orders = columns.keys[where], columns.numbers[where]
    for phase, group in _groups(phases):
        index = log.phase(phase)
        index.transfers.extend(_ints(positions[group]), _ints(phases[group]))
        index.transfer_dsts.extend(_ints(dsts[group]))
        index.transfer_orders.extend(_ints(orders[group]))


def _file_collectives(log: EventLog, first: int, columns: EventColumns) -> None:
    """Every collective into its rank's series; each end (of a phase ≥ 0) into its phase's, and
    each call's first end into the phase's calls."""
    where = columns.where(Collective)
    if not where.size:
        return
    positions, phases = where + first, columns.phases[where]
    for rank, group in _groups(columns.ranks[where]):
        log.rank(rank).collectives.extend(_ints(positions[group]), _ints(phases[group]))
    chosen = np.flatnonzero(columns.ends[where] & (phases >= 0))
    if not chosen.size:
        return
    for phase, group in _groups(phases[chosen]):
        log.phase(phase).collectives.extend(_ints(positions[chosen[group]]), _ints(phases[chosen[group]]))
    groups, numbers = columns.keys[where[chosen]], columns.numbers[where[chosen]]
    names = columns.names
    phases, at = phases[chosen], positions[chosen]
    order = np.lexsort((at, numbers, groups, phases))  # each call's ends together, the earliest first
    leading = np.concatenate(([True], (np.diff(phases[order]) != 0) | (np.diff(groups[order]) != 0)
                              | (np.diff(numbers[order]) != 0)))
    firsts = order[leading]
    firsts = firsts[np.argsort(at[firsts])]
    for phase, group, number, position in zip(phases[firsts].tolist(), groups[firsts].tolist(),
                                              numbers[firsts].tolist(), at[firsts].tolist()):
        log.phase(phase).add_call(position, (names[group], number))


def _file_buffers(log: EventLog, first: int, columns: EventColumns) -> None:
    """Every Buffer and Freed event into the series of its rank's buffer of that name."""
    where = columns.where(Buffer, Freed)
    if not where.size:
        return
    names = columns.names
    keys = columns.ranks[where] * len(names) + columns.keys[where]  # one number per (rank, name)
    positions, phases = where + first, columns.phases[where]
    # in order of each buffer's first event: a rank's buffers are shown in the order they appeared
    for key, group in sorted(_groups(keys), key=lambda found: found[1][0]):
        rank, name = divmod(key, len(names))
        log.rank(rank).buffer(names[name]).extend(_ints(positions[group]), _ints(phases[group]))


def _file_memory(log: EventLog, positions: np.ndarray, ranks: np.ndarray, events: list[Memory]) -> None:
    """Every memory sample (``events``, at log ``positions``, from ``ranks``) into its rank's memory series."""
    for rank, where in _groups(ranks):
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


def _ints(values: np.ndarray) -> array:
    """An int64 numpy array as the ``array("q")`` the series hold."""
    return array("q", values.astype(np.int64, copy=False).tobytes())
