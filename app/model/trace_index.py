"""An event log built from a trace a column at a time: how the viewer opens an intact trace
(a million events in a few tenths of a second of CPU where its writer left an index, about one
second where it must be scanned; reading and indexing them one by one took two).

Where the trace's writer left an intact index for a trace of its size
(:func:`~collviz.runtime.wire.sidecar.read_index`), its columns are filed as they are, a part at a
time, every record of a part checked against its own CRC-32 before it is filed: up to the first
step the viewer shows when it opens (:func:`open_trace`), the rest afterwards (:class:`TraceRest`,
in the viewer's background), the CRC-32 of every byte of the trace and the careful reader's checks
across events last; a trace that fails them is scanned. Otherwise
:class:`~collviz.runtime.wire.scan.TraceScan` hands the trace over in chunks of columns built
from thin events. Either way :func:`index_trace` files them into an :class:`~.log.EventLog`
whose store is the trace's :class:`~collviz.runtime.wire.stored.StoredEvents`, doing with numpy,
per kind of event, what the log's handlers do one event at a time: transfers grouped by phase,
collectives by rank and (their ends) by phase with each call's first end, buffers by rank and
name. Memory samples and the other kinds (phases, gates, checks, spans, starts and ends: a few per
rank and step; of an indexed trace, every one before any part) are decoded whole and go through
the log's own handlers or series. The result
equals ``EventLog(read_trace(path).events)``, series by series (tests/app/test_trace_index.py
compares them, with and without the index).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from collviz.runtime.wire.columns import FILED_IN_COLUMNS, EventColumns, Sequences
from collviz.runtime.wire.protocol import EVENT_TYPES, Buffer, Collective, Freed, Memory, Transfer
from collviz.runtime.wire.scan import NotIntact, TraceScan
from collviz.runtime.wire.sanity import gaps_note
from collviz.runtime.wire.sidecar import IndexPart, TraceIndex, read_index
from collviz.runtime.wire.trace import TraceError

from .log import EventLog
from .navigation import exchange_steps

__all__ = ["INDEX_PART", "FiledPart", "TraceRest", "index_trace", "open_trace", "file_part", "read_rest"]

INDEX_PART = 1 << 18
"""Events of an indexed trace filed at a time (their records are read and checked together: about
40 MB at 64 ranks)."""

_ONE_BY_ONE = tuple(event_type for event_type in EVENT_TYPES if event_type not in (*FILED_IN_COLUMNS, Memory))

_Select = Callable[..., tuple[np.ndarray, list[Any]]]
"""``select(*types)``: the log positions (int64) and whole events of those types in a part of the log."""


@dataclass(frozen=True)
class FiledPart:
    """Consecutive events of an indexed trace, read and checked (every record against its own
    CRC-32) away from the log, ready for :func:`file_part`: their ``columns`` from event
    ``first`` on, and their memory samples decoded (``memory``, at log positions ``memory_at``)."""

    first: int
    columns: EventColumns
    memory_at: np.ndarray
    memory: list[Memory]


class TraceRest:
    """What opening an indexed trace left for later: its parts after the first step the viewer
    shows, and the checks only the whole trace can pass (the CRC-32 of all its bytes, the careful
    reader's checks across events).

    :meth:`parts` reads them (a worker thread may: it touches no log), the log's owner files each
    with :func:`file_part`, and :meth:`finish` then gives the careful reader's warning (sequence
    gaps); either raises :class:`~collviz.runtime.wire.scan.NotIntact` where the trace fails."""

    def __init__(self, index: TraceIndex, sequences: Sequences, world: int | None) -> None:
        self._index = index
        self._next = 0
        """The first event not handed over yet."""
        self._sequences = sequences
        self._world = world

    def parts(self, whole: bool = True) -> Iterator[FiledPart]:
        """The parts not handed over yet, in order, every record checked; with ``whole``, the
        CRC-32 of every byte of the trace taken in the same pass (the bytes of the parts handed
        over before read again for it alone) and checked after the last (NotIntact if it is not
        the one indexed). The open takes the first step's parts without it, so that its first
        frame waits for no CRC-32 but its records'."""
        for part in self._index.parts(INDEX_PART, whole, records=True, first=self._next):
            self._next = part.first + len(part.columns)
            yield _read_part(part, self._sequences)

    def finish(self) -> str:
        """The careful reader's warning (sequence gaps), once every part has been taken (and so the
        CRC-32 of the whole trace found to be the one indexed, in the background: the first frame
        waits for none of it)."""
        gaps = self._sequences.finish(self._world)
        return f"{self._index.path}: {gaps_note(gaps)}" if gaps else ""


def index_trace(path: str | os.PathLike[str],
                progress: Callable[[int, int], None] | None = None) -> tuple[EventLog, str]:
    """The indexed log of the intact trace at ``path`` and the reader's warning (sequence gaps):
    :func:`open_trace` with what it leaves for later done at once."""
    log, rest, warning = open_trace(path, progress)
    try:
        return read_rest(log, rest, warning)
    except NotIntact:
        return _scan(TraceScan(path, progress))  # the trace is not what its index describes


