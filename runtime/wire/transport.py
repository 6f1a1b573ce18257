"""ZeroMQ plumbing between workers and the launching process.

Two channels, both bound by the launcher (the collector) and connected by workers:

* **events** — workers ``PUSH``, the collector ``PULL``s. PUSH queues until connected, so nothing
  is lost to a handshake. Emitting puts the event on an in-process queue; a background thread
  encodes and sends it, so a slow reader never stalls a rank's main thread. The thread sends
  everything queued when it wakes as one message (:func:`.frames.batch_frames`): under a flood,
  or when a caller hands over many events at once (:meth:`EventEmitter.emit_all`), one ZeroMQ
  message and one thread wake carry many events; a caller that batches may instead have the
  sending thread collect from it every so often (:meth:`EventEmitter.collect_every`), so that
  handing over costs it no thread of its own. A bounded queue that overflows drops and counts
  (reported in ``RankEnd.dropped``), never silently.
* **control** — workers ``DEALER``, the collector ``ROUTER``: a worker at a gate sends ``wait k``
  and blocks until the launcher answers ``go`` (step mode) or ``abort``.
"""

from __future__ import annotations

import collections
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import zmq

from .frames import (
    GateMessage,
    Stale,
    Unauthenticated,
    batch_frames,
    decode_control,
    decode_frames,
    encode_control,
)
from .protocol import (
    LAUNCHER_RANK,
    MAX_FRAME_BYTES,
    AnyEvent,
    Event,
    IncompatibleVersion,
    ProtocolError,
    UnknownEventType,
    encode,
)

__all__ = ["Endpoints", "Source", "EventEmitter", "GateClient", "GateAborted", "Collector", "LauncherEmitter"]

_SEND_LINGER_MS = 10_000

_RECONNECT_MS = 5
"""How soon a worker's socket retries a connect that found no launcher yet (see EventEmitter)."""
_QUEUE_LIMIT = 1_000_000
_BATCH_BYTES = 1 << 20
"""The most one message's events may hold (payload bytes), far below the protocol's frame limit:
a larger backlog goes out as several messages."""
_EventT = TypeVar("_EventT", bound=Event)


@dataclass(frozen=True)
class Endpoints:
    """Where the collector listens: the event and control channel addresses."""

    events: str
    control: str

    @classmethod
    def in_directory(cls, directory: str) -> Endpoints:
        """Private IPC sockets inside ``directory`` (loopback-only by construction)."""
        return cls(events=f"ipc://{directory}/events", control=f"ipc://{directory}/control")

    @classmethod
    def tcp(cls, host: str, port: int) -> Endpoints:
        """Events on ``host:port``, control on the next port (remote workers under torchrun); an
        IPv6 address is bracketed as ZeroMQ expects (``tcp://[::1]:5555``)."""
        host = f"[{host}]" if ":" in host else host
        return cls(events=f"tcp://{host}:{port}", control=f"tcp://{host}:{port + 1}")


Source = Callable[[], list[tuple[type[Event], dict]]]
"""What an emitter's sending thread calls to collect events: ``(event_type, fields)`` pairs, as
:meth:`EventEmitter.emit_all` takes them."""


