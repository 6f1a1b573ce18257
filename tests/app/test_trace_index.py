"""Opening a trace fast (runtime/wire/scan.py, runtime/wire/sidecar.py, app/model/trace_index.py)
gives exactly what the careful reader gives: every index of the log, every view; anything unusual
is left to it. Traces written here get their writer's index; tests that must scan remove it.

The reference is ``EventLog(read_trace(path).events)``: read_trace decodes and checks event by
event, and the log's handlers index one event at a time, neither sharing code with the scan.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Union

import msgspec
import pytest

from collviz.app.model import EventLog, load_trace, view_at
from collviz.app.model.trace_index import index_trace
from collviz.runtime.wire import scan
from collviz.runtime.wire.protocol import Buffer, Collective, RunStart, Transfer, encode, thin_event_type
from collviz.runtime.wire.protocol import Span
from collviz.runtime.wire.scan import NotIntact, TraceScan
from collviz.runtime.wire.sidecar import index_path, read_index
from collviz.runtime.wire.stored import StoredEvents
from collviz.runtime.wire.trace import TRACE_MAGIC, TraceError, read_trace, trace_layout

from support.paths import FIXTURES
from support.synthetic import all_gather_events, write_trace


TRACES = sorted(FIXTURES.glob("*.cvz"))


def _series(series) -> tuple[list[int], list[int]]:
    return list(series.index), list(series.phase)


def _assert_same_log(fast: EventLog, slow: EventLog) -> None:
    """Every index of the two logs is the same, and so is the view at every step boundary."""
    assert len(fast) == len(slow)
    assert sorted(fast.ranks) == sorted(slow.ranks) and sorted(fast.phases) == sorted(slow.phases)
    for number, expected in slow.ranks.items():
        got = fast.ranks[number]
        assert (got.start, got.end, got.exit) == (expected.start, expected.end, expected.exit)
        assert {n: _series(s) for n, s in got.buffers.items()} == {n: _series(s) for n, s in expected.buffers.items()}
        for name in ("phases", "gates", "collectives"):
            assert _series(getattr(got, name)) == _series(getattr(expected, name)), (number, name)
        for name in ("index", "phase", "live", "peak", "categories", "cuda", "nvml"):
            assert list(getattr(got.memory, name)) == list(getattr(expected.memory, name)), (number, name)
    for number, expected in slow.phases.items():
        got = fast.phases[number]
        for name in ("name", "narration", "begin", "call_firsts", "call_keys"):
            assert getattr(got, name) == getattr(expected, name), (number, name)
        for name in ("transfers", "checks", "collectives", "spans"):
            assert _series(getattr(got, name)) == _series(getattr(expected, name)), (number, name)
    for name in ("run_start", "run_end", "step_ends", "failures", "stalls", "mismatches", "span_phases", "max_rank"):
        assert getattr(fast, name) == getattr(slow, name), name
    assert _series(fast.gos) == _series(slow.gos)
    assert list(fast.events) == list(slow.events)
    for cursor in sorted({0, 1, len(slow) // 2, len(slow), *slow.step_ends}):
        assert view_at(fast, cursor) == view_at(slow, cursor), cursor


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 4 KiB, so a small trace crosses many chunk boundaries (records split across two)."""
    monkeypatch.setattr(scan, "CHUNK_BYTES", 4096)


@pytest.fixture(params=["indexed", "scanned"])
def opened(request, monkeypatch):
    """How a trace written here is opened: from its writer's index (a scan would fail the test),
    or scanned (its index removed first). Yields a function that prepares ``path`` so."""
    indexed = request.param == "indexed"
    if indexed:
        def no_scan(self):
            raise AssertionError("an indexed trace was scanned")
            yield

        monkeypatch.setattr(TraceScan, "chunks", no_scan)

    def prepare(path: Path) -> Path:
        assert index_path(path).exists()
        if not indexed:
            index_path(path).unlink()
        return path

    return prepare


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_every_recorded_fixture_indexes_as_the_careful_reader_does(path, small_chunks):
    fast, warning = index_trace(path)  # recorded by an older collviz: no index, so scanned
    contents = read_trace(path)
    assert warning == contents.warning == ""
    _assert_same_log(fast, EventLog(contents.events))


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_every_recorded_fixture_rewritten_opens_from_its_index_as_the_careful_reader_does(path, tmp_path, monkeypatch):
    events = read_trace(path).events
    copy = write_trace(tmp_path / path.name, events)
    monkeypatch.setattr(TraceScan, "chunks", None)  # calling it would fail: the index must serve
    fast, warning = index_trace(copy)
    assert warning == ""
    _assert_same_log(fast, EventLog(events))


