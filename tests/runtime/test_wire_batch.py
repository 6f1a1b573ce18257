"""Several events in one ZeroMQ message (protocol 1.5): the layout, its signature, what is refused,
and an emitter's events reaching a collector unchanged, in order, in fewer messages."""

from __future__ import annotations

import hashlib
import hmac
import threading
import time

import msgspec
import pytest
import zmq

from collviz.runtime.wire.frames import Unauthenticated, batch_frames, decode_frames, open_frames
from collviz.runtime.wire.protocol import (
    PROTOCOL_VERSION,
    IncompatibleVersion,
    Phase,
    ProtocolError,
    RunEnd,
    UnknownEventType,
    encode,
)
from collviz.runtime.wire.transport import Collector, Endpoints, EventEmitter

from support.traces import FutureEvent


SECRET = b"a-secret-shared-by-both-ends-0123"
ONE_HEADER = b"collviz/%d.%d" % PROTOCOL_VERSION
BATCH_HEADER = ONE_HEADER + b" batch"


def _phases(count: int, run: str = "r", rank: int = 0) -> list[Phase]:
    return [Phase(run=run, rank=rank, seq=seq, t_ns=seq * 10, index=seq, name=f"step {seq}", edge="begin")
            for seq in range(count)]


def _body(payloads: list[bytes]) -> bytes:
    """Each payload after its length as 4 big-endian bytes (written out here, not by collviz)."""
    return b"".join(len(p).to_bytes(4, "big") + p for p in payloads)


def test_a_batch_is_the_header_and_each_payload_after_its_length():
    payloads = [encode(event) for event in _phases(3)]
    assert batch_frames(payloads) == [BATCH_HEADER, _body(payloads)]
    assert open_frames([BATCH_HEADER, _body(payloads)]) == payloads
    assert decode_frames(batch_frames(payloads)) == list(zip(_phases(3), payloads))


def test_one_event_goes_as_before_batches_existed():
    payload = encode(_phases(1)[0])
    assert batch_frames([payload]) == [ONE_HEADER, payload]
    assert decode_frames([b"collviz/1.4", payload]) == [(_phases(1)[0], payload)]  # what a 1.4 worker sends


def test_a_signed_batch_carries_the_hmac_of_header_stamp_and_body():
    payloads = [encode(event) for event in _phases(2)]
    header, body, stamp, mac = batch_frames(payloads, SECRET)
    assert (header, body) == (BATCH_HEADER, _body(payloads))
    assert abs(int.from_bytes(stamp, "little", signed=True) - time.time_ns()) < 60e9
    assert mac == hmac.new(SECRET, header + stamp + body, hashlib.sha256).digest()
    assert open_frames([header, body, stamp, mac], SECRET) == payloads
    with pytest.raises(Unauthenticated):
        open_frames(batch_frames(payloads, b"another-secret-another-secret-00"), SECRET)
    with pytest.raises(Unauthenticated):  # an event dropped from a signed batch
        open_frames([header, _body(payloads[:1]), stamp, mac], SECRET)


def test_a_batch_that_is_not_right_is_refused_as_a_whole():
    payloads = [encode(event) for event in _phases(2)]
    body = _body(payloads)
    for broken in (body[:-1], body + b"\x00\x00", b"", body + b"\x00\x00\x00\x09abc",
                   _body([payloads[0], b"\x00not an event"])):
        with pytest.raises(ProtocolError):
            decode_frames([BATCH_HEADER, broken])
    assert open_frames([b"collviz/1.9 batch", body]) == payloads  # a newer minor's batch
    for other in (b"collviz/2.0 batch", b"collviz/1.x batch"):
        with pytest.raises(IncompatibleVersion, match=f"peer speaks {other[8:-6].decode()}"):
            open_frames([other, body])
    with pytest.raises(ProtocolError, match="not a collviz message"):
        open_frames([b"hello batch", body])


def test_an_unknown_event_in_a_batch_is_skipped_in_its_place(tmp_path):
    first, second, fourth = (Phase(run="r", rank=1, seq=seq, t_ns=0, index=0, name="x", edge="begin")
                             for seq in (0, 1, 3))
    future = msgspec.msgpack.encode(FutureEvent(run="r", rank=1, seq=2, t_ns=0, detail="new"))
    payloads = [encode(first), encode(second), future, encode(fourth)]
    decoded = decode_frames(batch_frames(payloads))
    assert [decoded[i] for i in (0, 1, 3)] == [(first, payloads[0]), (second, payloads[1]), (fourth, payloads[3])]
    unknown = decoded[2][0]
    assert isinstance(unknown, UnknownEventType) and (unknown.run, unknown.rank, unknown.seq) == ("r", 1, 2)
    collector = Collector("r", Endpoints.in_directory(str(tmp_path)), world_size=2)
    context = zmq.Context()
    worker = context.socket(zmq.PUSH)
    worker.setsockopt(zmq.LINGER, 2000)
    worker.connect(f"ipc://{tmp_path}/events")
    worker.send_multipart(batch_frames(payloads))
    received = []
    deadline = time.monotonic() + 30
    while len(received) < 3 and time.monotonic() < deadline:
        received += collector.receive(0.1)
    worker.close()
    context.term()
    collector.close()
    assert received == [(first, payloads[0]), (second, payloads[1]), (fourth, payloads[3])]
    assert collector.dropped == {"newer event type": 1}