class EventEmitter:
    """A worker's event sender: stamps run/rank/seq/t_ns, queues, and sends in the background.

    Events are numbered and queued under one lock, so the queue is in number order whichever
    thread emits; the sending thread takes everything queued at once and is woken only when it
    waits. It also collects, every so often, from a :data:`Source` (see :meth:`collect_every`):
    a caller that batches its events needs no thread of its own to hand them over.
    """

    def __init__(self, endpoint: str, run: str, rank: int, queue_limit: int = _QUEUE_LIMIT,
                 secret: bytes | None = None) -> None:
        self.run = run
        self._secret = secret
        self.rank = rank
        self.dropped = 0
        self._seq = 0
        self._queue_limit = queue_limit
        self._ready = threading.Condition()
        """Guards the numbering, the queue and the sending thread's state below."""
        self._queued: list[Event] = []
        self._sending = False
        """The thread holds events taken from the queue and not yet handed to ZeroMQ."""
        self._idle = False
        """The thread waits on ``_ready`` (set under it, before it waits)."""
        self._stopping = False
        self._collecting = threading.Lock()
        """Held while the source is called and its events queued (so :meth:`stop_collecting`
        returns after a collection under way)."""
        self._source: Source | None = None
        self._source_every_s = 0.0
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.PUSH)
        self._socket.setsockopt(zmq.LINGER, _SEND_LINGER_MS)
        self._socket.setsockopt(zmq.SNDHWM, 100_000)
        self._socket.setsockopt(zmq.IPV6, 1)
        # Workers are forked before the launcher binds, so a first connect may find no one there;
        # ZeroMQ then retries after RECONNECT_IVL, and closing waits for that timer (100 ms by
        # default: every rank's exit took 130 ms longer). Retry soon instead.
        self._socket.setsockopt(zmq.RECONNECT_IVL, _RECONNECT_MS)
        self._socket.connect(endpoint)
        self._thread = threading.Thread(target=self._send_loop, name="collviz-emitter", daemon=True)
        self._thread.start()

    def emit(self, event_type: type[Event], t_ns: int | None = None, **fields) -> None:
        """Create an event of ``event_type`` with ``fields`` and queue it for sending.

        ``t_ns`` defaults to now; pass the monotonic time something happened to report it later
        (timed loops do, so that nothing is sent while they run).
        """
        with self._ready:
            event = self._stamped(event_type, t_ns, fields)
            if len(self._queued) >= self._queue_limit:
                self.dropped += 1
                return
            self._queued.append(event)
            if self._idle:
                self._ready.notify()

    def emit_all(self, events: Iterable[tuple[type[Event], dict]]) -> None:
        """Create and queue several events at once, in order, each ``(event_type, fields)`` as
        :meth:`emit` takes them (``t_ns`` among the fields, or now; the dicts are taken over, not
        copied): one wake of the sending thread for all of them."""
        with self._ready:
            made = [self._stamped(event_type, fields.pop("t_ns", None), fields) for event_type, fields in events]
            if len(self._queued) >= self._queue_limit:
                self.dropped += len(made)
                return
            self._queued += made
            if made and self._idle:
                self._ready.notify()

    def collect_every(self, interval_s: float, source: Source) -> None:
        """From now until :meth:`stop_collecting`, the sending thread calls ``source`` every
        ``interval_s`` seconds and sends the events it returns (first at once)."""
        with self._collecting:
            self._source, self._source_every_s = source, interval_s
        with self._ready:
            self._ready.notify()  # it may be waiting with no time limit: it must time itself now

    def stop_collecting(self) -> None:
        """Call the source no more; returns once a collection under way has queued its events."""
        with self._collecting:
            self._source = None

    def _stamped(self, event_type: type[Event], t_ns: int | None, fields: dict) -> Event:
        """An event of ``event_type`` with ``fields``, this worker's run and rank, the next number
        and ``t_ns`` (now if None); the caller holds ``_ready``."""
        stamp = time.monotonic_ns() if t_ns is None else t_ns
        event = event_type(run=self.run, rank=self.rank, seq=self._seq, t_ns=stamp, **fields)
        self._seq += 1
        return event

    def flush(self) -> None:
        """Block until every queued event has been handed to ZeroMQ."""
        with self._ready:
            while self._queued or self._sending:
                self._ready.wait()

    def close(self, timeout_s: float = 10.0) -> None:
        """Send what is queued (waiting up to ``timeout_s``), then close the socket and context."""
        self.stop_collecting()
        with self._ready:
            self._stopping = True
            self._ready.notify()
        self._thread.join(timeout_s)
        self._socket.close(linger=int(timeout_s * 1000))
        self._context.term()

    def _send_loop(self) -> None:
        """Collect when it is time, wait for events (or the next collection), then send all that
        is queued, in order; until :meth:`close`."""
        next_collection = 0.0
        while True:
            if self._source is not None and time.monotonic() >= next_collection:
                self._collect()
                next_collection = time.monotonic() + self._source_every_s
            with self._ready:
                if not self._queued and not self._stopping:
                    self._idle = True
                    self._ready.wait(None if self._source is None else max(0.0, next_collection - time.monotonic()))
                    self._idle = False
                taken, self._queued = self._queued, []
                self._sending, stopping = True, self._stopping
            try:
                self._send(taken)
            finally:
                with self._ready:
                    self._sending = False
                    self._ready.notify_all()  # flush() may wait
            if stopping:
                return

    def _collect(self) -> None:
        """Queue the source's events. A source that fails is called no more (its error is
        printed), so that everything else is still sent."""
        with self._collecting:
            if self._source is None:
                return
            try:
                events = self._source()
            except Exception:
                self._source = None
                traceback.print_exc()
                return
            self.emit_all(events)

    def _send(self, events: list[Event]) -> None:
        """Encode ``events`` and send them in as few messages as :data:`_BATCH_BYTES` allows."""
        payloads: list[bytes] = []
        size = 0
        for event in events:
            payload = encode(event)
            if payloads and size + len(payload) > _BATCH_BYTES:
                self._socket.send_multipart(batch_frames(payloads, self._secret))
                payloads, size = [], 0
            payloads.append(payload)
            size += len(payload)
        if payloads:
            self._socket.send_multipart(batch_frames(payloads, self._secret))


