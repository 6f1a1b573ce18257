"""Trace files: a versioned header, then one length-prefixed msgpack event per record.

Layout (all integers little-endian)::

    b"COLLVIZ\\0"                        8-byte magic
    u32 length, header payload          msgpack map {"format": "collviz-trace", "version": [1, 0]}
    u32 length, event payload           repeated; each payload is ``protocol.encode(event)``

The writer flushes after every batch, so a file being written can be read. A reader keeps every
complete record of a truncated file and reports the cut; it skips, and names, event types added by
a newer minor version; a newer major version is refused with both versions named. Nothing is ever
pickled.
"""

from __future__ import annotations

import collections
import errno
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import msgspec

from ..errors import UsageError
from .files import open_private, write_error_text
from .protocol import PROTOCOL_VERSION, AnyEvent, ProtocolError, UnknownEventType, decode, version_text

__all__ = ["TRACE_MAGIC", "TraceError", "TraceWriter", "TraceContents", "read_trace"]

Progress = Callable[[int, int], None]
"""A reader's progress callback: (bytes read, bytes in the file)."""

PROGRESS_RECORDS = 50_000
"""Records decoded between two progress calls."""

TRACE_MAGIC = b"COLLVIZ\0"
_LENGTH = struct.Struct("<I")
_FORMAT_NAME = "collviz-trace"


class TraceError(UsageError, ProtocolError):
    """A trace file that cannot be read: missing, not a trace, a newer major version, corrupt."""


class _Header(msgspec.Struct):
    format: str
    version: tuple[int, int]


def _record(payload: bytes) -> bytes:
    return _LENGTH.pack(len(payload)) + payload


class TraceWriter:
    """Appends event payloads to a trace file (created 0600), flushing once per batch.

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
        try:
            self._file: BinaryIO | None = open_private(self.path)
        except OSError as exc:
            raise UsageError(f"cannot write trace {self.path}: {write_error_text(exc)}") from None
        header = msgspec.msgpack.encode(_Header(format=_FORMAT_NAME, version=PROTOCOL_VERSION))
        self._write(TRACE_MAGIC + _record(header))

    def _write(self, data: bytes) -> bool:
        """Write and flush ``data``; on an OSError stop the recording and say why."""
        if self._file is None:
            return False
        try:
            self._file.write(data)
            self._file.flush()
            return True
        except OSError as exc:
            self._stop(exc)
            return False

    def _stop(self, exc: OSError) -> None:
        self.error = f"recording stopped at event {self.events_written}: {write_error_text(exc)}"
        file, self._file = self._file, None
        try:
            file.close()
        except OSError:
            pass  # the buffer that failed to write fails again here; the error is already said

    def append(self, payload: bytes) -> None:
        """Queue one encoded event; it reaches the file at the next :meth:`flush`."""
        if self._file is not None:
            self._pending.append(_record(payload))

    def flush(self) -> None:
        """Write every queued event in one call and hand it to the OS (readable from then on)."""
        if self._pending:
            if self._write(b"".join(self._pending)):
                self.events_written += len(self._pending)
            self._pending.clear()

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
        self._file.close()
        self._file = None


@dataclass
class TraceContents:
    """What a trace file held: its version, its events, and what was wrong with its tail."""

    version: tuple[int, int]
    events: list[AnyEvent] = field(default_factory=list)
    warning: str = ""


def _open(path: str | os.PathLike[str]) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise TraceError(f"trace file {path} does not exist") from None
    except IsADirectoryError:
        raise TraceError(f"{path} is a directory, not a trace file") from None
    except OSError as exc:
        raise TraceError(f"cannot read trace {path}: {exc.strerror}") from None


def _split(data: bytes, name: str, progress: Progress | None = None) -> tuple[tuple[int, int], Iterator[bytes], list[str]]:
    """Check magic and header; return the version and an iterator over event payloads.

    The third value collects a warning if the iterator meets a truncated last record.
    ``progress(bytes_read, bytes_total)`` is called every :data:`PROGRESS_RECORDS` records, and at
    the end of a trace that had at least that many.
    """
    if not data.startswith(TRACE_MAGIC):
        raise TraceError(f"{name} is not a collviz trace (it does not start with the trace magic)")
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
    offset += length
    warnings: list[str] = []

    def payloads() -> Iterator[bytes]:
        pos = offset
        end = len(data)
        index = 0
        while pos < end:
            if pos + _LENGTH.size > end:
                warnings.append(f"{name}: last record truncated after {index} complete events; it was skipped")
                return
            (size,) = _LENGTH.unpack_from(data, pos)
            pos += _LENGTH.size
            if pos + size > end:
                warnings.append(f"{name}: last record truncated after {index} complete events; it was skipped")
                return
            yield data[pos : pos + size]
            pos += size
            index += 1
            if progress is not None and index % PROGRESS_RECORDS == 0:
                progress(pos, end)
        if progress is not None and index >= PROGRESS_RECORDS:
            progress(end, end)

    return header.version, payloads(), warnings


def _decode_records(payloads: Iterator[bytes], name: str) -> tuple[list[AnyEvent], str]:
    """The known events among ``payloads``, and a warning naming the skipped newer event types."""
    events: list[AnyEvent] = []
    skipped: collections.Counter[str] = collections.Counter()
    for index, payload in enumerate(payloads):
        try:
            events.append(decode(payload))
        except UnknownEventType as unknown:
            skipped[unknown.type_name] += 1
        except ProtocolError as exc:
            raise TraceError(f"{name}: event {index} is corrupt ({exc})") from None
    if not skipped:
        return events, ""
    kinds = ", ".join(f"{type_name} ×{count}" for type_name, count in sorted(skipped.items()))
    return events, (f"{name}: skipped {skipped.total()} events of types this collviz ({version_text()}) "
                    f"does not know ({kinds}); a newer collviz shows them")


def read_trace(path: str | os.PathLike[str], progress: Progress | None = None) -> TraceContents:
    """Every complete event of a trace file; ``progress(bytes_read, bytes_total)`` follows the reading.

    Raises :class:`TraceError` for a missing file, a non-trace, a different major version or a
    corrupt record; a truncated last record, and events of types added by a newer minor version,
    are skipped and reported in ``warning``.
    """
    name = str(path)
    version, payloads, warnings = _split(_open(path), name, progress)
    events, skipped = _decode_records(payloads, name)
    return TraceContents(version=version, events=events, warning="; ".join(filter(None, [skipped, *warnings])))