@pytest.mark.parametrize("kind", ["live", "step", "failed"])
def test_synthetic_runs_index_as_the_careful_reader_does(tmp_path, kind, small_chunks, opened):
    events = all_gather_events(world=5, step=kind == "step", fail_rank=2 if kind == "failed" else None)
    path = opened(write_trace(tmp_path / "t.cvz", events))
    fast, _ = index_trace(path)
    _assert_same_log(fast, EventLog(events))


def test_sequence_gaps_give_the_careful_readers_warning(tmp_path, opened):
    events = all_gather_events(world=4)
    path = opened(write_trace(tmp_path / "gaps.cvz", events[:20] + events[21:40] + events[42:]))
    fast, warning = index_trace(path)
    contents = read_trace(path)
    assert warning == contents.warning and "2 gaps in ranks' event sequences" in warning
    _assert_same_log(fast, EventLog(contents.events))


def _records(data: bytes) -> list[int]:
    """Offsets of every record of a checksummed trace, from the layout itself."""
    (header,) = struct.unpack_from("<I", data, len(TRACE_MAGIC))
    at, starts = len(TRACE_MAGIC) + 4 + header, []
    while at < len(data):
        starts.append(at)
        at += 8 + struct.unpack_from("<I", data, at)[0]
    return starts


def test_every_single_byte_of_damage_is_caught_by_the_chunk_checksum(tmp_path):
    path = write_trace(tmp_path / "t.cvz", all_gather_events(world=2))
    data = path.read_bytes()
    starts = _records(data)
    victim = starts[7]
    for at in range(victim + 4, starts[8]):  # its checksum and every payload byte
        for flip in (0x01, 0x80):
            damaged = bytearray(data)
            damaged[at] ^= flip
            path.write_bytes(damaged)
            with pytest.raises(NotIntact):
                index_trace(path)


def test_two_damaged_records_do_not_cancel_out(tmp_path):
    path = write_trace(tmp_path / "t.cvz", all_gather_events(world=2))
    data = bytearray(path.read_bytes())
    starts = _records(bytes(data))
    for victim in (5, 9):
        data[starts[victim] + 20] ^= 0x10
    path.write_bytes(data)
    with pytest.raises(NotIntact):
        index_trace(path)


def _inconsistent(kind: str) -> list:
    events = all_gather_events(world=4)
    at = next(i for i, e in enumerate(events) if isinstance(e, Collective) and e.edge == "end")
    if kind == "repeated sequence number":
        events.insert(at + 1, events[at])
    elif kind == "rank outside the world":
        events.insert(at + 1, msgspec.structs.replace(events[at], rank=9, seq=0))
    elif kind == "negative duration":
        events[at] = msgspec.structs.replace(events[at], duration_ns=-5)
    elif kind == "impossible world size":
        events[0] = msgspec.structs.replace(events[0], world_size=0)
    elif kind == "negative span duration":
        last = max(e.seq for e in events if e.rank == 0)
        events.append(Span(run=events[at].run, rank=0, seq=last + 1, t_ns=events[-1].t_ns, phase=0, kind="forward",
                           microbatch=0, duration_ns=-1))
    return events


@pytest.mark.parametrize("kind", ["repeated sequence number", "rank outside the world", "negative duration",
                                  "impossible world size", "negative span duration"])
def test_inconsistent_traces_are_left_to_the_careful_reader(tmp_path, kind):
    path = write_trace(tmp_path / "t.cvz", _inconsistent(kind))
    # the writer leaves no index where an event's own fields are wrong; the others are checked on opening
    assert index_path(path).exists() == (kind not in ("negative duration", "negative span duration"))
    with pytest.raises(NotIntact):
        index_trace(path)
    try:
        log, warning = load_trace(path, lambda *_: None)
    except TraceError as exc:
        with pytest.raises(TraceError, match=str(exc)[:20]):
            read_trace(path)
        return
    contents = read_trace(path)
    assert warning == contents.warning != ""
    _assert_same_log(log, EventLog(contents.events))