class GateAborted(RuntimeError):
    """The launcher ended the run while this worker waited at a gate."""


class GateClient:
    """A worker's side of the control channel."""

    def __init__(self, endpoint: str, run: str, rank: int) -> None:
        self.run = run
        self.rank = rank
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 1000)
        self._socket.setsockopt(zmq.IDENTITY, f"rank{rank}".encode())
        self._socket.setsockopt(zmq.RECONNECT_IVL, _RECONNECT_MS)  # as EventEmitter's: no 100 ms wait at close
        self._socket.connect(endpoint)
        self._released = -1

    def wait(self, index: int) -> None:
        """Block until the launcher releases gate ``index``; raise GateAborted if it aborts."""
        if index <= self._released:
            return
        self._socket.send(encode_control(GateMessage(kind="wait", run=self.run, rank=self.rank, index=index)))
        while index > self._released:
            reply = decode_control(self._socket.recv())
            if reply.kind == "abort":
                raise GateAborted(f"run ended while rank {self.rank} waited at gate {index}")
            self._released = max(self._released, reply.index)

    def close(self) -> None:
        """Close the socket and its context."""
        self._socket.close()
        self._context.term()


class LauncherEmitter:
    """Stamps the launcher's own events (rank −1) with run, seq and time."""

    def __init__(self, run: str) -> None:
        self.run = run
        self._seq = 0

    def make(self, event_type: type[_EventT], **fields) -> tuple[_EventT, bytes]:
        """A launcher event and its encoded payload."""
        event = event_type(run=self.run, rank=LAUNCHER_RANK, seq=self._seq, t_ns=time.monotonic_ns(), **fields)
        self._seq += 1
        return event, encode(event)


@dataclass
class _GateBook:
    released: int = -1
    waiting: dict[bytes, int] = field(default_factory=dict)


EXPOSED_RCVHWM = 10_000
"""Messages an exposed events socket queues before ZeroMQ stops reading from its peers."""

MAX_MESSAGE_BYTES = MAX_FRAME_BYTES + 4096
"""ZeroMQ's own limit on an inbound message part: a larger one disconnects its sender before it is
held in memory (the protocol's frame limit, plus room for the header frame)."""


def _limit_inbound(socket: zmq.Socket, exposed: bool) -> None:
    """Before bind. Exposed: ZeroMQ disconnects a peer sending an oversized part before holding it
    (not counted: ZeroMQ does not say why it dropped a peer), and the receive queue is bounded.
    The launcher's own private socket keeps an unbounded queue (its workers' events are never
    dropped) and counts oversized frames after receiving them. Both accept IPv6 peers and close
    without lingering."""
    if exposed:
        socket.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
    socket.setsockopt(zmq.RCVHWM, EXPOSED_RCVHWM if exposed else 0)
    socket.setsockopt(zmq.IPV6, 1)
    socket.setsockopt(zmq.LINGER, 0)


