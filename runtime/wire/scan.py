"""Opening an intact trace fast: its records located, checksummed and decoded a chunk at a time.

:func:`~.trace.read_trace` decodes every record into a full event, one call each, and checks the
events one by one: two microseconds and a few hundred bytes per event, all of them held (a
10-million-event trace: 20 s and several GB). A viewer must index every event but shows a few
hundred at a time. :class:`TraceScan` reads the file in chunks of :data:`CHUNK_BYTES` and, per
chunk:

1. walks the records' length fields (the one step that visits each record from Python);
2. checks every record's CRC-32 with one pass of zlib over the chunk (:func:`~.records.checksums_hold`);
3. decodes every payload with one msgspec call: the numerous kinds of :data:`~.columns.THIN_FIELDS`
   into *thin* events (:func:`~.protocol.thin_event_type`: only those fields, plus ``rank`` and
   ``seq``), the others in full;
4. turns them into :class:`~.columns.EventColumns` and makes :func:`~.sanity.checked_events`'
   checks on whole columns (numpy);

and hands each :class:`ScanChunk` to the caller to index. The events stay in the file:
:class:`~.stored.StoredEvents` decodes any of them when it is read. (A trace its writer left an
index beside, :mod:`.sidecar`, needs no scan at all.)

A trace that the careful reader would report on in any way but sequence gaps — a damaged or
truncated record, a type this collviz does not know, an inconsistent event, a record too large
to load whole, a trace without checksums or from a newer minor version — raises
:class:`NotIntact`, and the caller reads it with :func:`~.trace.read_trace` instead, which keeps
what it can and says what was wrong. For an intact trace both give the same events.
"""

from __future__ import annotations

import os
import struct
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from io import BufferedIOBase
from typing import Any

import msgspec
import numpy as np

from .columns import EventColumns, NotIntact, Sequences, chunk_decoder, event_columns
from .protocol import PROTOCOL_VERSION, Event, RunStart
from .records import LARGE_PAYLOAD, HeaderSlots, checksums_hold
from .sanity import gaps_note
from .stored import StoredEvents
from .trace import PROGRESS_RECORDS, Progress, trace_layout

__all__ = ["CHUNK_BYTES", "NotIntact", "ScanChunk", "TraceScan"]

CHUNK_BYTES = 16 << 20
"""Bytes read and decoded at a time (about 100,000 events)."""

_HEAD = 5
"""Bytes kept in front of each chunk for the msgpack array header that makes it one document."""

_LENGTH = struct.Struct("<I")


@dataclass
class ScanChunk:
    """Consecutive events of a trace: ``decoded[i]`` is event ``first + i``, thin or full (typed
    ``Any``: thin event types are made at run time); ``columns`` their columns."""

    first: int
    decoded: Sequence[Any]
    columns: EventColumns
    _selected: dict[tuple[type[Event], ...], tuple[np.ndarray, list[Any]]] = field(default_factory=dict, repr=False)

    def select(self, *types: type[Event]) -> tuple[np.ndarray, list[Any]]:
        """The log positions (int64) and decoded events of ``types``, in log order."""
        found = self._selected.get(types)
        if found is None:
            where = self.columns.where(*types)
            found = self._selected[types] = (where + self.first, list(map(self.decoded.__getitem__, where.tolist())))
        return found