def _raw_messages(socket: zmq.Socket, events: int) -> list[list[bytes]]:
    """Messages read from ``socket`` until they hold ``events`` events (or 30 s)."""
    messages: list[list[bytes]] = []
    deadline = time.monotonic() + 30
    while sum(len(open_frames(m)) for m in messages) < events and time.monotonic() < deadline:
        if socket.poll(100):
            messages.append(socket.recv_multipart())
    return messages


def test_an_emitters_events_arrive_unchanged_in_order_and_handed_over_together_in_one_message(tmp_path):
    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    pull.bind(f"ipc://{tmp_path}/events")
    emitter = EventEmitter(f"ipc://{tmp_path}/events", "r", 3)
    emitter.emit(Phase, t_ns=5, index=0, name="alone", edge="begin")
    emitter.flush()
    handed = [(Phase, {"t_ns": 100 + i, "index": i, "name": f"s{i}", "edge": "end"}) for i in range(1, 101)]
    emitter.emit_all(handed)
    emitter.emit(RunEnd, status="ok")
    emitter.close()
    messages = _raw_messages(pull, 102)
    pull.close()
    context.term()
    events = [event for message in messages for event, _ in decode_frames(message)]
    expected = [Phase(run="r", rank=3, seq=0, t_ns=5, index=0, name="alone", edge="begin")]
    expected += [Phase(run="r", rank=3, seq=i, t_ns=100 + i, index=i, name=f"s{i}", edge="end") for i in range(1, 101)]
    assert events[:101] == expected
    assert isinstance(events[101], RunEnd) and events[101].seq == 101
    assert messages[0][0] == ONE_HEADER  # flushed alone: one event, the layout every 1.x reader reads
    assert len(messages) <= 3 and len(open_frames(messages[1])) >= 100  # the hand-over: one message


def test_a_backlog_larger_than_a_message_goes_as_several_each_within_its_bound(tmp_path):
    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    pull.bind(f"ipc://{tmp_path}/events")
    emitter = EventEmitter(f"ipc://{tmp_path}/events", "r", 0, secret=SECRET)
    big = "x" * 400_000
    emitter.emit_all([(Phase, {"index": i, "name": big, "edge": "begin"}) for i in range(5)])
    emitter.close()
    messages = []
    deadline = time.monotonic() + 30
    while sum(len(open_frames(m, SECRET)) for m in messages) < 5 and time.monotonic() < deadline:
        if pull.poll(100):
            messages.append(pull.recv_multipart())
    pull.close()
    context.term()
    assert [len(open_frames(m, SECRET)) for m in messages] == [2, 2, 1]  # 2 × 400 kB fit in 1 MiB, 3 do not
    assert [event.index for m in messages for event, _ in decode_frames(m, SECRET)] == [0, 1, 2, 3, 4]


def test_the_sending_thread_collects_from_a_source_in_number_order_until_stopped(tmp_path):
    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    pull.bind(f"ipc://{tmp_path}/events")
    emitter = EventEmitter(f"ipc://{tmp_path}/events", "r", 1)
    calls: list[str] = []

    def source() -> list:
        calls.append(threading.current_thread().name)
        return [(Phase, {"index": len(calls), "name": "collected", "edge": "begin"})] if len(calls) <= 3 else []

    emitter.emit(Phase, index=0, name="before", edge="begin")
    emitter.collect_every(0.01, source)
    deadline = time.monotonic() + 30
    while len(calls) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    emitter.stop_collecting()
    stopped_at = len(calls)
    emitter.emit(Phase, index=9, name="after", edge="begin")
    time.sleep(0.05)
    emitter.close()
    messages = _raw_messages(pull, 5)
    pull.close()
    context.term()
    events = [event for message in messages for event, _ in decode_frames(message)]
    assert [(e.seq, e.index, e.name) for e in events] == [(0, 0, "before"), (1, 1, "collected"), (2, 2, "collected"),
                                                          (3, 3, "collected"), (4, 9, "after")]
    assert len(calls) == stopped_at >= 5 and set(calls) == {"collviz-emitter"}


def test_a_failing_source_is_dropped_and_everything_else_still_goes(tmp_path, capfd):
    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    pull.bind(f"ipc://{tmp_path}/events")
    emitter = EventEmitter(f"ipc://{tmp_path}/events", "r", 1)

    def broken() -> list:
        raise ValueError("a broken source")

    emitter.collect_every(0.01, broken)
    time.sleep(0.05)
    emitter.emit(RunEnd, status="ok")
    emitter.flush()
    emitter.close()
    [message] = _raw_messages(pull, 1)
    pull.close()
    context.term()
    assert [type(event) for event, _ in decode_frames(message)] == [RunEnd]
    assert capfd.readouterr().err.count("ValueError: a broken source") == 1
