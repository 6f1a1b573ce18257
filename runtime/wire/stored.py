"""A trace's events left in its file and decoded when read: the store behind a large trace's log.

A viewer indexes every event of a trace but shows a few hundred at a time; holding millions of
decoded events costs gigabytes (a 64-rank Buffer is several KB as Python objects). A
:class:`StoredEvents` keeps where each record starts (8 bytes an event) and reads, checks and
decodes an event when it is asked for, from a read-only memory map of the file: a frame's events
lie scattered over megabytes (a 64-rank step's latest calls), which a map reads at the cost of a
page fault where ``pread`` paid a system call and a copy per block (40 µs each here). Only the
pages read count towards the process's memory, and the kernel may drop them again.

A map has one hazard: touching a page that a truncation removed kills the process (SIGBUS).
Before reading, the store makes sure the file still reaches the record (its size is looked up
again at most every :data:`SIZE_CHECK_SECONDS`), so a file cut short while open gives a
:class:`~.trace.TraceError`; only a cut within that window of a read could still end the viewer.
A file rewritten in place fails the record's checksum: again a TraceError, never a wrong event.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
import weakref
import zlib
from array import array
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from functools import lru_cache
from itertools import repeat
from typing import Any, Union, cast, overload

import msgspec
import numpy as np

from .protocol import EVENT_TYPES, MAX_FRAME_BYTES, AnyEvent, Buffer, ProtocolError, ProvenanceRun, _field_entry, decode
from .trace import TraceError

__all__ = ["StoredEvents", "CACHED_EVENTS", "SIZE_CHECK_SECONDS", "SHARED_PROVENANCES", "decode_sharing"]

CACHED_EVENTS = 16384
"""Decoded events kept: a frame reads up to a thousand (64 ranks), the next mostly the same ones,
and going back to a step seen a moment ago should not decode it again."""

SIZE_CHECK_SECONDS = 0.1
"""How long the file's size, looked up before reading from the map, is trusted."""

SHARED_PROVENANCES = 1024
"""Distinct provenances decoded once and shared by the Buffers that carry them (every rank of an
all-gather holds the same 64 runs: two thirds of a 64-rank Buffer's decoding, and 130 objects)."""

_BufferRawProvenance = msgspec.defstruct(
    "Buffer",
    [(f.name, msgspec.Raw, msgspec.Raw()) if f.name == "provenance" else _field_entry(f)
     for f in msgspec.structs.fields(Buffer)],
    tag="Buffer", kw_only=True,
)
"""Buffer's own fields, its provenance left encoded."""

_events_decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(
    Union[tuple(_BufferRawProvenance if t is Buffer else t for t in EVENT_TYPES)]
)
_provenance_decoder = msgspec.msgpack.Decoder(Union[list[ProvenanceRun], None])


@lru_cache(maxsize=SHARED_PROVENANCES)
def _provenance(raw: bytes) -> list[ProvenanceRun] | None:
    """The provenance encoded as ``raw`` (absent: None), decoded once for every Buffer carrying it."""
    return _provenance_decoder.decode(raw) if raw else None


def _decode_sharing(payload: bytes) -> AnyEvent:
    """:func:`~.protocol.decode`, a Buffer's provenance shared with the Buffers decoded before it
    that carry the same (nobody changes an event's lists); anything it refuses, that decode
    classifies."""
    if len(payload) <= MAX_FRAME_BYTES:
        try:
            event = _events_decoder.decode(payload)
            if type(event) is not _BufferRawProvenance:
                return event
            fields = msgspec.structs.asdict(event)
            fields["provenance"] = _provenance(bytes(fields["provenance"]))
            return Buffer(**fields)
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass
    return decode(payload)


_batch_decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(
    list[Union[tuple(_BufferRawProvenance if t is Buffer else t for t in EVENT_TYPES)]]  # type: ignore[misc]
)


def decode_sharing(document: bytes) -> list[AnyEvent]:
    """The events of ``document``, a msgpack array of event payloads, decoded with one call, each
    Buffer's provenance shared with the Buffers that carry the same (as :class:`StoredEvents` does:
    at 64 ranks a Buffer then decodes in a seventh of the time). Raises msgspec's DecodeError or
    ValidationError where some payload is not an event this collviz knows."""
    events = _batch_decoder.decode(document)
    for at, event in enumerate(events):
        if type(event) is _BufferRawProvenance:
            fields = msgspec.structs.asdict(event)
            fields["provenance"] = _provenance(bytes(fields["provenance"]))
            events[at] = Buffer(**fields)
    return events


