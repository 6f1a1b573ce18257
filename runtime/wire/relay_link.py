"""The sockets between per-host relays and the viewer that listens for them.

The viewer (:class:`RelayListener`) binds ``HOST:PORT`` and ``PORT+1``, as ``collviz view
--listen`` does: relays ``PUSH`` their news to the first (the viewer ``PULL``s, its queue bounded,
oversized messages refused by ZeroMQ before they are held), and the viewer ``PUB``lishes its
stack requests on the second, to which every relay (:class:`RelayLink`) subscribes. Every message
both ways is signed with the shared secret (:mod:`.relay_news`); what is not signed right, or was
signed before the listener began, is dropped and counted, never read.
"""

from __future__ import annotations

import collections
import time

import zmq

from .frames import Stale, Unauthenticated
from .protocol import ProtocolError
from .relay_news import RelayNews, StackRequest, news_frames, news_of, request_frames, request_of
from .transport import EXPOSED_RCVHWM, MAX_MESSAGE_BYTES, Endpoints

__all__ = ["RelayLink", "RelayListener"]

_SEND_LINGER_MS = 2_000
_DRAIN = 10_000
"""The most messages one :meth:`RelayListener.receive` takes."""


class RelayListener:
    """The viewer's end: news in, stack requests out (see the module)."""

    def __init__(self, host: str, port: int, secret: bytes) -> None:
        self._secret = secret
        self._start_ns = time.time_ns()
        self.dropped: collections.Counter[str] = collections.Counter()
        self.received_bytes = 0
        """The bytes of every message received (what the relays cost the network)."""
        endpoints = Endpoints.tcp(host, port)
        self._context = zmq.Context()
        self._news = self._context.socket(zmq.PULL)
        self._news.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        self._news.setsockopt(zmq.RCVHWM, EXPOSED_RCVHWM)
        self._requests = self._context.socket(zmq.PUB)
        for sock in (self._news, self._requests):
            sock.setsockopt(zmq.IPV6, 1)
            sock.setsockopt(zmq.LINGER, 0)
        try:
            self._news.bind(endpoints.events)
            self._requests.bind(endpoints.control)
        except zmq.ZMQError:
            self.close()
            raise

    def receive(self, timeout_s: float) -> list[RelayNews]:
        """The news that arrived, waiting up to ``timeout_s`` for the first."""
        received: list[RelayNews] = []
        if not self._news.poll(int(timeout_s * 1000)):
            return received
        for _ in range(_DRAIN):
            try:
                frames = self._news.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            self.received_bytes += sum(map(len, frames))
            try:
                received.append(news_of(frames, self._secret, self._start_ns))
            except Stale:
                self.dropped["signed for another session"] += 1
            except Unauthenticated:
                self.dropped["unauthenticated"] += 1
            except ProtocolError:
                self.dropped["malformed"] += 1
        return received

    def ask_stacks(self, ranks: list[int]) -> None:
        """Ask every relay for the stacks of ``ranks`` (the answers come as news)."""
        self._requests.send_multipart(request_frames(StackRequest(ranks=ranks), self._secret))

    def close(self) -> None:
        """Close the sockets, then the context."""
        self._news.close()
        self._requests.close()
        self._context.term()


class RelayLink:
    """A relay's end: connects to the viewer listening at ``host:port`` (news out, requests in)."""

    def __init__(self, host: str, port: int, secret: bytes) -> None:
        self._secret = secret
        self._start_ns = time.time_ns()
        endpoints = Endpoints.tcp(host, port)
        self._context = zmq.Context()
        self._news = self._context.socket(zmq.PUSH)
        self._news.setsockopt(zmq.LINGER, _SEND_LINGER_MS)
        self._news.setsockopt(zmq.SNDHWM, 100)
        self._requests = self._context.socket(zmq.SUB)
        self._requests.setsockopt(zmq.LINGER, 0)
        self._requests.setsockopt(zmq.SUBSCRIBE, b"")
        for sock in (self._news, self._requests):
            sock.setsockopt(zmq.IPV6, 1)
        self._news.connect(endpoints.events)
        self._requests.connect(endpoints.control)

    def send(self, news: RelayNews) -> None:
        """Queue ``news`` for the viewer (sent in the background; held while it is not there)."""
        self._news.send_multipart(news_frames(news, self._secret))

    def requests(self, timeout_s: float) -> list[int]:
        """The ranks whose stacks the viewer asked for, waiting up to ``timeout_s`` for a request;
        requests not signed right are ignored."""
        ranks: list[int] = []
        if not self._requests.poll(int(max(0.0, timeout_s) * 1000)):
            return ranks
        while True:
            try:
                frames = self._requests.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return ranks
            try:
                ranks += request_of(frames, self._secret, self._start_ns).ranks
            except ProtocolError:
                continue

    def close(self) -> None:
        """Send what is queued (for up to two seconds), then close."""
        self._news.close()
        self._requests.close()
        self._context.term()
