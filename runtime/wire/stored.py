"""A trace's events left in its file and decoded when read: the store behind a large trace's log.

A viewer indexes every event of a trace but shows a few hundred at a time; holding millions of
decoded events costs gigabytes (a 64-rank Buffer is several KB as Python objects). A
:class:`StoredEvents` keeps where each record starts (8 bytes an event) and reads, checks and
decodes an event when it is asked for. It reads through the open file, not a memory map, so
what it holds stays small whatever the trace's size, and a file truncated or rewritten while
open gives a :class:`~.trace.TraceError` rather than a crash.
"""

from __future__ import annotations

import os
import weakref
import zlib
from array import array
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import overload

from .protocol import AnyEvent, ProtocolError, decode
from .records import frame_header
from .trace import TraceError

__all__ = ["StoredEvents", "BLOCK_BYTES", "CACHED_BLOCKS", "CACHED_EVENTS"]

BLOCK_BYTES = 1 << 16
"""The file is read in aligned blocks of this many bytes."""

CACHED_BLOCKS = 256
"""Blocks kept (16 MiB): a frame's events lie mostly near the cursor and in its step."""

CACHED_EVENTS = 4096
"""Decoded events kept: the next frame mostly reads the same events as the last."""


class StoredEvents(Sequence[AnyEvent]):
    """The events of an intact, checksummed trace, read from its file on access.

    Its reader adds records as it finds them (:meth:`add_records`: where each starts, and where
    the last ends; records lie back to back). Each read checks the record's length and checksum
    again before decoding it, so a file changed on disk since it was opened is said to be so
    (:class:`~.trace.TraceError`), never misread.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        self._starts = array("q")
        self._end = 0
        self._fd = os.open(path, os.O_RDONLY)
        self._closer = weakref.finalize(self, os.close, self._fd)
        self._blocks: OrderedDict[int, bytes] = OrderedDict()
        self._event = lru_cache(maxsize=CACHED_EVENTS)(self._decode)

    def add_records(self, starts: array, end: int) -> None:
        """Add events whose records start at file offsets ``starts`` (int64), the last ending at ``end``."""
        self._starts.extend(starts)
        self._end = end

    def close(self) -> None:
        """Close the file (reading afterwards raises ``OSError``)."""
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
        return map(self._event, range(len(self)))

    def _decode(self, index: int) -> AnyEvent:
        """Event ``index``, read, checked and decoded."""
        starts = self._starts
        start = starts[index]
        end = starts[index + 1] if index + 1 < len(starts) else self._end
        record = self._read(start, end)
        header = frame_header(record)
        payload = record[8:]
        if header is None or header != (len(payload), zlib.crc32(payload)):
            raise TraceError(f"{self.path} changed on disk since it was opened (event {index} no longer reads back)")
        try:
            return decode(payload)
        except ProtocolError:
            raise TraceError(f"{self.path} changed on disk since it was opened (event {index} no longer decodes)") from None

    def _read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the file (fewer where it has shrunk), through the block cache."""
        first, last = start // BLOCK_BYTES, (end - 1) // BLOCK_BYTES
        if first == last:
            base = first * BLOCK_BYTES
            return self._block(first)[start - base : end - base]
        pieces = [self._block(number) for number in range(first, last + 1)]
        joined = b"".join(pieces)
        base = first * BLOCK_BYTES
        return joined[start - base : end - base]

    def _block(self, number: int) -> bytes:
        blocks = self._blocks
        found = blocks.get(number)
        if found is not None:
            blocks.move_to_end(number)
            return found
        found = blocks[number] = os.pread(self._fd, BLOCK_BYTES, number * BLOCK_BYTES)
        if len(blocks) > CACHED_BLOCKS:
            blocks.popitem(last=False)
        return found
