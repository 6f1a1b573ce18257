"""Trace files: a versioned header, then one checksummed, length-prefixed msgpack event per record.

Layout (all integers little-endian)::

    b"COLLVIZ\\0"                        8-byte magic
    u32 length, header payload          msgpack map {"format": "collviz-trace", "version": [1, 1],
                                                     "records": "crc32", "clock": {…}}
    u32 length, u32 crc32, payload      repeated; each payload is ``protocol.encode(event)``

The header's ``clock`` (a :class:`ClockAnchor`, absent from older traces) ties the events' ``t_ns``
(CLOCK_MONOTONIC of the host that ran them) to the Unix time torch.profiler's traces count in.
Traces written before per-record checksums (no ``records`` in the header) frame records as
``u32 length, payload`` and are read as before. The writer creates the file 0600 and flushes after
every batch, so a file being written can be read; once it closes a regular file it writes the
trace's index beside it (:mod:`.sidecar`: no part of the format, which older readers ignore and
which lets an intact trace open without a scan). The reader (see :mod:`.records` and
:mod:`.sanity`) keeps every intact record, skips damaged ones and resumes at the next intact
record, reports a truncated tail, skips and names event types added by a newer minor version,
and drops inconsistent events, saying how many; a newer major version is refused with both
versions named. Nothing is ever pickled.
"""

from __future__ import annotations

import collections
import errno
import mmap
import os
import platform
import stat
import struct
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import msgspec

from ..errors import UsageError
from .files import open_private, open_without_blocking, write_error_text
from .protocol import (
    MAX_LOADED_VALUES,
    PROTOCOL_VERSION,
    AnyEvent,
    ProtocolError,
    UnknownEventType,
    decode,
    decode_bounded,
    decode_known,
    version_text,
)
from .records import CHECKSUM_NAME, LARGE_PAYLOAD, Damage, describe_damage, frame, scan_records
from .sanity import Skipped, checked_events
from .sidecar import IndexRecorder, discard_index

__all__ = ["TRACE_MAGIC", "LARGE_PAYLOAD", "PROGRESS_RECORDS", "Progress", "TraceError", "ClockAnchor", "TraceWriter",
           "TraceContents", "TraceLayout", "trace_layout", "read_trace"]

Progress = Callable[[int, int], None]
"""A reader's progress callback: (bytes read, bytes in the file)."""

PROGRESS_RECORDS = 50_000
"""Records decoded between two progress calls."""

TRACE_MAGIC = b"COLLVIZ\0"
_LENGTH = struct.Struct("<I")
_FORMAT_NAME = "collviz-trace"


class TraceError(UsageError, ProtocolError):
    """A trace file that cannot be read: missing, not a trace, a newer major version, corrupt."""


