"""Trace files and the event protocol: round trips, truncation, versions, hostile bytes."""

from __future__ import annotations


import msgspec
import pytest
from collviz.runtime.wire.frames import decode_frames, encode_frames
from collviz.runtime.wire.protocol import (
    PROTOCOL_VERSION,
    Buffer,
    IncompatibleVersion,
    Phase,
    ProtocolError,
    ProvenanceRun,
    RunEnd,
    Transfer,
    UnknownEventType,
    decode,
    encode,
    version_text,
)
from collviz.runtime.wire.columns import THIN_FIELDS, transfer_keys
from collviz.runtime.wire.protocol import thin_event_type
from collviz.runtime.wire.trace import TRACE_MAGIC, TraceError, TraceWriter, read_trace
from hypothesis import given, settings
from hypothesis import strategies as st

from support.hypothesis_profiles import examples
from support.paths import FIXTURES
from support.traces import FutureEvent


def _events(n: int) -> list:
    events = [
        Phase(run="r", rank=0, seq=0, t_ns=1, index=0, name="setup", edge="begin", narration="hello"),
        Buffer(run="r", rank=0, seq=1, t_ns=2, phase=0, name="x", role="input", moment="before", shape=[2, 2],
               dtype="float32", values=[1.0, 2, 3.5, -4], provenance=[ProvenanceRun(0, 4, [0])]),
    ]
    events += [RunEnd(run="r", rank=-1, seq=i, t_ns=3 + i, status="ok") for i in range(n - len(events))]
    return events


def test_round_trip_keeps_every_field(tmp_path):
    events = _events(5)
    writer = TraceWriter(tmp_path / "t.cvz")
    writer.write(encode(e) for e in events)
    writer.close()
    contents = read_trace(tmp_path / "t.cvz")
    assert contents.events == events and contents.version == PROTOCOL_VERSION and contents.warning == ""


def test_a_file_being_written_is_readable(tmp_path):
    writer = TraceWriter(tmp_path / "t.cvz")
    writer.write([encode(_events(2)[0])])
    assert len(read_trace(tmp_path / "t.cvz").events) == 1
    writer.write([encode(_events(2)[1])])
    assert len(read_trace(tmp_path / "t.cvz").events) == 2
    writer.close()


@pytest.mark.parametrize("cut", [1, 3, 4, 7])
def test_truncated_last_record_is_skipped_with_a_warning(tmp_path, cut):
    events = _events(4)
    writer = TraceWriter(tmp_path / "t.cvz")
    writer.write(encode(e) for e in events)
    writer.close()
    data = (tmp_path / "t.cvz").read_bytes()
    (tmp_path / "cut.cvz").write_bytes(data[:-cut])
    contents = read_trace(tmp_path / "cut.cvz")
    assert contents.events == events[:-1]
    assert "truncated after 3 complete events" in contents.warning


def test_wire_frames_check_part_count_and_version():
    event = _events(1)[0]
    assert decode_frames(encode_frames(event)) == [(event, encode(event))]
    assert decode_frames([b"collviz/1.9", encode(event)]) == [(event, encode(event))]  # a newer minor speaks our language
    with pytest.raises(ProtocolError, match="expected 2 frames"):
        decode_frames([encode(event)])
    for other in (b"collviz/2.0", b"collviz/0.9", b"collviz/10.0", b"collviz/1.x"):
        with pytest.raises(IncompatibleVersion, match=f"peer speaks {other[8:].decode()}, this collviz speaks {version_text()}"):
            decode_frames([other, encode(event)])
    with pytest.raises(ProtocolError, match="not a collviz message"):
        decode_frames([b"hello", encode(event)])


def test_an_unknown_event_type_is_named_and_placed():
    payload = msgspec.msgpack.encode(FutureEvent(run="r", rank=3, seq=7, t_ns=1, detail="new"))
    with pytest.raises(UnknownEventType) as raised:
        decode(payload)
    assert (raised.value.type_name, raised.value.run, raised.value.rank, raised.value.seq) == ("FutureEvent", "r", 3, 7)
    with pytest.raises(ProtocolError, match="malformed") as raised:  # a known type, broken, stays malformed
        decode(msgspec.msgpack.encode({"type": "Phase", "run": "r", "rank": 0, "seq": 0, "t_ns": 0}))
    assert not isinstance(raised.value, UnknownEventType)


