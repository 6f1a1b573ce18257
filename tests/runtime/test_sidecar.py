"""A trace's index (runtime/wire/sidecar.py): written by the trace's writer, used only while it
describes the trace byte for byte, never written where the scan would refuse the trace.

Expected columns are computed here from the events themselves and from the file's own layout.
"""

from __future__ import annotations

import os
import stat
import struct
import zlib
from pathlib import Path

import msgspec
import numpy as np
import pytest

from collviz.runtime.wire import sidecar
from collviz.runtime.wire.columns import NotIntact
from collviz.runtime.wire.protocol import EVENT_TYPES, Buffer, Collective, Freed, Transfer, encode
from collviz.runtime.wire.sidecar import index_path, read_index
from collviz.runtime.wire.trace import LARGE_PAYLOAD, TRACE_MAGIC, TraceWriter, trace_layout

from support.nodes import make_node
from support.synthetic import all_gather_events, write_trace


def _record_starts(data: bytes) -> list[int]:
    """Offsets of every record of a checksummed trace, and where the last ends."""
    (header,) = struct.unpack_from("<I", data, len(TRACE_MAGIC))
    at, starts = len(TRACE_MAGIC) + 4 + header, []
    while at < len(data):
        starts.append(at)
        at += 8 + struct.unpack_from("<I", data, at)[0]
    return [*starts, at]


def _read(path: Path):
    return read_index(path, trace_layout(path).first_record)


def _columns(index, part_events: int = 4) -> dict[str, list]:
    """Every column of ``index``, read a part at a time, as lists (keys as the names they number,
    a transfer's as its destination)."""
    found: dict[str, list] = {}
    transfer = EVENT_TYPES.index(Transfer)
    for part in index.parts(part_events):
        columns = part.columns
        for name in ("kinds", "ranks", "seqs", "phases", "numbers", "ends"):
            found.setdefault(name, []).extend(getattr(columns, name).tolist())
        found.setdefault("names", []).extend(
            k if kind == transfer else columns.names[k] if k >= 0 else None
            for kind, k in zip(columns.kinds.tolist(), columns.keys.tolist()))
    return found


def test_the_index_holds_every_events_place_and_columns(tmp_path):
    events = all_gather_events(world=3)
    path = write_trace(tmp_path / "t.cvz", events)
    assert stat.S_IMODE(index_path(path).stat().st_mode) == 0o600 and index_path(path).name == "t.cvz.index"
    index = _read(path)
    assert index is not None and len(index) == len(events)
    assert index.offsets.tolist() == _record_starts(path.read_bytes())
    columns = _columns(index)
    assert columns["kinds"] == [EVENT_TYPES.index(type(e)) for e in events]
    assert columns["ranks"] == [e.rank for e in events]
    assert columns["seqs"] == [e.seq for e in events]
    filed = (Transfer, Collective, Buffer, Freed)
    assert columns["phases"] == [e.phase if isinstance(e, filed) else 0 for e in events]
    named = [e.group if isinstance(e, Collective) else e.name if isinstance(e, (Buffer, Freed)) else
             e.dst if isinstance(e, Transfer) else None for e in events]
    assert columns["names"] == named
    # a transfer's order key, packed by hand: hop from bit 52, source from bit 32, start below
    assert columns["numbers"] == [e.group_seq if isinstance(e, Collective) else
                                  e.hop * 2**52 + e.src * 2**32 + e.start if isinstance(e, Transfer) else 0
                                  for e in events]
    assert columns["ends"] == [isinstance(e, Collective) and e.edge == "end" for e in events]
    assert [part.first for part in index.parts(4)] == list(range(0, len(events), 4))


def test_an_index_reads_its_trace_in_parts_and_decodes_whole_events(tmp_path):
    events = all_gather_events(world=3)
    path = write_trace(tmp_path / "t.cvz", events)
    index = _read(path)
    taken = []
    for part in index.parts(5):
        positions, decoded = part.select(Collective, Freed)
        assert positions.tolist() == [part.first + i for i, e in enumerate(events[part.first : part.first + 5])
                                      if isinstance(e, (Collective, Freed))]
        taken += decoded
    assert taken == [e for e in events if isinstance(e, (Collective, Freed))]