def read_rest(log: EventLog, rest: TraceRest | None, warning: str) -> tuple[EventLog, str]:
    """``log`` with ``rest`` (None: nothing left) filed into it, and the reader's warning (``warning``
    where nothing was left; else the careful reader's, once the rest is checked). Raises
    :class:`NotIntact` where the trace is not what its index describes."""
    if rest is None:
        return log, warning
    for part in rest.parts():
        file_part(log, part)
    return log, rest.finish()


def open_trace(path: str | os.PathLike[str], progress: Callable[[int, int], None] | None = None,
               ) -> tuple[EventLog, TraceRest | None, str]:
    """The log of the intact trace at ``path`` as far as its first frame needs, what is left
    (None: nothing) and the reader's warning (sequence gaps; from :meth:`TraceRest.finish` where
    something is left).

    Where the trace's writer left an index that agrees with it (:func:`read_index`), the log holds
    every event of the kinds filed one by one (steps, gates, starts and ends: a few per rank and
    step) and, a part at a time, the other events up to the end of the first step that moved data
    (where the viewer opens: :func:`~.navigation.first_collective`), every record of those parts
    checked; :attr:`EventLog.filed` says how far. Otherwise the trace is scanned whole.
    ``progress(bytes read, bytes in the file)`` follows it. Raises ``TraceError`` as
    ``read_trace`` would, and :class:`~collviz.runtime.wire.scan.NotIntact` for a trace that
    needs ``read_trace`` (damaged, foreign, from a newer or much older collviz).
    """
    scan = TraceScan(path, progress)
    index = read_index(path, scan.layout.first_record)
    if index is not None:
        log = EventLog(store=scan.events)
        try:
            return log, _open_index(log, index, scan), ""
        except NotIntact:
            scan = TraceScan(path, progress)  # the trace is not what its index describes: scan it afresh
    log, warning = _scan(scan)
    return log, None, warning


def file_part(log: EventLog, part: FiledPart) -> None:
    """File ``part`` (the next one of :meth:`TraceRest.parts`) into ``log``'s indexes."""
    _file_columns(log, part.first, part.columns)
    _file_memory(log, part.memory_at, part.columns.ranks[part.memory_at - part.first], part.memory)
    log.mark_filed(part.first + len(part.columns))


def _scan(scan: TraceScan) -> tuple[EventLog, str]:
    """The log of the trace ``scan`` reads, scanned whole, and the reader's warning."""
    log = EventLog(store=scan.events)
    for chunk in scan.chunks():
        _file(log, chunk.first, chunk.columns, chunk.select)
    return log, scan.warning


def _open_index(log: EventLog, index: TraceIndex, scan: TraceScan) -> TraceRest:
    """File what :func:`open_trace` files of ``index`` (the trace ``scan`` would read) into ``log``;
    what is left. Raises NotIntact where a record of it fails its checksum."""
    scan.events.add_records(index.offsets[:-1], int(index.offsets[-1]))
    log.mark_filed(0)
    try:
        for position in index.where(*_ONE_BY_ONE).tolist():
            log.index_event(position, scan.events[position])  # read and checked record by record
    except TraceError as exc:
        raise NotIntact(str(exc)) from None
    first = log.run_start
    sequences = Sequences()
    rest = TraceRest(index, sequences, first.world_size if first else None)
    parts = rest.parts(whole=False)
    while not _first_step_filed(log):
        part = next(parts, None)
        if part is None:
            break
        file_part(log, part)
    return rest


def _first_step_filed(log: EventLog) -> bool:
    """Whether ``log`` is filed past the end of the first step that moved data (every earlier step
    filed too), or whole."""
    steps = exchange_steps(log)
    return log.filed == len(log) or bool(steps) and log.step_ends[steps[0]] <= log.filed


def _read_part(part: IndexPart, sequences: Sequences) -> FiledPart:
    """``part`` read for :func:`file_part`, its sequence numbers checked after those before."""
    sequences.check(part.columns.ranks, part.columns.seqs)
    memory_at, memory = part.select(Memory)
    return FiledPart(part.first, part.columns, memory_at, cast(list[Memory], memory))


def _file(log: EventLog, first: int, columns: EventColumns, select: _Select) -> None:
    """File the events at log positions ``first`` on, whose columns are ``columns``, into ``log``'s indexes."""
    _file_columns(log, first, columns)
    positions, events = select(Memory)
    _file_memory(log, positions, columns.ranks[positions - first], events)
    positions, events = select(*_ONE_BY_ONE)
    for position, event in zip(positions.tolist(), events):
        log.index_event(position, event)


def _file_columns(log: EventLog, first: int, columns: EventColumns) -> None:
    """File the transfers, collectives and buffers at log positions ``first`` on (``columns``)
    from their columns alone."""
    _file_transfers(log, first, columns)
    _file_collectives(log, first, columns)
    _file_buffers(log, first, columns)


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