_HEADER = struct.Struct("<II")
"""A checksummed record's header: the payload's length and CRC-32."""

_MSGPACK_ARRAY32 = struct.Struct(">BI")
"""A msgpack array header of up to 2**32 - 1 items: payloads after it decode as one list."""


def _decoded_together(payloads: list[bytes]) -> list[AnyEvent] | None:
    """The events of ``payloads``, decoded in one call as :func:`decode_sharing` decodes; None where
    one is refused (longer than a frame may be, or not an event this collviz knows)."""
    if max(map(len, payloads)) > MAX_FRAME_BYTES:
        return None
    try:
        return decode_sharing(_MSGPACK_ARRAY32.pack(0xDD, len(payloads)) + b"".join(payloads))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


@lru_cache(maxsize=32)
def _thin_decoder(thin_type: Any) -> msgspec.msgpack.Decoder[Any]:
    """A decoder of a msgpack array of ``thin_type`` events, made once per type."""
    return msgspec.msgpack.Decoder(list[thin_type])


class StoredEvents(Sequence[AnyEvent]):
    """The events of an intact, checksummed trace, read from its file on access.

    Its reader adds records as it finds them (:meth:`add_records`: where each starts, and where
    the last ends; records lie back to back). Each read checks the record's length and checksum
    again before decoding it, so a file changed on disk since it was opened is said to be so
    (:class:`~.trace.TraceError`), never misread.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        self._starts: array | np.ndarray = array("q")
        self._end = 0
        self._fd = os.open(path, os.O_RDONLY)
        self._map: mmap.mmap | None = None
        self._size = 0
        self._size_checked = float("-inf")
        self._closer = weakref.finalize(self, os.close, self._fd)  # the map, a copy of it, closes itself
        self._cache: OrderedDict[int, AnyEvent] = OrderedDict()
        """The last :data:`CACHED_EVENTS` events read by index, by position, the latest read last."""

    def add_records(self, starts: array | memoryview | np.ndarray, end: int) -> None:
        """Add events whose records start at file offsets ``starts`` (int64: an ``array("q")`` or
        any buffer of them), the last ending at ``end``. A numpy array given to an empty store is
        held as it is, not copied (an index's offsets: 80 MB at 10 million events)."""
        if not len(self._starts) and isinstance(starts, np.ndarray) and starts.dtype == np.int64:
            self._starts = starts
        else:
            held = self._starts if isinstance(self._starts, array) else array("q", self._starts.tobytes())
            held.frombytes(starts.tobytes() if isinstance(starts, np.ndarray) else memoryview(starts).cast("B"))
            self._starts = held
        self._end = end

    def close(self) -> None:
        """Unmap and close the file (reading afterwards raises ``OSError``)."""
        if self._map is not None:
            self._map.close()
            self._map = None
        self._closer()

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, at: int) -> AnyEvent: ...

    @overload
    def __getitem__(self, at: slice) -> list[AnyEvent]: ...

    def __getitem__(self, at: int | slice) -> AnyEvent | list[AnyEvent]:
        if isinstance(at, slice):
            return [self._event(index) for index in range(*at.indices(len(self)))]
        count = len(self)
        if at < 0:
            at += count
        if not 0 <= at < count:
            raise IndexError("event index out of range")
        return self._event(at)

    def __iter__(self) -> Iterator[AnyEvent]:
        return map(self._decode, range(len(self)))  # a pass over every event would only flush the cache

    def _event(self, index: int) -> AnyEvent:
        """Event ``index`` (in range), from the cache or read, checked, decoded and kept."""
        cache = self._cache
        event = cache.get(index)
        if event is not None:
            cache.move_to_end(index)
            return event
        event = cache[index] = self._decode(index)
        if len(cache) > CACHED_EVENTS:
            cache.popitem(last=False)
        return event

    def many(self, positions: Sequence[int]) -> list[AnyEvent]:
        """The events at ``positions`` (in range), as indexing would give them one by one: those not
        in the cache read and checked together (:meth:`_payloads`), decoded in one msgspec call, and
        kept. A first visit of a 64-rank step reads each rank's latest Buffer: one at a time each
        cost its own Python calls to find, check and decode the record, a third more."""
        cache = self._cache
        found = list(map(cache.get, positions))
        missing = list(dict.fromkeys(position for position, event in zip(positions, found) if event is None))
        for position, event in zip(positions, found):
            if event is not None:
                cache.move_to_end(position)
        if not missing:
            return cast("list[AnyEvent]", found)
        decoded = _decoded_together(self._payloads(missing))
        if decoded is None:  # one is refused: read one by one, so that its error says which and why
            decoded = list(map(self._decode, missing))
        cache.update(zip(missing, decoded))
        while len(cache) > CACHED_EVENTS:
            cache.popitem(last=False)
        read = dict(zip(missing, decoded))
        return [event if event is not None else read[position] for position, event in zip(positions, found)]

    def thin(self, positions: Sequence[int], thin_type: Any) -> list[Any]:
        """The events at ``positions`` decoded into ``thin_type`` (a
        :func:`~.protocol.thin_event_type` of their kind, a ``Union`` of such for several kinds,
        or the kind itself, not a Buffer): only its fields built, every record
        checked as a whole event's is, all in one msgspec call, none kept in the cache. For a
        frame that needs a few fields of many events (a 64-rank step's latest calls: 320 ends, a
        third of the time each)."""
        payloads = self._payloads(positions)
        try:
            return _thin_decoder(thin_type).decode(_MSGPACK_ARRAY32.pack(0xDD, len(payloads)) + b"".join(payloads))
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise TraceError(f"{self.path} changed on disk since it was opened "
                             f"(events {positions[0]}… no longer decode as {thin_type})") from None

    def _decode(self, index: int) -> AnyEvent:
        """Event ``index``, read, checked and decoded."""
        payload = self._payload(index)
        try:
            return _decode_sharing(payload)
        except ProtocolError:
            raise TraceError(f"{self.path} changed on disk since it was opened "
                             f"(event {index} no longer decodes)") from None

    def _payloads(self, positions: Sequence[int]) -> list[bytes]:
        """The payloads of events ``positions``, each checked as :meth:`_payload` checks one: the
        file's reach looked up once, for the furthest; the payloads cut, their headers read and
        their CRC-32s taken by functions mapped over them all, and compared in one list
        comparison (no Python statement runs per record but where one fails)."""
        begins, ends = self._bounds(positions)
        mapped = self._mapped(max(ends, default=0))
        if mapped is None:
            raise self._unread(positions[ends.index(max(ends))])
        payloads = list(map(mapped.__getitem__, map(slice, [begin + 8 for begin in begins], ends)))
        headers = list(map(_HEADER.unpack_from, repeat(mapped), begins))
        if headers != list(zip(map(len, payloads), map(zlib.crc32, payloads))):
            raise self._unread(next(index for index, header, payload in zip(positions, headers, payloads)
                                    if header != (len(payload), zlib.crc32(payload))))
        return payloads

    def _bounds(self, positions: Sequence[int]) -> tuple[list[int], list[int]]:
        """Where the records of events ``positions`` begin and end in the file, as Python ints
        (an index's numpy offsets taken all at once: a numpy scalar is slow in arithmetic)."""
        starts, count = self._starts, len(self._starts)
        if isinstance(starts, np.ndarray):
            at = np.asarray(positions, np.int64)
            ends = starts[np.minimum(at + 1, count - 1)]
            ends[at + 1 >= count] = self._end
            return starts[at].tolist(), ends.tolist()
        return ([starts[index] for index in positions],
                [starts[index + 1] if index + 1 < count else self._end for index in positions])

    def _unread(self, index: int) -> TraceError:
        """The error for event ``index``, whose record no longer reads back as it was indexed."""
        return TraceError(f"{self.path} changed on disk since it was opened (event {index} no longer reads back)")

    def _payload(self, index: int) -> bytes:
        """Event ``index``'s payload, read and checked against its record's length and checksum
        (the header read in place: the record is not copied before its payload is)."""
        starts = self._starts
        start = int(starts[index])
        end = int(starts[index + 1]) if index + 1 < len(starts) else self._end
        mapped = self._mapped(end)
        if mapped is None or end - start < _HEADER.size:
            raise self._unread(index)
        payload = mapped[start + _HEADER.size:end]
        if _HEADER.unpack_from(mapped, start) != (len(payload), zlib.crc32(payload)):
            raise self._unread(index)
        return payload

    def _mapped(self, end: int) -> mmap.mmap | None:
        """The file's map, once the file is seen to reach ``end`` (None where it no longer does)."""
        now = time.monotonic()
        if end > self._size or now - self._size_checked > SIZE_CHECK_SECONDS:
            self._size = os.fstat(self._fd).st_size
            self._size_checked = now
        if end > self._size:
            return None
        if self._map is None or len(self._map) < end:  # not mapped yet, or the file has grown
            if self._map is not None:
                self._map.close()
            self._map = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ)
        return self._map