def test_a_damaged_trace_falls_back_to_the_careful_reader(tmp_path):
    events = all_gather_events(world=4)
    path = write_trace(tmp_path / "t.cvz", events)
    data = bytearray(path.read_bytes())
    data[_records(bytes(data))[10] + 30] ^= 0xFF
    path.write_bytes(data)
    log, warning = load_trace(path, lambda *_: None)
    contents = read_trace(path)
    assert "damaged stretch" in warning and warning == contents.warning
    assert len(log) == len(events) - 1
    _assert_same_log(log, EventLog(contents.events))


def test_a_newer_event_type_is_left_to_the_careful_reader(tmp_path):
    events = all_gather_events(world=2)
    path = write_trace(tmp_path / "t.cvz", events)
    stranger = msgspec.msgpack.encode({"type": "Hologram", "run": "synthetic", "rank": 0, "seq": 999, "t_ns": 1})
    with open(path, "ab") as file:
        file.write(struct.pack("<II", len(stranger), zlib.crc32(stranger)) + stranger)
    with pytest.raises(NotIntact):
        index_trace(path)
    log, warning = load_trace(path, lambda *_: None)
    assert "Hologram ×1" in warning and len(log) == len(events)


def test_stored_events_read_back_what_was_written_and_notice_a_file_cut_short(tmp_path):
    events = all_gather_events(world=4)
    path = write_trace(tmp_path / "t.cvz", events)
    log, _ = index_trace(path)
    stored = log.events
    assert isinstance(stored, StoredEvents)
    assert list(stored) == events and stored[-1] == events[-1] and stored[3:9] == events[3:9]
    with pytest.raises(IndexError):
        stored[len(events)]
    unread, _ = index_trace(path)  # its steps, starts and ends are read as it opens; a transfer is not
    last = max(at for at, event in enumerate(events) if isinstance(event, Transfer))
    offsets = read_index(path, trace_layout(path).first_record).offsets
    os.truncate(path, int(offsets[last]) + 8)
    with pytest.raises(TraceError, match="changed on disk"):
        unread.events[last]


def test_events_read_back_are_not_tracked_by_the_cyclic_collector(tmp_path):
    """Every event type is untracked (``gc=False``: an event holds only data), and so is every event
    a trace reads back, a Buffer with its shared provenance included: a viewer's frame decodes
    hundreds, which the collection it sets off would otherwise scan."""
    import gc

    from collviz.runtime.wire.protocol import EVENT_TYPES, Buffer

    assert [kind.__name__ for kind in EVENT_TYPES if kind.__struct_config__.gc] == []
    events = all_gather_events(world=4)
    log, _ = index_trace(write_trace(tmp_path / "t.cvz", events))
    read = list(log.events)
    assert read == events and any(isinstance(event, Buffer) and event.provenance for event in read)
    assert [event for event in read if gc.is_tracked(event)] == []


def test_stored_events_read_thin_the_fields_asked_for_and_check_every_record(tmp_path):
    events = all_gather_events(world=4)
    path = write_trace(tmp_path / "t.cvz", events)
    log, _ = index_trace(path)
    stored = log.events
    ends = [at for at, event in enumerate(events) if isinstance(event, Collective) and event.edge == "end"]
    assert len(ends) == 4
    thin = stored.thin(ends, thin_event_type(Collective, ["bytes_out", "duration_ns"]))
    assert [(e.rank, e.seq, e.bytes_out, e.duration_ns) for e in thin] \
        == [(events[at].rank, events[at].seq, events[at].bytes_out, events[at].duration_ns) for at in ends]
    assert stored.thin([], thin_event_type(Collective, ["phase"])) == []
    either = Union[thin_event_type(Collective, ["edge"]), thin_event_type(Buffer, ["moment"])]
    buffer = next(at for at, event in enumerate(events) if isinstance(event, Buffer))
    assert [type(e).__name__ for e in stored.thin([ends[0], buffer], either)] == ["Collective", "Buffer"]
    with pytest.raises(TraceError, match="no longer decode"):  # an event of another kind than asked for
        stored.thin([buffer], thin_event_type(Collective, ["phase"]))
    end = stored._starts[ends[2] + 1]  # the third end's record: its last payload byte flipped in place
    with open(path, "r+b") as file:
        file.seek(end - 1)
        last = file.read(1)
        file.seek(end - 1)
        file.write(bytes([last[0] ^ 1]))
    with pytest.raises(TraceError, match=f"event {ends[2]} no longer reads back"):
        stored.thin(ends, thin_event_type(Collective, ["phase"]))


