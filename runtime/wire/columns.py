"""The numerous events of a trace as numpy columns: what indexing them needs, without the events.

A viewer files millions of transfers, collectives and buffers into its indexes by a handful of
fields each (type, rank, phase, a collective's edge, group and call number, a buffer's name).
:func:`event_columns` turns decoded events — *thin* ones (:data:`THIN_FIELDS`) or full ones —
into an :class:`EventColumns`, and makes on the way the one check of the careful reader
(:func:`~.sanity.checked_events`) that needs an event's own fields (no negative durations);
:class:`Sequences` makes the others on whole columns (sequence numbers, ranks inside the world).
The trace scanner (:mod:`.scan`) builds the columns as it reads a trace; the trace writer builds
them as it writes one and stores them beside it (:mod:`.sidecar`), so an intact trace opens
without decoding its events at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from types import GenericAlias
from typing import Any, Union

import msgspec
import numpy as np

from .protocol import EVENT_TYPES, LAUNCHER_RANK, Buffer, Collective, Event, Freed, Span, Transfer, thin_event_type
from .sanity import MAX_WORLD_SIZE

__all__ = ["THIN_FIELDS", "FILED_IN_COLUMNS", "NotIntact", "EventColumns", "event_columns", "chunk_decoder",
           "Sequences", "transfer_order_key", "transfer_keys"]

THIN_FIELDS: dict[type[Event], tuple[str, ...]] = {
    Transfer: ("phase", "dst", "hop", "legacy_step", "src", "start", "bytes", "kind"),
    Collective: ("phase", "edge", "group", "group_seq", "duration_ns"),
    Buffer: ("phase", "name"),
    Freed: ("phase", "name"),
}
"""The fields the columns hold of each numerous kind of event (``rank`` and ``seq`` of every kind)."""

FILED_IN_COLUMNS: tuple[type[Event], ...] = tuple(THIN_FIELDS)
"""The kinds whose events an index files from their columns alone (the others it reads whole)."""

_TIMED = (Collective, Span)
"""The kinds whose ``duration_ns`` the careful reader checks."""
_CODES = {event_type: code for code, event_type in enumerate(EVENT_TYPES)}
_RANK = attrgetter("rank")
_SEQ = attrgetter("seq")
_PHASE = attrgetter("phase")
_EDGE = attrgetter("edge")
_GROUP = attrgetter("group")
_GROUP_SEQ = attrgetter("group_seq")
_NAME = attrgetter("name")
_DURATION = attrgetter("duration_ns")
_BYTES = attrgetter("bytes")
_KIND = attrgetter("kind")


class NotIntact(Exception):
    """The trace needs the careful reader (:func:`~.trace.read_trace`); the message says why."""


@dataclass
class EventColumns:
    """Consecutive events, one entry each: ``kinds`` (uint8, the type's position in
    :data:`~.protocol.EVENT_TYPES`), ``ranks`` and ``seqs`` (int64) of every event; ``phases``
    (int64) of transfers, collectives, buffers and freed buffers (0 for the others); ``keys``
    (int64: a collective's group or a buffer's name, as its position in ``names``; a transfer's
    ``dst``; -1 for the others), ``numbers`` (int64: a collective's ``group_seq``, a transfer's
    :func:`transfer_order_key`) and ``ends`` (bool: a collective's end edge); of transfers alone
    (0 or False for the others), ``sizes`` (int64: its ``bytes``) and ``p2p`` (bool: its kind is
    ``"p2p"``, not ``"logical"``), which an index written before them lacks (None): what a
    summary counts without decoding a transfer."""

    kinds: np.ndarray
    ranks: np.ndarray
    seqs: np.ndarray
    phases: np.ndarray
    keys: np.ndarray
    numbers: np.ndarray
    ends: np.ndarray
    names: list[str]
    sizes: np.ndarray | None = None
    p2p: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.kinds.size)

    def where(self, *types: type[Event]) -> np.ndarray:
        """Positions (int64, ascending) of the events of ``types``."""
        codes = [_CODES[event_type] for event_type in types]
        mask = self.kinds == codes[0] if len(codes) == 1 else np.isin(self.kinds, codes)
        return np.flatnonzero(mask)

    def slice(self, start: int, stop: int) -> EventColumns:
        """Events ``[start, stop)`` (views, sharing ``names``)."""
        part = slice(start, stop)
        return EventColumns(self.kinds[part], self.ranks[part], self.seqs[part], self.phases[part], self.keys[part],
                            self.numbers[part], self.ends[part], self.names,
                            None if self.sizes is None else self.sizes[part], None if self.p2p is None else self.p2p[part])


def chunk_decoder(thin_only: bool) -> tuple[msgspec.msgpack.Decoder, dict[type, int]]:
    """A decoder of a list of ints and events (see :mod:`.scan`) and the position in EVENT_TYPES
    of each type it produces: the kinds of :data:`THIN_FIELDS` thin, the others whole (or, with
    ``thin_only``, thin too: their rank and seq alone)."""
    members: list[type] = []
    for event_type in EVENT_TYPES:
        fields = THIN_FIELDS.get(event_type, (("duration_ns",) if event_type in _TIMED else ()) if thin_only else None)
        members.append(thin_event_type(event_type, fields) if fields is not None else event_type)
    chunk_type = GenericAlias(list, Union.__getitem__((int, *members)))  # list[Union[int, *members]], built at run time
    return msgspec.msgpack.Decoder(chunk_type), {member: code for code, member in enumerate(members)}


def event_columns(decoded: Sequence[Any], codes: dict[type, int], names: dict[str, int]) -> EventColumns:
    """The columns of ``decoded`` events (thin or whole; ``codes``: each type's position in
    EVENT_TYPES); group and buffer names are numbered in ``names`` (a table shared by every chunk
    of a trace, grown here). Raises :class:`NotIntact` where the careful reader would drop an
    event for its own fields (a negative duration, a number out of range)."""
    count = len(decoded)
    try:
        kinds = np.fromiter(map(codes.__getitem__, map(type, decoded)), np.uint8, count)
        ranks = np.fromiter(map(_RANK, decoded), np.int64, count)
        seqs = np.fromiter(map(_SEQ, decoded), np.int64, count)
        phases = np.zeros(count, np.int64)
        keys = np.full(count, -1, np.int64)
        numbers = np.zeros(count, np.int64)
        ends = np.zeros(count, bool)
        sizes = np.zeros(count, np.int64)
        p2p = np.zeros(count, bool)
        columns = EventColumns(kinds, ranks, seqs, phases, keys, numbers, ends, list(names), sizes, p2p)
        timed = [decoded[at] for at in columns.where(*_TIMED).tolist()]
        if (np.array(list(map(_DURATION, timed)), float) < 0).any():  # None → nan, never negative
            raise NotIntact("a collective or span has a negative duration")
        for event_type in FILED_IN_COLUMNS:
            where = columns.where(event_type)
            if not where.size:
                continue
            events = list(map(decoded.__getitem__, where.tolist()))
            phases[where] = np.fromiter(map(_PHASE, events), np.int64, len(events))
            if event_type is Collective:
                ends[where] = np.fromiter(map("end".__eq__, map(_EDGE, events)), bool, len(events))
                numbers[where] = np.fromiter(map(_GROUP_SEQ, events), np.int64, len(events))
                keys[where] = _numbered(map(_GROUP, events), names, len(events))
            elif event_type is Transfer:
                pairs = list(map(transfer_keys, events))
                keys[where] = [dst for dst, _ in pairs]
                numbers[where] = [order for _, order in pairs]
                sizes[where] = np.fromiter(map(_BYTES, events), np.int64, len(events))
                p2p[where] = np.fromiter(map("p2p".__eq__, map(_KIND, events)), bool, len(events))
            else:
                keys[where] = _numbered(map(_NAME, events), names, len(events))
    except OverflowError:
        raise NotIntact("an event's rank, sequence or phase number is out of range") from None
    except KeyError:
        raise NotIntact("a record is not an event (a bare number)") from None
    columns.names = list(names)
    return columns


def transfer_order_key(hop: int, src: int, start: int) -> int:
    """One int64 that orders a destination's transfers as (hop, source, start) do — after the
    destination, the order in which the viewer lists a step's transfers — or -1 where a field is
    beyond what it packs (hop < 2**11, source < 2**20, start < 2**32): such a transfer must be
    read to be ordered."""
    if 0 <= hop < 1 << 11 and 0 <= src < 1 << 20 and 0 <= start < 1 << 32:
        return hop << 52 | src << 32 | start
    return -1


def transfer_keys(transfer: Any) -> tuple[int, int]:
    """What orders a transfer (a Transfer, or its thin form) without reading it again: its
    destination (-1 beyond an int32) and its :func:`transfer_order_key`. A thin transfer of a trace
    before 1.6 has its hop in ``legacy_step`` (a whole one has it moved into ``hop`` when decoded)."""
    dst = transfer.dst if 0 <= transfer.dst < 1 << 31 else -1
    return dst, transfer_order_key(transfer.hop or transfer.legacy_step, transfer.src, transfer.start)


def _numbered(values: Any, table: dict[str, int], count: int) -> np.ndarray:
    """Each value's number in ``table``, numbering new values in order of first appearance."""
    def number(value: str) -> int:
        found = table.get(value)
        if found is None:
            found = table[value] = len(table)
        return found

    return np.fromiter(map(number, values), np.int64, count)


class Sequences:
    """:func:`~.sanity.checked_events`' checks across events, made on whole columns a chunk at a
    time: any event it would drop raises :class:`NotIntact`; gaps are counted."""

    def __init__(self) -> None:
        self.last: dict[int, int] = {}
        self.gaps = 0
        self.lowest = LAUNCHER_RANK
        self.highest = LAUNCHER_RANK

    def check(self, ranks: np.ndarray, seqs: np.ndarray) -> None:
        """Check one chunk's ranks and sequence numbers, following on from the chunks before."""
        if not ranks.size:
            return
        self.lowest = min(self.lowest, int(ranks.min()))
        self.highest = max(self.highest, int(ranks.max()))
        narrow = -(2**15) <= self.lowest and self.highest < 2**15  # int16 ranks sort by radix
        order = np.argsort(ranks.astype(np.int16) if narrow else ranks, kind="stable")
        rank, seq = ranks[order], seqs[order]
        heads = np.flatnonzero(np.concatenate(([True], rank[1:] != rank[:-1])))
        before = np.concatenate(([0], seq[:-1]))
        before[heads] = [self.last.get(r, -1) for r in rank[heads].tolist()]
        if not (seq > before).all():
            raise NotIntact("a rank repeats a sequence number")
        self.gaps += int(((seq > before + 1) & (before >= 0)).sum())
        tails = np.concatenate((heads[1:] - 1, [len(seq) - 1]))
        self.last.update(zip(rank[heads].tolist(), seq[tails].tolist()))

    def finish(self, world: int | None) -> int:
        """The gaps counted, once the world size (from the first RunStart, if any) fits every rank seen."""
        world = world if world is not None else MAX_WORLD_SIZE
        if not 1 <= world <= MAX_WORLD_SIZE:
            raise NotIntact("its RunStart claims an impossible world size")
        if self.lowest < LAUNCHER_RANK or self.highest >= world:
            raise NotIntact("an event comes from a rank outside the world")
        return self.gaps
