"""Traces that survive damage: checksummed records, resynchronisation, and events that cannot lie.

Every damaged trace either reads (keeping only intact, consistent events, and saying what it
skipped) or is refused with one TraceError line; nothing else escapes, nothing hangs.
"""

from __future__ import annotations

import os
import struct
import zlib

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collviz.runtime.wire.protocol import Collective, RunStart, encode
from collviz.runtime.wire.trace import TRACE_MAGIC, TraceError, TraceWriter, read_trace

from support.hypothesis_profiles import examples
from support.nodes import make_node
from support.synthetic import all_gather_events


EVENTS = all_gather_events(world=4)


def _written(path, events=EVENTS):
    writer = TraceWriter(path)
    writer.write(encode(e) for e in events)
    writer.close()
    return path


def _offsets(data: bytes) -> list[int]:
    """Start of every event record of a checksummed trace, computed from the layout itself."""
    (header,) = struct.unpack_from("<I", data, len(TRACE_MAGIC))
    pos = len(TRACE_MAGIC) + 4 + header
    starts = []
    while pos < len(data):
        starts.append(pos)
        (size,) = struct.unpack_from("<I", data, pos)
        pos += 8 + size
    return starts


def test_records_carry_the_crc32_of_their_payload(tmp_path):
    data = _written(tmp_path / "t.cvz").read_bytes()
    starts = _offsets(data)
    assert len(starts) == len(EVENTS)
    for start, event in zip(starts, EVENTS):
        size, crc = struct.unpack_from("<II", data, start)
        payload = data[start + 8 : start + 8 + size]
        assert payload == encode(event) and crc == zlib.crc32(payload)


@pytest.mark.parametrize("damage", ["bit flip in payload", "stomped length", "absurd length", "garbage inserted"])
def test_a_damaged_record_is_skipped_and_reading_resumes(tmp_path, damage):
    data = bytearray(_written(tmp_path / "t.cvz").read_bytes())
    starts = _offsets(bytes(data))
    victim = 10
    at = starts[victim]
    if damage == "bit flip in payload":
        data[at + 8 + 3] ^= 0x10
    elif damage == "stomped length":
        data[at : at + 4] = b"\x07\x00\x00\x00"
    elif damage == "absurd length":
        data[at : at + 4] = b"\xff\xff\xff\x7f"
    else:
        data[at:at] = os.urandom(37)
    (tmp_path / "bad.cvz").write_bytes(bytes(data))
    contents = read_trace(tmp_path / "bad.cvz")
    expected = EVENTS[:victim] + EVENTS[victim + 1 :] if damage != "garbage inserted" else EVENTS
    assert contents.events == expected
    assert "damaged stretch" in contents.warning and "resumed" in contents.warning


def test_traces_without_checksums_still_read_and_resynchronise(tmp_path):
    """A 1.0 trace (no records field, u32 length + payload): a corrupt record is found by decoding."""
    header = msgspec.msgpack.encode({"format": "collviz-trace", "version": [1, 0]})
    payloads = [encode(e) for e in EVENTS]
    payloads[5] = b"\xc1" * len(payloads[5])  # 0xc1 is never valid msgpack
    blob = TRACE_MAGIC + struct.pack("<I", len(header)) + header
    blob += b"".join(struct.pack("<I", len(p)) + p for p in payloads)
    (tmp_path / "old.cvz").write_bytes(blob)
    contents = read_trace(tmp_path / "old.cvz")
    assert contents.version == (1, 0)
    assert contents.events == EVENTS[:5] + EVENTS[6:]


def _replace_start(**fields):
    return [msgspec.structs.replace(e, **fields) if isinstance(e, RunStart) else e for e in EVENTS]


@pytest.mark.parametrize("world", [0, -3, 10**6])
def test_an_impossible_world_size_is_one_line(tmp_path, world):
    path = _written(tmp_path / "t.cvz", _replace_start(world_size=world))
    with pytest.raises(TraceError, match=f"impossible world size, {world}"):
        read_trace(path)


def test_inconsistent_events_are_dropped_and_counted(tmp_path):
    events = list(EVENTS)
    collective = next(i for i, e in enumerate(events) if isinstance(e, Collective) and e.duration_ns is not None)
    events[collective] = msgspec.structs.replace(events[collective], duration_ns=-1)
    stranger = msgspec.structs.replace(events[-2], rank=7, seq=0)
    duplicate = events[3]
    gap_maker = msgspec.structs.replace(events[-1], seq=events[-1].seq + 5)
    path = _written(tmp_path / "t.cvz", events[:-1] + [stranger, duplicate, gap_maker])
    contents = read_trace(path)
    assert stranger not in contents.events and events[collective] not in contents.events
    assert contents.events.count(duplicate) == 1 and gap_maker in contents.events
    for phrase in ("dropped 1 event from ranks outside the world", "dropped 1 event with negative durations",
                   "dropped 1 event repeating an earlier sequence number", "1 gap in ranks' event sequences"):
        assert phrase in contents.warning


@pytest.mark.parametrize("kind", ["fifo", "device", "empty", "folder"])
def test_only_regular_trace_files_are_opened(tmp_path, kind):
    path = tmp_path / "t.cvz"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        make_node(path, "zero")
    elif kind == "empty":
        path.write_bytes(b"")
    else:
        path.mkdir()
    with pytest.raises(TraceError):
        read_trace(path)


@settings(max_examples=examples(150), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(min_value=0), st.binary(min_size=1, max_size=8)), min_size=1, max_size=6),
       st.integers(min_value=0))
def test_mutants_read_or_fail_in_one_line(tmp_path, stomps, cut):
    """Stomp random bytes anywhere past the header and cut the tail: what reads is a sub-list of
    what was written (the checksum admits no invented event), or it fails with a TraceError."""
    clean = _written(tmp_path / "clean.cvz").read_bytes()
    body = len(TRACE_MAGIC) + 4 + struct.unpack_from("<I", clean, len(TRACE_MAGIC))[0]
    data = bytearray(clean)
    for where, blob in stomps:
        at = body + where % (len(clean) - body)
        data[at : at + len(blob)] = blob
    data = data[: len(data) - cut % (len(data) - body)]
    (tmp_path / "mutant.cvz").write_bytes(bytes(data))
    try:
        contents = read_trace(tmp_path / "mutant.cvz")
    except TraceError as error:
        assert "\n" not in str(error)
        return
    remaining = iter(EVENTS)
    assert all(any(event == original for original in remaining) for event in contents.events)


def test_a_values_list_longer_than_collviz_ships_is_left_unloaded(tmp_path):
    from collviz.runtime.wire.protocol import MAX_LOADED_VALUES, Buffer

    start = next(e for e in EVENTS if isinstance(e, RunStart))
    huge = Buffer(run=start.run, rank=0, seq=10**6, t_ns=0, phase=0, name="big", role="grad", moment="after",
                  shape=[MAX_LOADED_VALUES + 1], dtype="float64", values=[0.5] * (MAX_LOADED_VALUES + 1) * 3)
    small = msgspec.structs.replace(huge, seq=10**6 + 1, name="small", shape=[2], values=[1, 2.5])
    contents = read_trace(_written(tmp_path / "t.cvz", EVENTS + [huge, small]))
    big, kept = contents.events[-2:]
    assert big.name == "big" and big.values is None and big.shape == huge.shape
    assert kept == small
    assert f"values of 1 buffer not loaded ({(MAX_LOADED_VALUES + 1) * 3:,} values at most" in contents.warning