def _flip(path, offset: int) -> None:
    """Flip the lowest bit of the byte at ``offset`` of ``path``, in place."""
    with open(path, "r+b") as file:
        file.seek(offset)
        byte = file.read(1)
        file.seek(offset)
        file.write(bytes([byte[0] ^ 1]))


@pytest.mark.parametrize("indexed", [True, False], ids=["offsets from the index", "offsets from a scan"])
def test_a_batch_read_names_the_damaged_record_in_its_middle(tmp_path, indexed):
    events = all_gather_events(world=4)
    path = write_trace(tmp_path / "t.cvz", events)
    if not indexed:
        index_path(path).unlink()
    stored = index_trace(path)[0].events
    assert isinstance(stored, StoredEvents)
    buffers = [at for at, event in enumerate(events) if isinstance(event, Buffer)]
    assert len(buffers) >= 8 and len({events[at].rank for at in buffers}) == 4
    moments = thin_event_type(Buffer, ["moment"])
    asked = [buffers[-1], *buffers[:-1], buffers[0]]  # out of order, one twice
    assert [(e.rank, e.seq, e.moment) for e in stored.thin(asked, moments)] \
        == [(events[at].rank, events[at].seq, events[at].moment) for at in asked]
    middle = buffers[len(buffers) // 2]
    _flip(path, stored._starts[middle] + 8 + 3)  # a payload byte of a record in the middle of the batch
    with pytest.raises(TraceError, match=f"event {middle} no longer reads back"):
        stored.thin(buffers, moments)
    with pytest.raises(TraceError, match=f"event {middle} no longer reads back"):
        stored[middle]
    before = buffers[: len(buffers) // 2]
    assert [e.seq for e in stored.thin(before, moments)] == [events[at].seq for at in before]
    _flip(path, stored._starts[middle] + 8 + 3)  # mended; now the record's length word is stomped
    _flip(path, stored._starts[middle])
    with pytest.raises(TraceError, match=f"event {middle} no longer reads back"):
        stored.thin(buffers, moments)
    _flip(path, stored._starts[middle])
    assert [e.seq for e in stored.thin(buffers, moments)] == [events[at].seq for at in buffers]


def test_thin_event_types_decode_only_what_they_name():
    transfer = Transfer(run="r", rank=3, seq=7, t_ns=1, phase=2, src=1, dst=3, bytes=8, buffer="out", start=0,
                        length=2, kind="logical")
    thin = msgspec.msgpack.decode(encode(transfer), type=thin_event_type(Transfer, ["phase"]))
    assert msgspec.structs.asdict(thin) == {"rank": 3, "seq": 7, "phase": 2}
    with pytest.raises(ValueError, match="Buffer has no field colour"):
        thin_event_type(Buffer, ["colour"])
    with pytest.raises(msgspec.ValidationError):
        msgspec.msgpack.decode(encode(msgspec.structs.replace(transfer, phase=-1)).replace(b"\xa5phase\xff", b"\xa5phase\xa1x"),
                               type=thin_event_type(Transfer, ["phase"]))


def test_a_trace_without_checksums_is_left_to_the_careful_reader(tmp_path):
    events = all_gather_events(world=2)
    header = msgspec.msgpack.encode({"format": "collviz-trace", "version": [1, 0]})
    body = b"".join(struct.pack("<I", len(p)) + p for p in map(encode, events))
    path = tmp_path / "old.cvz"
    path.write_bytes(TRACE_MAGIC + struct.pack("<I", len(header)) + header + body)
    with pytest.raises(NotIntact):
        index_trace(path)
    log, warning = load_trace(path, lambda *_: None)
    assert warning == "" and list(log.events) == events
    assert isinstance(log.events[0], RunStart)


def test_a_trace_with_no_events_opens_empty(tmp_path, opened):
    path = opened(write_trace(tmp_path / "empty.cvz", []))
    fast, warning = index_trace(path)
    assert len(fast) == 0 and warning == "" and view_at(fast, 0) == view_at(EventLog([]), 0)


@pytest.mark.parametrize("content", [None, b"not a trace at all"])
def test_replay_in_the_viewer_fails_fast_on_the_header_alone(tmp_path, monkeypatch, content):
    from collviz.app import app as viewer
    from collviz.app.commands import playing

    path = tmp_path / "t.cvz"
    if content is not None:
        path.write_bytes(content)
    monkeypatch.setattr(playing, "headless_instead", lambda *_: False)
    monkeypatch.setattr(viewer, "run_viewer", lambda **_: pytest.fail("the screen opened"))
    with pytest.raises(TraceError, match="does not exist" if content is None else "not a collviz trace"):
        playing.replay_trace(path)


def test_a_record_that_is_a_bare_number_is_left_to_the_careful_reader(tmp_path):
    events = all_gather_events(world=2)
    path = write_trace(tmp_path / "t.cvz", events)
    with open(path, "ab") as file:
        file.write(struct.pack("<II", 1, zlib.crc32(b"\x05")) + b"\x05")  # a checksummed msgpack 5
    with pytest.raises(NotIntact):
        index_trace(path)
    log, warning = load_trace(path, lambda *_: None)
    assert "not events" in warning and len(log) == len(events)


def test_many_events_read_together_are_those_read_one_by_one_and_are_kept(tmp_path):
    """``StoredEvents.many`` (a frame's Buffers, every rank's latest) gives what indexing gives,
    out of order, one asked twice, some already read; what it read is kept (read again, the same
    object); a damaged record is named; a record that decodes as no event this collviz knows is
    said to, by its number, as a read of it alone says."""
    events = all_gather_events(world=4)
    path = write_trace(tmp_path / "t.cvz", events)
    stored = index_trace(path)[0].events
    assert isinstance(stored, StoredEvents)
    buffers = [at for at, event in enumerate(events) if isinstance(event, Buffer)]
    assert len(buffers) >= 8 and len({events[at].rank for at in buffers}) == 4
    already = stored[buffers[1]]
    asked = [buffers[-1], *buffers[:-1], buffers[0], 0]  # out of order, one twice, the RunStart too
    read = stored.many(asked)
    assert read == [events[at] for at in asked] and read[2] is already
    assert all(stored[at] is event for at, event in zip(asked, read)) and stored.many([]) == []
    assert stored.many(asked) == read
    fresh = index_trace(path)[0].events
    middle = buffers[len(buffers) // 2]
    _flip(path, fresh._starts[middle] + 8 + 3)  # a payload byte of a record in the middle
    with pytest.raises(TraceError, match=f"event {middle} no longer reads back"):
        fresh.many(buffers)
    _flip(path, fresh._starts[middle] + 8 + 3)
    begin, end = fresh._starts[middle], fresh._starts[middle + 1]
    with open(path, "r+b") as file:  # the tag renamed and the checksum made again: a record intact, of no known kind
        file.seek(begin)
        record = bytearray(file.read(end - begin))
        tag = record.index(b"Buffer", 8)
        record[tag:tag + 6] = b"Buffex"
        record[:8] = struct.pack("<II", len(record) - 8, zlib.crc32(record[8:]))
        file.seek(begin)
        file.write(record)
    with pytest.raises(TraceError, match=f"event {middle} no longer decodes"):
        fresh.many(buffers)


def test_stored_buffers_with_the_same_provenance_share_it_and_equal_their_events(tmp_path):
    """A stored trace decodes a provenance once for all the Buffers carrying it; each Buffer still
    equals the event written, with its provenance absent, empty or its own."""
    from collviz.runtime.wire.protocol import ProvenanceRun

    events = all_gather_events(world=2)
    common = dict(run="r", phase=0, name="out", role="gathered", moment="after", shape=[2], dtype="float32",
                  values=[1.0, 2.0])
    runs = [ProvenanceRun(0, 1, [0]), ProvenanceRun(1, 1, [1])]
    buffers = [Buffer(rank=0, seq=900, t_ns=1, provenance=runs, **common),
               Buffer(rank=1, seq=900, t_ns=2, provenance=[ProvenanceRun(0, 1, [0]), ProvenanceRun(1, 1, [1])], **common),
               Buffer(rank=0, seq=901, t_ns=3, provenance=None, **common),
               Buffer(rank=1, seq=901, t_ns=4, provenance=[], **common),
               Buffer(rank=0, seq=902, t_ns=5, provenance=[ProvenanceRun(0, 2, [1])], **common)]
    events = [*events[:-1], *buffers, events[-1]]
    path = write_trace(tmp_path / "t.cvz", events)
    log, _ = index_trace(path)
    first = len(events) - 1 - len(buffers)
    read = [log.events[first + i] for i in range(len(buffers))]
    assert read == buffers and all(type(b) is Buffer for b in read)
    assert read[0].provenance is read[1].provenance and read[4].provenance is not read[0].provenance
    assert read[2].provenance is None and read[3].provenance == []
