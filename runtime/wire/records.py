"""Trace records: framing, per-record checksums, and resynchronisation past damage.

A record is ``u32 length`` + payload; traces whose header says ``records = "crc32"`` (written by
collviz 0.2 on) put ``u32 crc32(payload)`` between the two. :func:`scan_records` yields every
intact payload and, where the bytes at the reading position are not a valid record (a bit flip,
a stomped length, garbage), looks for the next offset where one is, skipping the damaged stretch
and noting it in a :class:`Damage` list. A valid record is one whose length fits the file and the
protocol's frame limit and whose checksum matches (traces without checksums: whose payload
decodes). A stretch at the end with no valid record after it is the truncated tail.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from mmap import mmap

from .protocol import MAX_FRAME_BYTES

__all__ = ["CHECKSUM_NAME", "BATCH", "Damage", "frame", "frame_header", "scan_records", "describe_damage"]

CHECKSUM_NAME = "crc32"
"""The header's ``records`` value for checksummed records (zlib's CRC-32 of the payload)."""

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
