"""A recorded trace's summary read through its index: ``collviz replay TRACE --headless`` (and
``--json``) at the viewer's speed.

The summary reads every memory sample but only counts transfers (most of a large trace's events:
64 of every 67 at 64 ranks) and lists the first :data:`~.summary.SHOWN_TRANSFERS` of each phase,
and the first :data:`~.summary.SHOWN_BUFFERS` buffers of each rank in each phase. Where the
trace's writer left an index of version 3 or later (:mod:`~..wire.sidecar`: a transfer's ``dst``,
order key, ``bytes`` and kind as columns), :func:`read_for_summary` decodes, a part at a time
with one msgspec call each, only the events the summary shows (buffers past each rank's first in
a phase are counted from the columns; ``--json`` shows no buffers, so they all stay encoded) and
digests each phase's transfers from the columns with numpy, decoding the few it lists. Of the
calls (:mod:`.indexed_calls`), the begins serve only the check that every rank called the same
collective: decoded thin to fingerprint codes, never kept, checked with their places from the
columns; the text reads each call's first end and every end of a phase's first calls (``--json``
lists every call: every end). The index's own guarantees hold as for the viewer
(:func:`~..wire.sidecar.TraceIndex.parts`: the CRC-32 of every byte of the trace first), and so
do the careful reader's checks across events (sequence numbers, ranks inside the world), made on
the columns.

Anything else returns None and the caller reads the trace as before (:func:`~..wire.trace.read_trace`,
every event decoded and checked): no index, a stale or damaged one, one of version 2 (it lacks the
transfers' bytes and kind; such a trace replays silently at its old speed, with the same output: a
line saying so would add nothing a user could act on but re-recording), a transfer whose order
the key cannot pack, a trace without a RunStart or one that fails a check. Either way the
output is the same (tests/runtime/test_indexed_summary.py compares them).
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..observation.fingerprints import Disagreement
from ..wire.columns import NotIntact, Sequences
from ..wire.protocol import EVENT_TYPES, PROTOCOL_VERSION, AnyEvent, Buffer, Collective, RunStart, Transfer
from ..wire.sanity import gaps_note
from ..wire.sidecar import read_index
from ..wire.stored import StoredEvents, decode_sharing
from ..wire.trace import PROGRESS_RECORDS, Progress, trace_layout
from .bench_table import BENCH_SCENARIO_NAME
from .indexed_calls import PRINTED_DECODER, BegunCalls, ShownEnds
from .summary import SHOWN_BUFFERS, SHOWN_TRANSFERS, TransferDigest

__all__ = ["INDEX_PART", "IndexedSummary", "read_for_summary"]

INDEX_PART = 1 << 18
"""Events read from the trace at a time (their records are read together: about 40 MB)."""

_COLLECTIVE = EVENT_TYPES.index(Collective)
"""A collective's code in the index's ``kinds`` column."""

_SRC_BITS, _START_BITS = 20, 32
"""How :func:`~..wire.columns.transfer_order_key` packs a transfer's source and start."""


@dataclass
class IndexedSummary:
    """What the summary needs of an indexed trace: its ``events`` but transfers and calls' begins
    (for the JSON document, buffers too; for the text, only the first
    :data:`~.summary.SHOWN_BUFFERS` buffers of each rank in each phase, and the calls' ends it
    reads: :class:`~.indexed_calls.ShownEnds`), in log order; each phase's ``transfers``
    digested; the calls that disagree (``mismatches``, found from the begins); how many
    ``buffers`` each (phase, rank) holds in all; the careful reader's ``warning``."""

    events: list[AnyEvent]
    transfers: dict[int, TransferDigest]
    mismatches: list[Disagreement]
    buffers: dict[tuple[int, int], int] = field(default_factory=dict)
    warning: str = ""


@dataclass
class _PhaseTransfers:
    """One phase's transfer columns, gathered a part at a time."""

    positions: list[np.ndarray] = field(default_factory=list)
    dsts: list[np.ndarray] = field(default_factory=list)
    orders: list[np.ndarray] = field(default_factory=list)
    total_bytes: int = 0
    p2p: bool = False