class ClockAnchor(msgspec.Struct, kw_only=True, frozen=True):
    """Two clocks of one host read at one moment: CLOCK_MONOTONIC (``time.monotonic_ns()``, what
    every event's ``t_ns`` counts on the host that emitted it) and CLOCK_REALTIME (``time.time_ns()``,
    nanoseconds since the Unix epoch: what torch.profiler's traces count in)."""

    host: str
    monotonic_ns: int
    unix_ns: int

    @classmethod
    def now(cls) -> ClockAnchor:
        """This host's clocks now (the monotonic one read on both sides of the other, halved)."""
        before = time.monotonic_ns()
        unix_ns = time.time_ns()
        return cls(host=platform.node(), monotonic_ns=(before + time.monotonic_ns()) // 2, unix_ns=unix_ns)

    def unix_ns_of(self, t_ns: int) -> int:
        """The Unix time of monotonic time ``t_ns`` on :attr:`host` (exact to the clocks' drift since)."""
        return self.unix_ns + (t_ns - self.monotonic_ns)


class _Header(msgspec.Struct):
    format: str
    version: tuple[int, int]
    records: str | None = None
    """How records are framed: None (length, payload) or :data:`CHECKSUM_NAME` (length, CRC, payload)."""
    clock: ClockAnchor | None = None
    """The writer's clocks when it started (None in traces written before collviz recorded them)."""


class TraceWriter:
    """Appends event payloads to a trace file (created 0600; a device, FIFO or link is written
    through: :func:`~.files.open_private`), flushing once per batch; closing a regular file writes
    its index beside it (:mod:`.sidecar`), replacing any earlier one.

    A write error (a full disk, a device that refuses) never stops the run: the recording stops
    at that event, :attr:`error` says so in one line (``recording stopped at event N: no space
    left on device``), and later events are dropped. What was written before stays readable.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.events_written = 0
        self.error: str | None = None
        """Why the recording stopped early, or None while it is complete."""
        self._pending: list[bytes] = []
        self._payloads: list[bytes] = []
        self._crc32 = 0
        """CRC-32 of every byte written so far (the index's tie to the trace)."""
        try:
            self._file: BinaryIO | None = open_private(self.path)
        except OSError as exc:
            raise UsageError(f"cannot write trace {self.path}: {write_error_text(exc)}") from None
        fields = msgspec.msgpack.encode(_Header(format=_FORMAT_NAME, version=PROTOCOL_VERSION, records=CHECKSUM_NAME,
                                                clock=ClockAnchor.now()))
        header = TRACE_MAGIC + _LENGTH.pack(len(fields)) + fields
        self._index: IndexRecorder | None = None
        if stat.S_ISREG(os.fstat(self._file.fileno()).st_mode):
            discard_index(self.path)  # it described the file just emptied
            self._index = IndexRecorder(len(header), LARGE_PAYLOAD)
        self._write(header)

    def _write(self, data: bytes) -> bool:
        """Write and flush ``data``; on an OSError stop the recording and say why."""
        if self._file is None:
            return False
        try:
            self._file.write(data)
            self._file.flush()
        except OSError as exc:
            self._stop(exc)
            return False
        if self._index is not None:
            self._crc32 = zlib.crc32(data, self._crc32)
        return True

    def _stop(self, exc: OSError) -> None:
        self.error = f"recording stopped at event {self.events_written}: {write_error_text(exc)}"
        if self._index is not None:
            self._index.abandon(self.error)
        file, self._file = self._file, None
        try:
            if file is not None:
                file.close()
        except OSError:
            pass  # the buffer that failed to write fails again here; the error is already said

    def append(self, payload: bytes) -> None:
        """Queue one encoded event; it reaches the file at the next :meth:`flush`."""
        if self._file is not None:
            self._pending.append(frame(payload))
            self._payloads.append(payload)

    def flush(self) -> None:
        """Write every queued event in one call and hand it to the OS (readable from then on)."""
        if self._pending:
            if self._write(b"".join(self._pending)):
                self.events_written += len(self._pending)
                if self._index is not None:
                    self._index.add(self._payloads)
            self._pending.clear()
            self._payloads.clear()

    def write(self, payloads: Iterable[bytes]) -> None:
        """Append already-encoded event payloads and flush them to the OS."""
        for payload in payloads:
            self.append(payload)
        self.flush()

    def close(self) -> None:
        """Flush to disk and close; safe to call twice. A device that cannot sync (/dev/null) is fine."""
        self.flush()
        if self._file is None:
            return
        try:
            os.fsync(self._file.fileno())
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EROFS):
                self._stop(exc)
                return
        size = self._file.tell() if self._index is not None else 0  # a FIFO has no position
        self._file.close()
        self._file = None
        if self._index is not None:
            self._index.write(self.path, size, self._crc32)
            self._index = None


@dataclass
class TraceContents:
    """What a trace file held: its version, its events, and what was wrong with its tail."""

    version: tuple[int, int]
    events: list[AnyEvent] = field(default_factory=list)
    warning: str = ""
    clock: ClockAnchor | None = None
    """The writer's clocks when it started, where the trace recorded them."""


def _open(path: str | os.PathLike[str]) -> mmap.mmap | bytes:
    """The file's bytes, mapped: only a regular file that starts with the trace magic is read."""
    try:
        with open(path, "rb", opener=open_without_blocking) as handle:
            info = os.fstat(handle.fileno())
            if stat.S_ISDIR(info.st_mode):
                raise TraceError(f"{path} is a directory, not a trace file")
            if not stat.S_ISREG(info.st_mode):
                raise TraceError(f"{path} is not a regular file, so not a trace")
            if handle.read(len(TRACE_MAGIC)) != TRACE_MAGIC:
                raise TraceError(f"{path} is not a collviz trace (it does not start with the trace magic)")
            return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise TraceError(f"trace file {path} does not exist") from None
    except IsADirectoryError:
        raise TraceError(f"{path} is a directory, not a trace file") from None
    except OSError as exc:
        raise TraceError(f"cannot read trace {path}: {exc.strerror}") from None


def _header(data: mmap.mmap | bytes, name: str) -> tuple[_Header, int]:
    """The checked header and the offset of the first record."""
    offset = len(TRACE_MAGIC)
    if len(data) < offset + _LENGTH.size:
        raise TraceError(f"{name} is truncated inside its header")
    (length,) = _LENGTH.unpack_from(data, offset)
    offset += _LENGTH.size
    if offset + length > len(data):
        raise TraceError(f"{name} is truncated inside its header")
    try:
        header = msgspec.msgpack.decode(data[offset : offset + length], type=_Header)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TraceError(f"{name} has a malformed header: {exc}") from None
    if header.format != _FORMAT_NAME:
        raise TraceError(f"{name} is a {header.format!r} file, not a collviz trace")
    if header.version[0] != PROTOCOL_VERSION[0]:
        raise TraceError(
            f"{name} is trace format {version_text(header.version)}; this collviz reads "
            f"{version_text()} (major {PROTOCOL_VERSION[0]}): "
            + ("upgrade collviz to read it" if header.version[0] > PROTOCOL_VERSION[0] else "it is too old to read")
        )
    if header.records not in (None, CHECKSUM_NAME):
        raise TraceError(f"{name} frames its records as {header.records!r}; this collviz reads only {CHECKSUM_NAME!r}")
    return header, offset + length


@dataclass(frozen=True)
class TraceLayout:
    """Where a trace's records are: its version, whether they carry checksums, the offset of the
    first one and the file's size when it was looked at."""

    version: tuple[int, int]
    checksummed: bool
    first_record: int
    size: int


def trace_layout(path: str | os.PathLike[str]) -> TraceLayout:
    """The layout of the trace at ``path``, after the checks :func:`read_trace` makes first (it
    raises the same :class:`TraceError` for a missing file, a non-trace, a damaged header or a
    different major version)."""
    data = _open(path)
    try:
        header, start = _header(data, str(path))
        return TraceLayout(header.version, header.records == CHECKSUM_NAME, start, len(data))
    finally:
        if isinstance(data, mmap.mmap):
            data.close()


def _decodes(payload: bytes) -> bool:
    """Whether ``payload`` is an event (of any type): the validity test of records without checksums."""
    try:
        decode(payload)
    except UnknownEventType:
        return True
    except ProtocolError:
        return False
    return True


def _decode_each(batch: list[bytes], events: list[AnyEvent | Skipped], unknown: collections.Counter[str],
                 unloaded: list[int]) -> int:
    """Decode ``batch`` payload by payload into ``events`` (a newer minor version's types as
    :class:`Skipped` places, counted in ``unknown``; the value counts of buffers too long to load
    in ``unloaded``); how many payloads were not events."""
    undecodable = 0
    for payload in batch:
        try:
            if len(payload) > LARGE_PAYLOAD:
                event, left_out = decode_bounded(payload)
                events.append(event)
                if left_out:
                    unloaded.append(left_out)
                continue
            events.append(decode(payload))
        except UnknownEventType as skipped:
            unknown[skipped.type_name] += 1
            events.append(Skipped(skipped.rank, skipped.seq))
        except ProtocolError:
            undecodable += 1  # intact framing around a payload that is not an event
    return undecodable


def read_trace(path: str | os.PathLike[str], progress: Progress | None = None) -> TraceContents:
    """Every intact, consistent event of a trace file; ``progress(bytes_read, bytes_total)``
    follows the reading of large ones (every :data:`PROGRESS_RECORDS` records).

    Raises :class:`TraceError` (one line) for a missing file, anything but a regular file that
    starts with the trace magic, a damaged header, a different major version or an impossible
    world size. Everything else is reported in ``warning`` while the rest is kept: damaged records
    (skipped, reading resumes at the next intact one), a truncated tail, events of types added by
    a newer minor version, events from ranks outside the world, negative durations, repeated or
    missing sequence numbers.
    """
    name = str(path)
    data = _open(path)
    try:
        header, start = _header(data, name)
        damage: list[Damage] = []
        before_damage: list[int] = []
        events: list[AnyEvent | Skipped] = []
        unknown: collections.Counter[str] = collections.Counter()
        unloaded: list[int] = []
        undecodable = 0
        end = len(data)
        next_progress = PROGRESS_RECORDS
        for pos, batch in scan_records(data, start, header.records == CHECKSUM_NAME, _decodes, damage):
            while len(before_damage) < len(damage):
                before_damage.append(len(events))
            try:
                if max(map(len, batch)) > LARGE_PAYLOAD:
                    raise OverflowError  # a record far larger than collviz writes: bounded, one by one
                events.extend([decode_known(payload) for payload in batch])
            except Exception:  # noqa: BLE001 — some payload in the batch is not a plain known event: one by one
                undecodable += _decode_each(batch, events, unknown, unloaded)
            if progress is not None and len(events) >= next_progress:
                progress(pos, end)
                next_progress += PROGRESS_RECORDS
        while len(before_damage) < len(damage):
            before_damage.append(len(events))
        if progress is not None and len(events) >= PROGRESS_RECORDS:
            progress(end, end)
    finally:
        if isinstance(data, mmap.mmap):
            data.close()
    try:
        kept, problems = checked_events(events)
    except ProtocolError as exc:
        raise TraceError(f"{name}: {exc}") from None
    damaged = describe_damage(damage, before_damage)
    if not kept and (damage or undecodable):
        raise TraceError(f"{name}: no intact event in it ({damaged or 'no record is an event'})")
    notes = [f"{name}: {damaged}" if damaged else ""]
    if undecodable:
        problems.insert(0, f"skipped {undecodable} record{'s' if undecodable > 1 else ''} that are not events")
    if unknown:
        kinds = ", ".join(f"{type_name} ×{count}" for type_name, count in sorted(unknown.items()))
        notes.append(f"{name}: skipped {unknown.total()} events of types this collviz ({version_text()}) "
                     f"does not know ({kinds}); a newer collviz shows them")
    if unloaded:
        problems.append(f"values of {len(unloaded)} buffer{'s' if len(unloaded) > 1 else ''} not loaded "
                        f"({max(unloaded):,} values at most; collviz ships at most {MAX_LOADED_VALUES:,})")
    if problems:
        notes.append(f"{name}: " + "; ".join(problems))
    return TraceContents(version=header.version, events=kept, warning="; ".join(filter(None, notes)), clock=header.clock)