class TraceScan:
    """One pass over an intact trace, a chunk at a time::

        scan = TraceScan(path, {Transfer: ("phase",)})
        for chunk in scan.chunks():
            ...  # index the chunk
        scan.events, scan.warning

    The kinds of :data:`~.columns.THIN_FIELDS` arrive thin, the others as full events.
    :attr:`events` holds every event scanned so far (decoded when read). ``progress(bytes read,
    bytes in the file)`` follows the reading of large traces (after each chunk, once :data:`~.trace.PROGRESS_RECORDS` events are
    in). Raises :class:`~.trace.TraceError` where :func:`~.trace.read_trace` would, and
    :class:`NotIntact` (from :meth:`chunks`, possibly after some chunks) where the trace needs it.
    """

    def __init__(self, path: str | os.PathLike[str], progress: Progress | None = None) -> None:
        self.path = path
        self.layout = trace_layout(path)
        if not self.layout.checksummed:
            raise NotIntact("its records carry no checksums (a trace from before collviz 0.2)")
        if self.layout.version > PROTOCOL_VERSION:
            raise NotIntact(f"it is from a newer minor version ({self.layout.version[0]}.{self.layout.version[1]})")
        self.events = StoredEvents(path)
        self.warning = ""
        """What the careful reader would warn about once :meth:`chunks` is done (sequence gaps only)."""
        self._progress = progress

    def chunks(self) -> Iterator[ScanChunk]:
        """Every chunk of events, in order; checks the whole trace when the last has been taken."""
        decoder, codes = chunk_decoder(thin_only=False)
        sequences = Sequences()
        world: int | None = None
        size = self.layout.size
        with open(self.path, "rb") as file:
            file.seek(self.layout.first_record)
            room = min(CHUNK_BYTES, size - self.layout.first_record)
            for chunk, starts, end in _chunks(file, self.layout.first_record, room, decoder, codes):
                sequences.check(chunk.columns.ranks, chunk.columns.seqs)
                if world is None:
                    _, run_starts = chunk.select(RunStart)
                    world = run_starts[0].world_size if run_starts else None
                self.events.add_records(starts, end)
                yield chunk
                if self._progress is not None and len(self.events) >= PROGRESS_RECORDS:
                    self._progress(end, size)
        gaps = sequences.finish(world)
        self.warning = f"{self.path}: {gaps_note(gaps)}" if gaps else ""


def _chunks(file: BufferedIOBase, offset: int, room: int, decoder: msgspec.msgpack.Decoder,
            codes: dict[type, int]) -> Iterable[tuple[ScanChunk, array, int]]:
    """(chunk, file offsets of its records, file offset after them) for every chunk of records
    from ``offset``, the file's position, on, read ``room`` bytes at a time.

    Each chunk is read behind :data:`_HEAD` spare bytes; once its checksums hold, every 8-byte
    record header is overwritten with two msgpack zeros (``uint32 0, uint16 0``) and an array
    header goes in front, so the chunk is one msgpack array that msgspec decodes in one call.
    A record cut by the chunk's end moves to the front of the next."""
    buffer = bytearray(_HEAD + max(room, 16))
    view = memoryview(buffer)
    names: dict[str, int] = {}  # group and buffer names, numbered across chunks
    held = 0  # bytes of a record begun in the previous chunk, moved to the front
    first = 0  # log position of the chunk's first event
    while True:
        filled = held + file.readinto(view[_HEAD + held :])
        if not filled:
            return
        relative, used = _walk(view[_HEAD : _HEAD + filled])
        if not relative.size:
            raise NotIntact(f"its record at byte {offset:,} is cut short, or larger than collviz writes")
        at = relative + _HEAD
        lengths = np.diff(at, append=_HEAD + used) - 8
        if lengths.max() > LARGE_PAYLOAD:
            raise NotIntact("a record is larger than collviz writes")
        slots = HeaderSlots(buffer, at)
        if not checksums_hold(view[_HEAD : _HEAD + used], slots, lengths):
            raise NotIntact("a record does not match its checksum")
        slots.write(0xCE, 0xCD00)
        count = relative.size
        buffer[:_HEAD] = b"\xdd" + (3 * count).to_bytes(4, "big")
        try:
            decoded = decoder.decode(view[: _HEAD + used])[2::3]
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise NotIntact(f"a record is not an event this collviz knows ({exc})") from None
        yield ScanChunk(first, decoded, event_columns(decoded, codes, names)), array("q", (at - _HEAD + offset).tobytes()), offset + used
        first += count
        held = filled - used
        view[_HEAD : _HEAD + held] = view[_HEAD + used : _HEAD + filled]
        offset += used


def _walk(records: memoryview) -> tuple[np.ndarray, int]:
    """(offsets, bytes used) of the complete records at the start of ``records``."""
    offsets = array("q")
    add = offsets.append
    unpack = _LENGTH.unpack_from
    size = len(records)
    last = size - 8
    at = 0
    while at <= last:
        end = at + 8 + unpack(records, at)[0]
        if end > size:
            break
        add(at)
        at = end
    return np.frombuffer(offsets, np.int64), at
