"""Trace files and the event protocol: round trips, truncation, versions, hostile bytes."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collviz.runtime.protocol import (
    Buffer,
    Phase,
    ProtocolError,
    ProvenanceRun,
    RunEnd,
    decode,
    decode_frames,
    encode,
    encode_frames,
)
from collviz.runtime.trace import TRACE_MAGIC, TraceError, TraceWriter, read_trace


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
    assert contents.events == events and contents.version == (1, 0) and contents.warning == ""


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
    assert decode_frames(encode_frames(event))[0] == event
    with pytest.raises(ProtocolError, match="expected 2 frames"):
        decode_frames([encode(event)])
    with pytest.raises(ProtocolError, match="peer speaks 2.0"):
        decode_frames([b"collviz/2.0", encode(event)])
    with pytest.raises(ProtocolError, match="not a collviz message"):
        decode_frames([b"hello", encode(event)])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_decoder_accepts_events_or_raises_protocol_error(data):
    try:
        decode(data)
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None)
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


def test_runtime_does_not_import_textual():
    code = (
        "import sys, collviz.runtime.launch, collviz.runtime.headless, collviz.runtime.summary; "
        "sys.exit(1 if any(m == 'textual' or m.startswith('textual.') for m in sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0