class Collector:
    """The launcher's receiving end: validates frames, counts what it refuses, runs the gates.

    Not thread-safe: call it from one thread. ``request_release`` is the one method other threads
    may call; the release happens on the next ``receive``.
    """

    BATCH = 10_000

    def __init__(self, run: str | None, endpoints: Endpoints, world_size: int | None,
                 secret: bytes | None = None, *, exposed: bool = False) -> None:
        """``exposed``: the events socket accepts peers other than the launcher's own workers (a
        listening viewer): its receive queue is bounded, frames signed for an earlier session are
        refused, and no control socket is opened (remote runs have no gates)."""
        self.run = run
        self.world_size = world_size
        self._secret = secret
        self._session_start_ns = time.time_ns() if exposed else None
        self.dropped: collections.Counter[str] = collections.Counter()
        self._next_seq: dict[int, int] = {}
        self._context = zmq.Context()
        self._events = self._context.socket(zmq.PULL)
        _limit_inbound(self._events, exposed)
        self._events.bind(endpoints.events)
        self._poller = zmq.Poller()
        self._poller.register(self._events, zmq.POLLIN)
        self._control: zmq.Socket | None = None
        if not exposed:
            self._control = self._context.socket(zmq.ROUTER)
            _limit_inbound(self._control, exposed)
            self._control.bind(endpoints.control)
            self._poller.register(self._control, zmq.POLLIN)
        self._gates = _GateBook()
        self._release_requests: collections.deque[int] = collections.deque()
        self.on_release: Callable[[int], None] | None = None

    def receive(self, timeout_s: float) -> list[tuple[AnyEvent, bytes]]:
        """Valid events that arrived (waiting up to ``timeout_s`` for the first), with payloads."""
        self._apply_release_requests()
        ready = dict(self._poller.poll(int(timeout_s * 1000)))
        if self._control is not None and self._control in ready:
            self._serve_control(self._control)
        received: list[tuple[AnyEvent, bytes]] = []
        if self._events in ready:
            for _ in range(self.BATCH):
                try:
                    frames = self._events.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                received.extend(self._accept(frames))
        return received

    def _accept(self, frames: list[bytes]) -> list[tuple[AnyEvent, bytes]]:
        """The events of one message that belong here, in order; counts what is refused (a
        message that is not right, as a whole)."""
        try:
            decoded = decode_frames(frames, self._secret, self._session_start_ns)
        except Stale:
            self.dropped["signed for another session"] += 1
            return []
        except Unauthenticated:
            self.dropped["unauthenticated"] += 1
            return []
        except IncompatibleVersion:
            self.dropped["version"] += 1
            return []
        except ProtocolError:
            self.dropped["malformed"] += 1
            return []
        accepted = []
        for event, payload in decoded:
            if isinstance(event, UnknownEventType):  # a newer minor version's event: skip it, keep its place
                if self._in_sequence(event.run, event.rank, event.seq):
                    self.dropped["newer event type"] += 1
            elif self._in_sequence(event.run, event.rank, event.seq):
                accepted.append((event, payload))
        return accepted

    def _in_sequence(self, run: str, rank: int, seq: int) -> bool:
        """Whether an event of ``run`` from ``rank`` numbered ``seq`` belongs here and is new;
        counts what does not, and sequence gaps, in ``dropped``."""
        if self.run is None:  # a remote viewer adopts the run of the first signed event
            self.run = run
        if run != self.run:
            self.dropped["foreign run"] += 1
            return False
        if rank < 0 or (self.world_size is not None and rank >= self.world_size):
            self.dropped["unknown rank"] += 1
            return False
        expected = self._next_seq.get(rank, 0)
        if seq < expected:
            self.dropped["duplicate"] += 1
            return False
        if seq > expected:
            self.dropped["lost (sequence gap)"] += seq - expected
        self._next_seq[rank] = seq + 1
        return True

    def request_release(self, index: int) -> None:
        """Thread-safe: release every rank waiting at a gate ≤ ``index`` on the next receive."""
        self._release_requests.append(index)

    def _apply_release_requests(self) -> None:
        while self._release_requests:
            index = self._release_requests.popleft()
            if index > self._gates.released:
                self._gates.released = index
                if self.on_release is not None:
                    self.on_release(index)
            for identity, waiting in list(self._gates.waiting.items()):
                if waiting <= self._gates.released:
                    self._reply(identity, "go", self._gates.released)
                    del self._gates.waiting[identity]

    def _serve_control(self, control: zmq.Socket) -> None:
        while True:
            try:
                identity, payload = control.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            except ValueError:
                self.dropped["malformed"] += 1
                continue
            try:
                message = decode_control(payload)
            except ProtocolError:
                self.dropped["malformed"] += 1
                continue
            if message.run != self.run or message.kind != "wait":
                self.dropped["foreign run"] += 1
                continue
            if message.index <= self._gates.released:
                self._reply(identity, "go", self._gates.released)
            else:
                self._gates.waiting[identity] = message.index

    def _reply(self, identity: bytes, kind: Literal["go", "abort"], index: int) -> None:
        control, run = self._control, self.run
        if control is None or run is None:
            return  # no rank waits: gates need the control socket and a run (an exposed collector has neither)
        message = GateMessage(kind=kind, run=run, rank=LAUNCHER_RANK, index=index)
        try:
            control.send_multipart([identity, encode_control(message)], zmq.NOBLOCK)
        except zmq.ZMQError:
            self.dropped["control reply failed"] += 1

    def abort_gates(self) -> None:
        """Tell every rank waiting at a gate that the run is over."""
        for identity in list(self._gates.waiting):
            self._reply(identity, "abort", -1)
        self._gates.waiting.clear()

    @property
    def waiting_ranks(self) -> dict[int, int]:
        """rank → gate index, for the ranks now held at a gate."""
        return {int(identity.decode()[4:]): index for identity, index in self._gates.waiting.items()}

    def close(self) -> None:
        """Close the sockets, then the context."""
        self._events.close()
        if self._control is not None:
            self._control.close()
        self._context.term()

