"""A trace's index, written beside it by its writer, so that an intact trace opens without a scan.

:class:`~.trace.TraceWriter` knows where every record starts and (decoding what it writes thin,
one msgspec call per flushed batch: :class:`IndexRecorder`) each event's columns
(:class:`~.columns.EventColumns`). When it closes a regular file it writes them to
``<trace>.index`` (:func:`index_path`), created 0600 and renamed into place once complete, only
where :func:`~.files.renames_over` allows (a device, FIFO or link at that name is left as it is,
and the trace is scanned when opened)::

    b"CVZINDEX"            8-byte magic
    u32 length, header     msgpack: format, version, the trace's size and CRC-32 (every byte of
                           it), the event count, the type and name tables, and the CRC-32 of
                           each part of :data:`CHECK_EVENTS` events of each column of the body
                           (version 4; before it, the CRC-32 of the whole body)
    body                   the columns back to back, little-endian: offsets (int64, one per
                           event and the end), kinds (uint8), ranks (int32), seqs, phases
                           (int64), keys (int32), numbers (int64), ends (uint8), sizes (int64),
                           p2p (uint8); an index of version 2 ends at ``ends``

:func:`read_index` hands it over only when it is intact (magic, version, the CRC-32 of the
offsets, or of a version-2 or 3 index's whole body) and for a trace of the size the file has now;
a version-4 index's other columns are checked a part at a time as they are read, so opening a
trace reads and checks only the parts it files. What is shown is what was checked: for a reader
that shows nothing before it has read the whole (``replay --headless``), :meth:`TraceIndex.parts`
folds every byte it reads into the CRC-32 of the whole trace, which must be the one its writer
computed once the last part has been taken (:class:`~.columns.NotIntact` otherwise); for a reader
that shows a part as soon as it has it (the viewer, its first step first), every record of each
part is checked against its own CRC-32 before the part is handed over, and the whole trace's
CRC-32, folded in the same pass, after the last; :mod:`.stored` checks each record again when a
frame decodes it. Anything else — no
index (an older collviz, a trace still being written, a copy without its index), a stale,
damaged or newer one, a trace whose bytes differ — and the trace is scanned (:mod:`.scan`),
which verifies every record. The writer leaves no index for a trace the scan
would refuse (a record too large, an unknown type, a negative duration) or whose recording
stopped early. Older readers never look at the index: the trace format is unchanged.
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
import zlib
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from io import BufferedIOBase
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ..errors import UsageError
from .columns import EventColumns, NotIntact, chunk_decoder, event_columns
from .files import open_without_blocking, renames_over, write_output
from .protocol import EVENT_TYPES, AnyEvent, Event
from .records import LARGE_PAYLOAD, HeaderSlots, checksums_hold

__all__ = ["INDEX_SUFFIX", "INDEX_VERSION", "CHECK_EVENTS", "index_path", "discard_index", "IndexRecorder", "IndexPart", "TraceIndex", "read_index"]

INDEX_SUFFIX = ".index"
"""What the index's file name adds to its trace's."""

INDEX_VERSION = 4
"""The index layout its writer writes; a reader uses those of :data:`_LAYOUTS` (an index of
another version is ignored). 2: a transfer's ``keys`` and ``numbers`` columns hold its ``dst``
and its order key. 3: ``sizes`` and ``p2p`` follow (a transfer's bytes and kind), so that a
summary counts transfers without decoding them; a version-2 index is still read, without them.
4: the header holds a CRC-32 per part of each column (:data:`CHECK_EVENTS` events) instead of
one for the whole body, so that a reader checks only what it reads (versions 2 and 3 are still
read, their body checked whole)."""

CHECK_EVENTS = 1 << 18
"""Events per part of a column that a version-4 index checks by its own CRC-32 (the viewer's and
the summary's parts: each reads whole parts)."""

_PART_CHECKED = 4
"""The first index version whose body is checked a part at a time."""

_CHECK_BYTES = 16 << 20
"""Bytes of the trace read at a time for its CRC-32 alone (those before the first part handed over)."""

_MAGIC = b"CVZINDEX"
_FORMAT_NAME = "collviz-trace-index"
_LENGTH = struct.Struct("<I")
_COLUMNS: tuple[tuple[str, str], ...] = (
    ("kinds", "u1"), ("ranks", "<i4"), ("seqs", "<i8"), ("phases", "<i8"), ("keys", "<i4"), ("numbers", "<i8"),
    ("ends", "u1"), ("sizes", "<i8"), ("p2p", "u1"),
)
"""The columns after the offsets, in file order, with their stored types (what the writer writes)."""

_LAYOUTS: dict[int, tuple[tuple[str, str], ...]] = {2: _COLUMNS[:7], 3: _COLUMNS, _PART_CHECKED: _COLUMNS}
"""The columns of each index version this collviz reads."""

_BATCH_EVENTS = 65_536
"""Thin events the recorder holds before turning them into columns."""

_NARROW = 2**31
"""Ranks and keys are stored as int32."""


def index_path(trace: str | os.PathLike[str]) -> Path:
    """Where the index of the trace at ``trace`` lives."""
    return Path(os.fspath(trace) + INDEX_SUFFIX)


def discard_index(trace: str | os.PathLike[str]) -> None:
    """Remove the index beside ``trace`` (it described a file now being rewritten) if it is a regular
    file: whatever else has its name (a device, a FIFO, a link) is never the writer's, and stays."""
    path = index_path(trace)
    if renames_over(path):
        path.unlink(missing_ok=True)


class _Header(msgspec.Struct, kw_only=True):
    format: str
    version: int
    trace_size: int
    trace_crc32: int
    events: int
    type_names: list[str]
    names: list[str]
    body_crc32: int | None = None
    """The CRC-32 of the whole body (versions 2 and 3)."""
    part_crc32s: list[list[int]] = []
    """Version 4: for the offsets and each column in file order, the CRC-32 of each part of
    :data:`CHECK_EVENTS` values (the offsets' last part holds the end too)."""


class IndexRecorder:
    """The columns of a trace being written, built from the payloads its writer flushes.

    ``first_record`` is the offset of the trace's first record; a payload longer than
    ``largest_payload`` (which readers decode bounded) makes the index impossible, as does
    anything else the scan would refuse, or :meth:`abandon`: the recorder then records nothing
    more and :meth:`write` writes nothing.
    """

    def __init__(self, first_record: int, largest_payload: int) -> None:
        self.abandoned: str | None = None
        """Why no index will be written, or None."""
        self._decoder, self._codes = chunk_decoder(thin_only=True)
        self._names: dict[str, int] = {}
        self._thin: list[Any] = []
        self._parts: list[list[np.ndarray]] = []
        """The columns of the events recorded so far, a part per batch, each as stored (42 bytes an event)."""
        self._starts = array("q")
        self._end = first_record
        self._largest = largest_payload

    def add(self, payloads: list[bytes]) -> None:
        """Record the events of ``payloads``, the next records written, in order."""
        if self.abandoned is not None or not payloads:
            return
        lengths = np.fromiter(map(len, payloads), np.int64, len(payloads))
        if int(lengths.max()) > self._largest:
            self.abandon("a record is larger than collviz writes")
            return
        try:
            self._thin += self._decoder.decode(b"\xdd" + len(payloads).to_bytes(4, "big") + b"".join(payloads))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.abandon(f"a record is not an event this collviz knows ({exc})")
            return
        ends = np.cumsum(lengths + 8) + self._end
        self._starts.frombytes((ends - lengths - 8).tobytes())
        self._end = int(ends[-1])
        if len(self._thin) >= _BATCH_EVENTS:
            self._columns()

    def abandon(self, reason: str) -> None:
        """Give up the index (say why), and free what was recorded."""
        self.abandoned = reason
        self._thin, self._parts, self._starts = [], [], array("q")

    def _columns(self) -> None:
        """Turn the thin events held into columns."""
        try:
            columns = event_columns(self._thin, self._codes, self._names)
        except NotIntact as exc:
            self.abandon(str(exc))
            return
        self._thin = []
        if len(columns) and not (-_NARROW <= int(columns.ranks.min()) and int(columns.ranks.max()) < _NARROW):
            self.abandon("a rank is out of the index's range")
            return
        self._parts.append([getattr(columns, name).astype(dtype) for name, dtype in _COLUMNS])

    def write(self, trace: Path, size: int, crc32: int) -> None:
        """Write the index of the trace at ``trace``, ``size`` bytes with CRC-32 ``crc32``, beside it
        (nothing if it was abandoned, or cannot be written: the trace is then scanned when opened)."""
        if self._thin:
            self._columns()
        if self.abandoned is not None or self._end != size or len(self._names) >= _NARROW:
            return
        if not renames_over(index_path(trace)):
            return  # not the writer's to replace: the trace is scanned when opened
        count = len(self._starts)
        body = [np.frombuffer(self._starts, np.int64).tobytes() + self._end.to_bytes(8, "little")]
        body += [np.concatenate([part[column] for part in self._parts] or [np.empty(0, dtype)]).tobytes()
                 for column, (_, dtype) in enumerate(_COLUMNS)]
        checks: dict[str, Any] = {}
        if INDEX_VERSION >= _PART_CHECKED:
            sizes = (8, *(np.dtype(dtype).itemsize for _, dtype in _COLUMNS))
            checks["part_crc32s"] = [_part_crc32s(column, size) for column, size in zip(body, sizes)]
        else:  # as a collviz before version 4 wrote it (the tests' older indexes)
            checks["body_crc32"] = 0
            for column in body:
                checks["body_crc32"] = zlib.crc32(column, checks["body_crc32"])
        header = msgspec.msgpack.encode(_Header(
            format=_FORMAT_NAME, version=INDEX_VERSION, trace_size=size, trace_crc32=crc32, events=count,
            type_names=[event_type.__name__ for event_type in EVENT_TYPES], names=list(self._names), **checks))
        try:
            write_output(index_path(trace), [_MAGIC, _LENGTH.pack(len(header)), header, *body], "--record")
        except UsageError:
            pass  # an index only saves time: the trace itself is complete


@dataclass
class IndexPart:
    """Consecutive events of an indexed trace: event ``first + i`` has column ``i`` of
    ``columns``; ``records`` holds their records as read from the trace, record ``i`` at bytes
    ``[starts[i], starts[i + 1])``."""

    first: int
    columns: EventColumns
    records: memoryview
    starts: np.ndarray

    def select(self, *types: type[Event], decode: Callable[[bytes], list[AnyEvent]] | None = None,
               ) -> tuple[np.ndarray, list[AnyEvent]]:
        """The log positions (int64) and events, decoded in full with one call, of ``types``
        (``decode``: what decodes a msgpack array of their payloads; msgspec's decoder by default)."""
        where = self.columns.where(*types)
        return where + self.first, self.decode_at(where, decode)

    def decode_at(self, where: np.ndarray, decode: Callable[[bytes], list[AnyEvent]] | None = None,
                  ) -> list[AnyEvent]:
        """The events at positions ``where`` of this part (int64, ascending, counted from its
        first event), decoded in full with one call (``decode`` as :meth:`select` takes it)."""
        if not where.size:
            return []
        records, starts = self.records, self.starts
        document = b"".join([b"\xdd" + where.size.to_bytes(4, "big"),  # the array's header, then its payloads: one copy
                             *map(records.__getitem__, map(slice, (starts[where] + 8).tolist(), starts[where + 1].tolist()))])
        try:
            return (decode or _events_decoder.decode)(document)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise NotIntact("a record no longer decodes (the trace changed while it was read)") from None


_events_decoder = msgspec.msgpack.Decoder(list[AnyEvent])


@dataclass
class TraceIndex:
    """The index of the trace at ``path``, read from ``index`` (whose columns start at byte
    ``columns_at``): where each event's record starts (``offsets``, int64, one more: where the last
    ends), the names its keys number, and the CRC-32 of every byte of the trace it was written
    for. Its columns are read a part at a time (:meth:`parts`), so only a part's stay in memory,
    each part checked against its CRC-32 (``part_crc32s``, by column; None: the index's body was
    checked whole when it was read)."""

    path: str
    index: str
    offsets: np.ndarray
    names: list[str]
    trace_crc32: int
    columns_at: int
    kinds: np.ndarray
    """Each stored type code's position in this collviz's EVENT_TYPES (255: a type it does not know)."""
    stored: tuple[tuple[str, str], ...] = _COLUMNS
    """The columns its version holds, in file order (:data:`_LAYOUTS`)."""
    part_crc32s: list[list[int]] | None = None
    """Each column's CRC-32s, by part of :data:`CHECK_EVENTS` events, in file order after the offsets'."""

    def __len__(self) -> int:
        return int(self.offsets.size) - 1

    def parts(self, events: int, whole: bool = True, records: bool = False, first: int = 0,
              ) -> Iterator[IndexPart]:
        """The trace's events from ``first`` (a multiple of ``events``) on, ``events`` at a time,
        in order, with their columns and records (a part's bytes are reused by the next: use each
        before taking the next). With ``whole``, every byte of the trace (those before ``first``
        read for it alone) goes into the CRC-32 of the whole trace, which must be the one the
        index was written for (:class:`~.columns.NotIntact` otherwise, once the last part has been
        taken): enough for a caller that shows nothing before the last part. With ``records``
        (for a caller that shows each part as soon as it has it), every record of a part is
        checked against its length and its own CRC-32 before the part is handed over (NotIntact
        where one fails; the check overwrites the records' headers, after the whole trace's
        CRC-32 has taken them)."""
        offsets, count = self.offsets, len(self)
        ends = offsets[np.minimum(np.arange(first, count, events) + events, count)]
        largest = int((ends - offsets[first:count:events]).max()) if count > first else 0
        view = memoryview(bytearray(max(largest, min(int(offsets[first]), _CHECK_BYTES) if whole else 0)))
        with open(self.path, "rb") as file, open(self.index, "rb") as index:
            crc = 0
            if whole:
                crc = _crc32(file, int(offsets[first]), view)
            else:
                file.seek(int(offsets[first]))
            for start in range(first, count, events):
                stop = min(start + events, count)
                length = int(offsets[stop] - offsets[start])
                if file.readinto(view[:length]) != length:
                    raise NotIntact("it is shorter than its index says")
                if whole:
                    crc = zlib.crc32(view[:length], crc)
                starts = offsets[start : stop + 1] - offsets[start]
                if records:
                    _check_records(view[:length], starts, start)
                yield IndexPart(start, self._columns(index.fileno(), start, stop), view[:length], starts)
            if whole and (file.read(1) or crc != self.trace_crc32):
                raise NotIntact("its bytes are not those its index was written for")

    def where(self, *types: type[Event]) -> np.ndarray:
        """Positions (int64, ascending) of the events of ``types`` in the whole trace, read from
        the index's type column alone."""
        with open(self.index, "rb") as index:
            stored = np.frombuffer(self._column(index.fileno(), 0, self.columns_at, 0, len(self)), np.uint8)
        chosen = np.zeros(256, np.uint8)  # by stored code: 1 one of ``types``, 2 a type this collviz does not know
        chosen[self.kinds == 255] = 2
        chosen[np.isin(self.kinds, [EVENT_TYPES.index(event_type) for event_type in types])] = 1
        found = chosen[stored]
        if found.max(initial=0) == 2:
            raise NotIntact("its index names an event type this collviz does not know")
        return np.flatnonzero(found)

    def _columns(self, fd: int, start: int, stop: int) -> EventColumns:
        """The columns of events ``[start, stop)``, read from the index file (open as ``fd``)."""
        count, total = stop - start, len(self)
        found = {}
        at = self.columns_at
        for column, (name, dtype) in enumerate(self.stored):
            size = np.dtype(dtype).itemsize
            found[name] = np.frombuffer(self._column(fd, column, at, start, stop), dtype, count)
            at += size * total
        kinds = self.kinds[found["kinds"]]
        if (kinds == 255).any():
            raise NotIntact("its index names an event type this collviz does not know")
        p2p = found.get("p2p")
        return EventColumns(kinds, found["ranks"].astype(np.int64), found["seqs"], found["phases"],
                            found["keys"].astype(np.int64), found["numbers"], found["ends"].view(bool), self.names,
                            found.get("sizes"), None if p2p is None else p2p.view(bool))

    def _column(self, fd: int, column: int, at: int, start: int, stop: int) -> memoryview:
        """The bytes of values ``[start, stop)`` of the column numbered ``column`` (in
        :attr:`stored`; stored from byte ``at`` of the index open as ``fd``), every part of
        :data:`CHECK_EVENTS` values they fall in checked against its CRC-32 where the index holds
        them (NotIntact if one fails)."""
        size = np.dtype(self.stored[column][1]).itemsize
        crcs = None if self.part_crc32s is None else self.part_crc32s[column]
        low, high = (start, stop) if crcs is None else _whole_parts(start, stop, len(self))
        data = memoryview(os.pread(fd, size * (high - low), at + size * low))
        if len(data) != size * (high - low):
            raise NotIntact("its index is shorter than it says")
        if crcs is not None:
            _check_parts(data, size, low, crcs)
        return data[size * (start - low) : size * (stop - low)]


def read_index(trace: str | os.PathLike[str], first_record: int) -> TraceIndex | None:
    """The index its writer left beside the trace at ``trace`` (whose first record is at
    ``first_record``) if it is intact (its CRC-32), of a version this collviz reads
    (:data:`_LAYOUTS`), and for a trace of the size ``trace`` has now; else None. Whether the
    trace's bytes are those it was written for is checked record by record as
    :meth:`TraceIndex.parts` hands them over, and whole after the last (or by
    :meth:`TraceIndex.check_whole`)."""
    path = index_path(trace)
    try:
        size = os.stat(trace).st_size
        with open(path, "rb", opener=open_without_blocking) as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                return None  # a FIFO or a device with the index's name is no index
            header, body = _header(file)
            if header is None or header.trace_size != size:
                return None
            if header.body_crc32 is not None:
                with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:  # read in place, not copied
                    if _mapped_crc32(mapped, body) != header.body_crc32:
                        return None
            offsets = np.empty(header.events + 1, np.int64)
            file.seek(body)
            if file.readinto(offsets.data.cast("B")) != offsets.nbytes:
                return None
        if header.body_crc32 is None:
            _check_parts(offsets.data.cast("B"), 8, 0, header.part_crc32s[0])
    except (OSError, NotIntact):
        return None
    if int(offsets[0]) != first_record or int(offsets[-1]) != size:
        return None
    codes = {event_type.__name__: code for code, event_type in enumerate(EVENT_TYPES)}
    kinds = np.full(256, 255, np.uint8)
    kinds[: len(header.type_names)] = [codes.get(name, 255) for name in header.type_names[:256]]
    return TraceIndex(os.fspath(trace), os.fspath(path), offsets, header.names, header.trace_crc32,
                      body + offsets.nbytes, kinds, _LAYOUTS[header.version],
                      None if header.body_crc32 is not None else header.part_crc32s[1:])


def _check_records(records: memoryview, starts: np.ndarray, first: int) -> None:
    """Check that every record of ``records`` (starting at ``starts``, the last ending at the
    last of them; event ``first`` onwards) has the length and CRC-32 its header says; NotIntact
    if not."""
    if starts.size < 2:
        return
    lengths = np.diff(starts) - 8
    slots = HeaderSlots(records, starts[:-1])
    if int(lengths.max()) > LARGE_PAYLOAD or not np.array_equal(slots.read(0), lengths):
        raise NotIntact(f"a record's length is not its index's (events {first:,} on)")
    if not checksums_hold(records, slots, lengths):
        raise NotIntact(f"a record does not match its checksum (events {first:,}–{first + lengths.size - 1:,})")


def _mapped_crc32(mapped: mmap.mmap, start: int) -> int:
    """The CRC-32 of ``mapped`` from byte ``start`` to its end."""
    with memoryview(mapped) as whole, whole[start:] as body:
        return zlib.crc32(body)


def _crc32(file: BufferedIOBase, length: int, buffer: memoryview) -> int:
    """The CRC-32 of the next ``length`` bytes of ``file``, read through ``buffer``; NotIntact if
    the file ends first."""
    crc = 0
    while length:
        read = file.readinto(buffer[: min(length, len(buffer))])
        if not read:
            raise NotIntact("it is shorter than its index says")
        crc, length = zlib.crc32(buffer[:read], crc), length - read
    return crc


def _part_crc32s(column: bytes, size: int) -> list[int]:
    """The CRC-32 of each part of :data:`CHECK_EVENTS` values of ``column`` (values of ``size`` bytes)."""
    step = CHECK_EVENTS * size
    view = memoryview(column)
    return [zlib.crc32(view[at : at + step]) for at in range(0, len(view), step)]


def _whole_parts(start: int, stop: int, events: int) -> tuple[int, int]:
    """The values ``[start, stop)`` widened to whole parts of :data:`CHECK_EVENTS` (a column of
    ``events`` values)."""
    return start - start % CHECK_EVENTS, min(-(-stop // CHECK_EVENTS) * CHECK_EVENTS, events)


def _check_parts(data: memoryview, size: int, first: int, crcs: list[int]) -> None:
    """Check that ``data``, a column's values (``size`` bytes each) from value ``first`` (a part's
    first) on, in whole parts, holds the CRC-32s ``crcs`` gives its parts; NotIntact if not."""
    step = CHECK_EVENTS * size
    for at in range(0, len(data), step):
        if zlib.crc32(data[at : at + step]) != crcs[first // CHECK_EVENTS + at // step]:
            raise NotIntact(f"its index's columns are not those written (values {first + at // size:,} on)")


def _header(file: BufferedIOBase) -> tuple[_Header | None, int]:
    """The index's header if it is one this collviz reads, and where its body starts."""
    start = len(_MAGIC) + _LENGTH.size
    lead = file.read(start)
    if len(lead) < start or lead[: len(_MAGIC)] != _MAGIC:
        return None, 0
    (length,) = _LENGTH.unpack_from(lead, len(_MAGIC))
    try:
        header = msgspec.msgpack.decode(file.read(length), type=_Header)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None, 0
    if header.format != _FORMAT_NAME or header.version not in _LAYOUTS or header.events < 0:
        return None, 0
    counts = (header.events + 1, *(header.events for _ in _LAYOUTS[header.version]))
    if (header.body_crc32 is None) == (header.version < _PART_CHECKED) or header.version >= _PART_CHECKED and (
            [len(crcs) for crcs in header.part_crc32s] != [-(-count // CHECK_EVENTS) for count in counts]):
        return None, 0
    body = start + length
    expected = 8 * (header.events + 1) + sum(np.dtype(dtype).itemsize * header.events
                                             for _, dtype in _LAYOUTS[header.version])
    if os.fstat(file.fileno()).st_size - body != expected:
        return None, 0
    return header, body