def test_a_newer_minor_traces_unknown_event_types_are_skipped_and_named(tmp_path):
    known = _events(4)
    future = [FutureEvent(run="r", rank=3, seq=i, t_ns=9) for i in range(2)]  # rank 3's own sequence
    header = msgspec.msgpack.encode({"format": "collviz-trace", "version": [1, 3]})
    records = [encode(known[0]), msgspec.msgpack.encode(future[0]), *map(encode, known[1:3]),
               msgspec.msgpack.encode(future[1]), encode(known[3])]
    blob = TRACE_MAGIC + len(header).to_bytes(4, "little") + header
    blob += b"".join(len(r).to_bytes(4, "little") + r for r in records)
    (tmp_path / "newer.cvz").write_bytes(blob)
    contents = read_trace(tmp_path / "newer.cvz")
    assert contents.version == (1, 3) and contents.events == known
    assert "skipped 2 events" in contents.warning and "FutureEvent ×2" in contents.warning


def test_a_trace_before_1_6_reads_each_transfers_step_as_its_hop():
    """all-gather-ring.cvz was recorded with protocol 1.2, whose transfers name their hop ``step``.
    A ring all-gather on 4 ranks: in hop h, rank r receives from r - 1 the chunk (4 elements) of
    rank r - h, which its left neighbour received a hop earlier (its own in hop 1)."""
    contents = read_trace(FIXTURES / "all-gather-ring.cvz")
    assert contents.version < (1, 6)
    moved = {(t.hop, t.src, t.dst, t.start) for t in contents.events if isinstance(t, Transfer)}
    assert moved == {(h, (r - 1) % 4, r, 4 * ((r - h) % 4)) for h in (1, 2, 3) for r in range(4)}
    assert all(t.legacy_step == 0 for t in contents.events if isinstance(t, Transfer))
    again = msgspec.msgpack.decode(encode(next(t for t in contents.events if isinstance(t, Transfer))))
    assert "step" not in again and again["hop"] == 1  # written back under its new name


def test_a_transfer_of_protocol_1_5_decodes_whole_and_thin_with_its_hop():
    fields = {"type": "Transfer", "run": "r", "rank": 2, "seq": 5, "t_ns": 1, "phase": 3, "src": 1, "dst": 2,
              "bytes": 8, "buffer": "x", "start": 4, "length": 2, "kind": "p2p"}
    old, new = msgspec.msgpack.encode({**fields, "step": 3}), msgspec.msgpack.encode({**fields, "hop": 3})
    assert decode(old) == decode(new) and decode(old).hop == 3
    thin = thin_event_type(Transfer, THIN_FIELDS[Transfer])
    # the order key packs hop << 52 | src << 32 | start
    assert transfer_keys(msgspec.msgpack.decode(old, type=thin)) == (2, 3 << 52 | 1 << 32 | 4)
    assert transfer_keys(msgspec.msgpack.decode(new, type=thin)) == (2, 3 << 52 | 1 << 32 | 4)
    assert decode(msgspec.msgpack.encode({**fields})).hop == 0  # a logical transfer: no hop


@settings(max_examples=examples(300))
@given(st.binary(max_size=200))
def test_decoder_accepts_events_or_raises_protocol_error(data):
    try:
        decode(data)
    except ProtocolError:
        pass


@settings(max_examples=examples(200))
@given(st.binary(max_size=300))
def test_trace_reader_accepts_traces_or_raises_trace_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "t.cvz"
    header = TraceWriter(path)
    header.close()
    path.write_bytes(path.read_bytes() + data)
    for blob in (path.read_bytes(), TRACE_MAGIC + data, data):
        path.write_bytes(blob)
        try:
            read_trace(path)
        except TraceError:
            pass