def test_flushes_of_any_size_build_the_same_index(tmp_path, monkeypatch):
    events = all_gather_events(world=4)
    whole = write_trace(tmp_path / "whole.cvz", events)
    monkeypatch.setattr(sidecar, "_BATCH_EVENTS", 7)  # columns built many times, names numbered across them
    writer = TraceWriter(tmp_path / "pieces.cvz")
    for start in range(0, len(events), 3):
        writer.write(encode(e) for e in events[start : start + 3])
    writer.close()
    one, many = _read(whole), _read(tmp_path / "pieces.cvz")
    assert one is not None and many is not None
    assert one.offsets.tolist() == many.offsets.tolist()
    assert _columns(one) == _columns(many)


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("at", [3, 20, 200, -3])
def test_a_trace_changed_in_place_fails_its_whole_file_checksum_after_the_last_part(tmp_path, at):
    path = write_trace(tmp_path / "t.cvz", all_gather_events(world=2))
    first_record = trace_layout(path).first_record
    _flip(path, at % path.stat().st_size)  # same size: the magic, the header, a record's payload
    index = read_index(path, first_record)
    assert index is not None  # the index itself still holds
    parts = index.parts(4)  # as replay --headless reads it: nothing shown before the last part
    taken = [next(parts) for _ in range(-(-len(index) // 4))]
    assert [part.first for part in taken] == list(range(0, len(index), 4))
    with pytest.raises(NotIntact, match="not those its index was written for"):
        next(parts)  # the whole file's CRC-32, known once every byte has been read
    shown = index.parts(4, records=True)  # as the viewer reads it: the whole CRC-32 in the same pass
    with pytest.raises(NotIntact):  # its own checksum where the flip is in a record, else the whole file's
        list(shown)


@pytest.mark.parametrize("at", [200, -3])
def test_a_record_changed_in_place_fails_its_own_checksum_before_its_part_is_handed_over(tmp_path, at):
    events = all_gather_events(world=2)
    path = write_trace(tmp_path / "t.cvz", events)
    index = read_index(path, trace_layout(path).first_record)
    assert index is not None
    damaged = int(np.searchsorted(index.offsets, at % path.stat().st_size, side="right")) - 1  # the record holding it
    _flip(path, at % path.stat().st_size)
    parts = index.parts(4, whole=False, records=True)  # as the viewer opens: each part shown once had
    assert [next(parts).first for _ in range(damaged // 4)] == list(range(0, damaged // 4 * 4, 4))
    with pytest.raises(NotIntact, match="does not match its checksum"):
        next(parts)  # the part holding it is never handed over


def test_parts_handed_over_from_a_later_one_still_check_every_byte_before_it(tmp_path):
    path = write_trace(tmp_path / "t.cvz", all_gather_events(world=2))
    index = _read(path)
    later = list(range(8, len(index), 4))
    assert [part.first for part in index.parts(4, records=True, first=8)] == later
    _flip(path, int(index.offsets[1]) + 10)  # a payload byte of event 1, in a part not handed over
    parts = index.parts(4, records=True, first=8)  # as the viewer's background reads what its open left
    assert [next(parts).first for _ in later] == later
    with pytest.raises(NotIntact, match="not those its index was written for"):
        next(parts)


@pytest.mark.parametrize("change", ["the trace grown", "a byte of the index's body", "a byte of the index's offsets",
                                    "a byte of the index's header", "the index cut short", "another index version"])
def test_an_index_that_no_longer_describes_its_trace_is_ignored(tmp_path, change, monkeypatch):
    path = write_trace(tmp_path / "t.cvz", all_gather_events(world=2))
    index = index_path(path)
    if change == "the trace grown":
        with open(path, "ab") as file:
            payload = encode(all_gather_events(world=2)[-1])
            file.write(struct.pack("<II", len(payload), zlib.crc32(payload)) + payload)
    elif change == "a byte of the index's body":  # of a version-3 index, its body checked whole
        monkeypatch.setattr(sidecar, "INDEX_VERSION", 3)
        path = write_trace(tmp_path / "t.cvz", all_gather_events(world=2))
        monkeypatch.undo()
        _flip(index, index.stat().st_size - 10)
    elif change == "a byte of the index's offsets":  # of a version-4 index: read whole, checked at once
        _flip(index, index.stat().st_size - 43 * len(all_gather_events(world=2)) - 3)  # 43 bytes an event follow
    elif change == "a byte of the index's header":
        _flip(index, 20)
    elif change == "the index cut short":
        os.truncate(index, index.stat().st_size - 1)
    else:  # as a reader that knows only the index versions before this one sees it
        monkeypatch.setattr(sidecar, "_LAYOUTS", {2: sidecar._COLUMNS[:7]})
    assert _read(path) is None


def test_an_index_of_version_2_is_read_without_the_transfers_sizes(tmp_path, monkeypatch):
    monkeypatch.setattr(sidecar, "INDEX_VERSION", 2)
    monkeypatch.setattr(sidecar, "_COLUMNS", sidecar._COLUMNS[:7])  # what a collviz before version 3 wrote
    events = all_gather_events(world=4)
    path = write_trace(tmp_path / "t.cvz", events)
    monkeypatch.undo()
    part = next(_read(path).parts(len(events)))
    assert part.columns.sizes is None and part.columns.p2p is None
    assert part.columns.kinds.tolist() == [EVENT_TYPES.index(type(event)) for event in events]


def test_an_index_of_version_3_is_read_its_body_checked_whole(tmp_path, monkeypatch):
    events = all_gather_events(world=4)
    newer = write_trace(tmp_path / "newer.cvz", events)
    monkeypatch.setattr(sidecar, "INDEX_VERSION", 3)  # what a collviz before version 4 wrote
    older = write_trace(tmp_path / "older.cvz", events)
    monkeypatch.undo()
    data = index_path(older).read_bytes()
    assert msgspec.msgpack.decode(data[12 : 12 + struct.unpack_from("<I", data, 8)[0]])["version"] == 3
    assert _columns(_read(older)) == _columns(_read(newer))
    assert _read(older).part_crc32s is None


def _version_4_damaged(tmp_path: Path, monkeypatch, column_at: int, event: int) -> tuple[Path, int]:
    """A trace of 4 ranks whose version-4 index (parts of 4 events) has a flipped byte in
    ``event``'s value of the column stored ``column_at`` bytes an event after the offsets; its event count."""
    monkeypatch.setattr(sidecar, "CHECK_EVENTS", 4)  # as a trace of millions has them of 262,144
    events = all_gather_events(world=4)
    path = write_trace(tmp_path / "t.cvz", events)
    index = index_path(path)
    _flip(index, index.stat().st_size - 43 * len(events) + column_at * len(events) + event)
    return path, len(events)


def test_a_version_4_index_checks_each_part_of_a_column_only_when_it_reads_it(tmp_path, monkeypatch):
    path, count = _version_4_damaged(tmp_path, monkeypatch, column_at=1, event=4 * 9)  # event 9's rank
    assert count > 12
    index = _read(path)
    assert index is not None  # its offsets hold: it is used
    assert index.where(Collective).size  # the kinds column holds too
    parts = index.parts(4, whole=False, records=True)
    assert [next(parts).first for _ in range(2)] == [0, 4]  # parts before the damage are handed over
    with pytest.raises(NotIntact, match=r"columns are not those written \(values 8 on\)"):
        next(parts)
    with pytest.raises(NotIntact, match=r"values 8 on"):
        list(index.parts(3))  # a part of 3 events from event 9 on still checks the whole part of 4 it is in


def test_a_version_4_index_checks_its_type_column_before_finding_types_in_it(tmp_path, monkeypatch):
    path, count = _version_4_damaged(tmp_path, monkeypatch, column_at=0, event=13)  # event 13's type
    assert count > 16
    with pytest.raises(NotIntact, match=r"values 12 on"):
        _read(path).where(Collective)


def test_an_index_holds_each_transfers_bytes_and_kind(tmp_path):
    events = all_gather_events(world=4)
    last = max(at for at, event in enumerate(events) if isinstance(event, Transfer))
    events[last] = msgspec.structs.replace(events[last], kind="p2p", bytes=7)
    path = write_trace(tmp_path / "t.cvz", events)
    part = next(_read(path).parts(len(events)))
    transfers = [event for event in events if isinstance(event, Transfer)]
    assert len(transfers) == 12  # 4 ranks, each receiving 3 chunks
    where = part.columns.where(Transfer)
    assert part.columns.sizes[where].tolist() == [t.bytes for t in transfers]
    assert part.columns.p2p[where].tolist() == [False] * 11 + [True]
    assert part.columns.sizes[where].tolist()[-1] == 7
    others = np.setdiff1d(np.arange(len(events)), where)
    assert not part.columns.sizes[others].any() and not part.columns.p2p[others].any()


def test_an_index_naming_a_type_this_collviz_does_not_know_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setattr(sidecar, "EVENT_TYPES", (*EVENT_TYPES[:-1], type("Hologram", (), {})))
    path = write_trace(tmp_path / "t.cvz", all_gather_events(world=2))  # its RunEnd is filed as a Hologram
    monkeypatch.undo()
    index = _read(path)
    assert index_path(path).exists() and index is not None
    with pytest.raises(NotIntact, match="does not know"):
        list(index.parts(4))


def test_no_index_where_the_scan_would_refuse_the_trace(tmp_path):
    path = write_trace(tmp_path / "ok.cvz", all_gather_events(world=2))
    assert index_path(path).exists()
    stranger = msgspec.msgpack.encode({"type": "Hologram", "run": "r", "rank": 0, "seq": 99, "t_ns": 1})
    writer = TraceWriter(tmp_path / "newer.cvz")
    writer.write([encode(all_gather_events(world=2)[0]), stranger])
    writer.close()
    assert not index_path(tmp_path / "newer.cvz").exists()
    writer = TraceWriter(tmp_path / "number.cvz")
    writer.write([encode(all_gather_events(world=2)[0]), b"\x05"])  # a msgpack 5, not an event
    writer.close()
    assert not index_path(tmp_path / "number.cvz").exists()
    writer = TraceWriter(tmp_path / "large.cvz")
    writer.write([b"\x00" * (LARGE_PAYLOAD + 1)])
    writer.close()
    assert not index_path(tmp_path / "large.cvz").exists()


def test_rewriting_a_trace_removes_its_old_index_until_the_new_one_is_complete(tmp_path):
    path = write_trace(tmp_path / "t.cvz", all_gather_events(world=2))
    writer = TraceWriter(path)
    assert not index_path(path).exists()  # being written: opened by a scan, as it grows
    writer.write(encode(e) for e in all_gather_events(world=3))
    assert not index_path(path).exists()
    writer.close()
    index = _read(path)
    assert index is not None and max(_columns(index)["ranks"]) == 2


class _FillsUp:
    """A file whose writes fail once ``room`` bytes are written, as on a full disk."""

    def __init__(self, file, room: int) -> None:
        self._file, self._room = file, room

    def write(self, data: bytes) -> int:
        if len(data) > self._room:
            raise OSError(28, "No space left on device")
        self._room -= len(data)
        return self._file.write(data)

    def __getattr__(self, name: str):
        return getattr(self._file, name)


def test_a_recording_that_stopped_early_leaves_no_index(tmp_path):
    path = tmp_path / "t.cvz"
    events = all_gather_events(world=2)
    writer = TraceWriter(path)
    writer.write([encode(events[0])])
    writer._file = _FillsUp(writer._file, 10)
    writer.write(encode(e) for e in events[1:])
    writer.close()
    assert writer.error and "no space left" in writer.error and not index_path(path).exists()


def test_a_device_gets_no_index(tmp_path):
    null = make_node(tmp_path / "null", "null")
    writer = TraceWriter(null.path)
    writer.write(encode(e) for e in all_gather_events(world=2))
    writer.close()
    assert not index_path(null.path).exists() and null.survived()


def test_a_transfers_order_key_orders_as_hop_source_start_do_and_refuses_what_it_cannot_pack():
    import random

    from collviz.runtime.wire.columns import transfer_order_key

    rng = random.Random(7)
    fields = [(rng.randrange(2**11), rng.randrange(2**20), rng.randrange(2**32)) for _ in range(2_000)]
    fields += [(0, 0, 0), (2**11 - 1, 2**20 - 1, 2**32 - 1), (1, 0, 0), (0, 1, 0), (0, 0, 1)]
    assert sorted(fields, key=lambda f: transfer_order_key(*f)) == sorted(fields)
    assert all(0 <= transfer_order_key(*f) < 2**63 for f in fields)
    assert transfer_order_key(2**11, 0, 0) == transfer_order_key(0, 2**20, 0) == transfer_order_key(0, 0, 2**32) == -1
    assert transfer_order_key(-1, 0, 0) == -1
