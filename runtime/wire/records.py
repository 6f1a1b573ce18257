"""Trace records: framing, per-record checksums, and resynchronisation past damage.

A record is ``u32 length`` + payload; traces whose header says ``records = "crc32"`` (written by
collviz 0.2 on) put ``u32 crc32(payload)`` between the two. :func:`scan_records` yields every
intact payload and, where the bytes at the reading position are not a valid record (a bit flip,
a stomped length, garbage), looks for the next offset where one is, skipping the damaged stretch
and noting it in a :class:`Damage` list. A valid record is one whose length fits the file and the
protocol's frame limit and whose checksum matches (traces without checksums: whose payload
decodes). A stretch at the end with no valid record after it is the truncated tail.
:func:`checksums_hold` checks every record of a stretch read whole at once (one pass of zlib and
a few numpy scatters through :class:`HeaderSlots`): how a scan and an index's parts check theirs.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from mmap import mmap

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .protocol import MAX_FRAME_BYTES

__all__ = ["CHECKSUM_NAME", "LARGE_PAYLOAD", "BATCH", "HeaderSlots", "checksums_hold", "Damage", "frame",
           "frame_header", "scan_records", "describe_damage"]

CHECKSUM_NAME = "crc32"
"""The header's ``records`` value for checksummed records (zlib's CRC-32 of the payload)."""

LARGE_PAYLOAD = 1 << 20
"""A record larger than this (collviz's own stay far below) is decoded with its values bounded."""

_U32 = struct.Struct("<I")
_U32_PAIR = struct.Struct("<II")


def frame(payload: bytes) -> bytes:
    """One checksummed record: length, CRC-32 of the payload, payload."""
    return _U32_PAIR.pack(len(payload), zlib.crc32(payload)) + payload


def frame_header(record: bytes) -> tuple[int, int] | None:
    """(payload length, CRC-32) from a checksummed record's first 8 bytes; None if it is shorter."""
    return _U32_PAIR.unpack_from(record) if len(record) >= _U32_PAIR.size else None


@dataclass(frozen=True)
class Damage:
    """A stretch of bytes ``[start, end)`` that held no valid record; ``tail`` when it ran to the end."""

    start: int
    end: int
    tail: bool


BATCH = 4096
"""Payloads :func:`scan_records` hands over at a time (fewer generator round trips)."""


def scan_records(data: bytes | mmap, start: int, checksummed: bool, plausible: Callable[[bytes], bool],
                 damage: list[Damage]) -> Iterator[tuple[int, list[bytes]]]:
    """(offset after the batch, payloads) for the valid records of ``data`` from ``start``, in
    batches of at most :data:`BATCH` that never span a damaged stretch.

    ``plausible(payload)`` decides validity where there is no checksum. Every skipped stretch is
    appended to ``damage`` before the batch after it is handed over.
    """
    end = len(data)
    header = _U32_PAIR.size if checksummed else _U32.size
    unpack = _U32_PAIR.unpack_from if checksummed else _U32.unpack_from
    crc32 = zlib.crc32
    pos = start
    batch: list[bytes] = []
    while pos < end:
        # the fast path, inlined: an intact record (what _record_at checks, minus the calls)
        body = pos + header
        if body <= end:
            fields = unpack(data, pos)
            stop = body + fields[0]
            if fields[0] <= MAX_FRAME_BYTES and stop <= end:
                payload = data[body:stop]
                if crc32(payload) == fields[1] if checksummed else plausible(payload):
                    pos = stop
                    batch.append(payload)
                    if len(batch) == BATCH:
                        yield pos, batch
                        batch = []
                    continue
        if batch:
            yield pos, batch
            batch = []
        resume = _next_valid(data, pos + 1, end, header, checksummed, plausible)
        damage.append(Damage(pos, resume if resume is not None else end, resume is None))
        if resume is None:
            return
        pos = resume
    if batch:
        yield pos, batch


def _record_at(data: bytes | mmap, pos: int, end: int, header: int, checksummed: bool,
               plausible: Callable[[bytes], bool]) -> bytes | None:
    if pos + header > end:
        return None
    if checksummed:
        size, crc = _U32_PAIR.unpack_from(data, pos)
    else:
        (size,), crc = _U32.unpack_from(data, pos), None
    if size > MAX_FRAME_BYTES or pos + header + size > end:
        return None
    payload = data[pos + header : pos + header + size]
    if checksummed:
        return payload if zlib.crc32(payload) == crc else None
    return payload if plausible(payload) else None


def _next_valid(data: bytes | mmap, pos: int, end: int, header: int, checksummed: bool,
                plausible: Callable[[bytes], bool]) -> int | None:
    """The first offset at or after ``pos`` where a valid record starts, or None."""
    for candidate in range(pos, end - header + 1):
        if _record_at(data, candidate, end, header, checksummed, plausible) is not None:
            return candidate
    return None


def describe_damage(damage: list[Damage], before_each: list[int]) -> str:
    """One sentence: how many stretches were skipped and where (``before_each``: complete events
    read before each stretch); empty when there was no damage."""
    if not damage:
        return ""
    tail = damage[-1] if damage[-1].tail else None
    middle = damage[:-1] if tail else damage
    parts = []
    if middle:
        where = ", ".join(f"bytes {d.start:,}–{d.end:,}" for d in middle[:5]) + (" …" if len(middle) > 5 else "")
        parts.append(f"skipped {len(middle)} damaged stretch{'es' if len(middle) > 1 else ''} of records "
                     f"({where}) and resumed after each")
    if tail:
        parts.append(f"last record truncated after {before_each[-1]} complete events "
                     f"(or damaged: bytes {tail.start:,}–{tail.end:,} hold no intact record); it was skipped")
    return "; ".join(parts)


class HeaderSlots:
    """The 8-byte record headers of a stretch of records read whole, each read and written as two
    little-endian 32-bit words.

    Headers sit at any byte offset: numpy gathers them as rows of a view holding the 8 bytes from
    every offset (and scatters new ones back through it), one index per header, so reading or
    writing every header is a few numpy calls whatever the number of records.
    """

    def __init__(self, data: bytearray | memoryview, at: np.ndarray) -> None:
        every = np.frombuffer(data, np.uint8)
        self._rows = as_strided(every, shape=(max(every.size - 7, 0), 8), strides=(1, 1))
        """Row ``i``: the 8 bytes from byte ``i`` (rows overlap; the records' headers do not)."""
        self._at = at
        self._words = self._rows[at].view("<u4")

    def read(self, word: int) -> np.ndarray:
        """Every header's first (0) or second (1) word, in record order, as read when this was made."""
        return self._words[:, word]

    def write(self, first: np.ndarray | int, second: np.ndarray | int) -> None:
        """Set every header's first and second word (one value for all, or one per record)."""
        written = np.empty_like(self._words)
        written[:, 0] = first
        written[:, 1] = second
        self._rows[self._at] = written.view(np.uint8)


_zero_checksums = np.zeros(LARGE_PAYLOAD + 1, np.uint32)
_zero_known = np.zeros(LARGE_PAYLOAD + 1, bool)


def checksums_hold(records: memoryview, slots: HeaderSlots, lengths: np.ndarray) -> bool:
    """Whether every record's CRC-32 matches its payload, from one pass of zlib over ``records``,
    the chunk's records back to back (it overwrites their headers; the walk has read them).

    CRC-32 is linear over GF(2) but for its initial and final inversions. Write Lin(M) for the
    register zlib reaches over M from a zero register: ``zlib.crc32(M, 0xFFFFFFFF) == ~Lin(M)``.
    For a payload P of L bytes with checksum c, ``crc32(P) == c`` is equivalent to
    ``Lin(P + w) == 0`` with ``w = le32(c ^ crc32(bytes(L)))`` (the textbook identity that a message
    followed by its own CRC leaves a constant, the inversions folded into w). Lin of a
    concatenation is the XOR of each part's Lin carried through the bytes after it; zero bytes
    add nothing, and carrying through bytes is invertible. So with each payload's w written into
    the header after it, zeros elsewhere in the headers and the last w appended, Lin(chunk) is 0
    exactly when every checksum matches: one damaged record can never cancel out (several could,
    with odds of 2^-32, as one CRC-32 can be fooled).
    """
    checksums = slots.read(1)
    missing = np.unique(lengths[~_zero_known[lengths]]).tolist()
    for length in missing:
        _zero_checksums[length] = zlib.crc32(bytes(length))
        _zero_known[length] = True
    after = checksums ^ _zero_checksums[lengths]
    slots.write(np.concatenate(([0], after[:-1])).astype(np.uint32), 0)
    register = zlib.crc32(int(after[-1]).to_bytes(4, "little"), zlib.crc32(records, 0xFFFFFFFF))
    return register == 0xFFFFFFFF