def read_for_summary(path: str | os.PathLike[str], *, text: bool = True,
                     progress: Progress | None = None) -> IndexedSummary | None:
    """The summary's input read through the index beside the trace at ``path`` (``text``: the text
    summary's, with its Buffer events and only the calls' ends it reads; else the JSON document's,
    every end and no buffer), or None where it must be read the careful way (see the module's
    docstring); ``progress(bytes read, bytes in the file)`` follows a large one, a part at a time.
    Raises ``TraceError`` as ``read_trace`` would (a missing file, not a trace, a damaged header)."""
    layout = trace_layout(path)
    if not layout.checksummed or layout.version > PROTOCOL_VERSION:
        return None
    index = read_index(path, layout.first_record)
    if index is None:
        return None
    decoded = tuple(kind for kind in EVENT_TYPES if kind not in (Transfer, Buffer))
    events: list[AnyEvent] = []
    positions: list[np.ndarray] = []
    begun = BegunCalls()
    shown = ShownEnds()
    unread: list[np.ndarray] = []  # ends the text reads only if some call's first end is untimed
    held: dict[tuple[int, int], int] = {}
    phases: dict[int, _PhaseTransfers] = defaultdict(_PhaseTransfers)
    sequences = Sequences()
    try:
        for part in index.parts(INDEX_PART):
            columns = part.columns
            if columns.sizes is None or columns.p2p is None:
                return None  # a version-2 index: transfers would have to be decoded
            sequences.check(columns.ranks, columns.seqs)
            where = columns.where(*decoded)
            calls = where[columns.kinds[where] == _COLLECTIVE]
            begins = calls[~columns.ends[calls]]
            begun.add(begins + part.first, columns.keys[begins], columns.numbers[begins],
                      part.decode_at(begins, PRINTED_DECODER.decode))
            left = begins
            if text:
                ends = calls[columns.ends[calls]]
                skipped = ends[~shown.pick(columns.phases[ends], columns.keys[ends], columns.numbers[ends])]
                unread.append(skipped + part.first)
                left = np.sort(np.concatenate((begins, skipped)))
                found = columns.where(Buffer)
                listed = found[_first_buffers(held, columns.phases[found], columns.ranks[found])]
                where = np.sort(np.concatenate((where, listed)))
            where = np.setdiff1d(where, left, assume_unique=True)
            events += part.decode_at(where, decode_sharing)
            positions.append(where + part.first)
            where = columns.where(Transfer)
            _gather(phases, where + part.first, columns.phases[where], columns.keys[where], columns.numbers[where],
                    columns.sizes[where], columns.p2p[where])
            if progress is not None and len(index) >= PROGRESS_RECORDS:
                progress(int(index.offsets[part.first + len(columns)]), int(index.offsets[-1]))
        start = next((event for event in events if isinstance(event, RunStart)), None)
        if start is None:
            return None  # the world's size would come from every event's rank
        gaps = sequences.finish(start.world_size)
        stored = StoredEvents(path)
        stored.add_records(index.offsets[:-1].data, int(index.offsets[-1]))
        try:
            digests = {phase: _digest(gathered, stored) for phase, gathered in phases.items()}
            mismatches = begun.mismatches(stored)
            if text and (start.scenario == BENCH_SCENARIO_NAME  # its table reads every end
                         or not shown.serves([event for event in events if type(event) is Collective])):
                events = _with_unread(events, positions, np.concatenate(unread), stored)
        finally:
            stored.close()
    except NotIntact:
        return None
    return IndexedSummary(events, digests, mismatches, held, f"{path}: {gaps_note(gaps)}" if gaps else "")


def _with_unread(events: list[AnyEvent], positions: list[np.ndarray], unread: np.ndarray,
                 stored: StoredEvents) -> list[AnyEvent]:
    """``events`` (at log ``positions``) with the Collective ends at ``unread`` read from ``stored``,
    in log order. Raises NotIntact where one is no Collective."""
    if not unread.size:
        return events
    added = list(map(stored.__getitem__, unread.tolist()))
    if not all(type(event) is Collective for event in added):
        raise NotIntact("the index files as a collective an event that is none")
    merged = events + added
    return [merged[at] for at in np.argsort(np.concatenate((*positions, unread)), kind="stable").tolist()]


def _first_buffers(held: dict[tuple[int, int], int], phases: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Which of one part's buffers (their ``phases`` and ``ranks``, in log order) the summary
    lists: each (phase, rank)'s first :data:`~.summary.SHOWN_BUFFERS`, counting ``held``, the
    buffers of the parts before (updated with this part's). A rank's sequence numbers rise in log
    order (the careful reader's check, made on the columns), so these are its lowest."""
    if not phases.size:
        return np.zeros(0, bool)
    order = np.lexsort((ranks, phases))  # stable: log order within each (phase, rank)
    phase, rank = phases[order], ranks[order]
    heads = np.flatnonzero(np.concatenate(([True], (phase[1:] != phase[:-1]) | (rank[1:] != rank[:-1]))))
    counts = np.diff(np.append(heads, order.size))
    keys = list(zip(phase[heads].tolist(), rank[heads].tolist()))
    before = np.array([held.get(key, 0) for key in keys], np.int64)
    within = np.arange(order.size) - np.repeat(heads - before, counts)
    shown = np.zeros(order.size, bool)
    shown[order] = within < SHOWN_BUFFERS
    held.update(zip(keys, (before + counts).tolist()))
    return shown


def _gather(phases: dict[int, _PhaseTransfers], positions: np.ndarray, phase_of: np.ndarray, dsts: np.ndarray,
            orders: np.ndarray, sizes: np.ndarray, p2p: np.ndarray) -> None:
    """File one part's transfers (their log positions and columns) under their phases."""
    if not positions.size:
        return
    order = np.argsort(phase_of, kind="stable")
    bounds = np.flatnonzero(np.diff(phase_of[order])) + 1
    for group in np.split(order, bounds):
        gathered = phases[int(phase_of[group[0]])]
        gathered.positions.append(positions[group])
        gathered.dsts.append(dsts[group])
        gathered.orders.append(orders[group])
        gathered.total_bytes += int(sizes[group].sum(dtype=np.int64))
        gathered.p2p = gathered.p2p or bool(p2p[group].any())


def _digest(gathered: _PhaseTransfers, stored: StoredEvents) -> TransferDigest:
    """One phase's digest: the first transfers by (dst, src, start), ties in log order, decoded.
    Raises NotIntact where some transfer's order is not in its columns."""
    positions = np.concatenate(gathered.positions)
    dsts = np.concatenate(gathered.dsts)
    orders = np.concatenate(gathered.orders)
    if (dsts < 0).any() or (orders < 0).any():
        raise NotIntact("a transfer's order is beyond what its columns pack")
    sources = (orders >> _START_BITS) & ((1 << _SRC_BITS) - 1)
    starts = orders & ((1 << _START_BITS) - 1)
    first = np.lexsort((positions, starts, sources, dsts))[:SHOWN_TRANSFERS]
    shown = [event for event in map(stored.__getitem__, positions[first].tolist()) if isinstance(event, Transfer)]
    if len(shown) < first.size:
        raise NotIntact("the index files as a transfer an event that is none")
    return TransferDigest(int(positions.size), gathered.total_bytes, gathered.p2p, shown)
