"""A relay: one per host (``collviz attach --relay VIEWER:PORT TARGET``, started once per node),
reading its node's ranks' worker servers and sending the viewer only what changed.

Every ``every_s`` it asks each of its ranks for both Flight Recorders, as the attach reader does
(:func:`~.workers.ask_all`: bounded, in parallel), and passes on, per rank and recorder, only the
entries new or changed since it last sent them (a recorder's answer identical to the last one is
not even skimmed; the header only when it changed). The viewer holds what it was sent and reads
it as the job's recorders (:mod:`.relayed_reader`), so a rank's whole buffer crosses the network
once, and what follows is what its job did since. Every :data:`FULL_EVERY` readings a relay sends
all it holds again, so a viewer started after it has the whole picture within that many readings.
Between readings it answers the viewer's requests for the stacks of ranks it reads.

The socket is the caller's (a :class:`Link`): this module reads and never imports ZeroMQ.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import msgspec

from ..wire.relay_news import RankNews, RecorderNews, RelayNews
from .recorder_reader import RECORDERS, host_of, stack_lines
from .tail import Trace, decode_trace
from .workers import Answer, Worker, ask_all

__all__ = ["FULL_EVERY", "MESSAGE_BYTES", "Link", "NewsMaker", "relay_host", "run_relay", "split_news"]

FULL_EVERY = 60
"""Readings between two in which a relay sends everything it holds again."""

MESSAGE_BYTES = 4 << 20
"""The most entry bytes one message carries (a first reading of 128 ranks of 2,000 calls is about
128 MB: sent as many messages, far below the viewer's limit on one, 16 MB)."""

EntryKey = tuple[str, str, bool, int] | tuple[bytes]
"""An entry's place (group, backend, point-to-point, sequence number), or its raw JSON where its
fields are not the usual ones."""


class Link(Protocol):
    """The relay's socket to the viewer (:class:`~collviz.runtime.wire.relay_link.RelayLink`)."""

    def send(self, news: RelayNews) -> None:
        """Queue one reading's news for the viewer."""

    def requests(self, timeout_s: float) -> list[int]:
        """The ranks whose stacks the viewer asked for, waiting up to ``timeout_s`` for a request."""


def _header(trace: Trace) -> bytes:
    return msgspec.json.encode({"version": trace.version, "pg_config": trace.pg_config, "pg_status": trace.pg_status})


@dataclass
class NewsMaker:
    """What each reading adds to what was sent before (see the module)."""

    full_every: int = FULL_EVERY
    readings: int = 0
    _bodies: dict[tuple[int, int], int] = field(default_factory=dict)
    """(rank, recorder) → the hash of its last answer."""
    _headers: dict[tuple[int, int], int] = field(default_factory=dict)
    _entries: dict[tuple[int, int], dict[EntryKey, int]] = field(default_factory=dict)
    """(rank, recorder) → each entry sent, by place: the hash of its raw JSON."""

    def news(self, answers: Mapping[str, Mapping[int, Answer]], ranks: Sequence[int]) -> list[RankNews]:
        """Each of ``ranks`` as ``answers`` (handler → rank → answer) show it: why it could not be
        read, or its recorders' news."""
        if self.readings % self.full_every == 0:
            self._bodies.clear()
            self._headers.clear()
            self._entries.clear()
        self.readings += 1
        return [self._rank(rank, [answers[handler][rank] for handler in RECORDERS]) for rank in ranks]

    def _rank(self, rank: int, answers: Sequence[Answer]) -> RankNews:
        recorders = []
        for index, answer in enumerate(answers):
            if answer.body is None:
                if answer.status == 404 and index > 0:
                    continue  # NCCL's recorder, in a torch without NCCL
                return RankNews(rank=rank, error=answer.error, slow=answer.slow)
            digest = hash(answer.body)
            if self._bodies.get((rank, index)) == digest:
                continue
            trace = decode_trace(answer.body)
            if isinstance(trace, str):
                return RankNews(rank=rank, error=f"its {RECORDERS[index]} answer is {trace}")
            self._bodies[rank, index] = digest
            recorders.append(self._recorder(rank, index, trace))
        return RankNews(rank=rank, recorders=recorders)

    def _recorder(self, rank: int, index: int, trace: Trace) -> RecorderNews:
        header = _header(trace)
        sent = self._entries.get((rank, index), {})
        now: dict[EntryKey, int] = {}
        changed = []
        for raw, placed in zip(trace.entries, trace.keys):
            data = bytes(raw)
            key: EntryKey = placed if placed is not None else (data,)
            now[key] = hash(data)
            if sent.get(key) != now[key]:
                changed.append(data)
        self._entries[rank, index] = now
        fresh = self._headers.get((rank, index)) != hash(header)
        self._headers[rank, index] = hash(header)
        return RecorderNews(recorder=index, header=header if fresh else b"", entries=changed)


def _chunks(rank: RankNews, limit: int) -> list[RankNews]:
    """``rank``'s news as parts of at most ``limit`` entry bytes each (an entry never split; the
    header with the first part of its recorder)."""
    parts: list[RankNews] = []
    for recorder in rank.recorders:
        header, size = recorder.header, 0
        entries: list[bytes] = []
        for entry in recorder.entries:
            if entries and size + len(entry) > limit:
                parts.append(RankNews(rank=rank.rank, recorders=[RecorderNews(recorder=recorder.recorder,
                                                                              header=header, entries=entries)]))
                header, entries, size = b"", [], 0  # the header goes with the first part only
            entries.append(entry)
            size += len(entry)
        parts.append(RankNews(rank=rank.rank, recorders=[RecorderNews(recorder=recorder.recorder, header=header,
                                                                      entries=entries)]))
    return parts or [rank]


def split_news(news: RelayNews, limit: int = MESSAGE_BYTES) -> list[RelayNews]:
    """``news`` as messages of at most about ``limit`` entry bytes each, in order (the viewer
    applies each as it comes: a rank's entries may arrive in several)."""
    messages: list[RelayNews] = []
    ranks: list[RankNews] = []
    size = 0
    for part in (part for rank in news.ranks for part in _chunks(rank, limit)):
        bytes_ = sum(len(entry) for recorder in part.recorders for entry in recorder.entries)
        if ranks and size + bytes_ > limit:
            messages.append(msgspec.structs.replace(news, ranks=ranks))
            ranks, size = [], 0
        ranks.append(part)
        size += bytes_
    return [*messages, msgspec.structs.replace(news, ranks=ranks)]


def relay_host(workers: Sequence[Worker]) -> str:
    """The host the relay's ranks run on: their debug servers' host, else this one's name."""
    hosts = {host_of(worker) for worker in workers}
    return hosts.pop() if len(hosts) == 1 and "" not in hosts else socket.gethostname()


def run_relay(workers: Sequence[Worker], link: Link, every_s: float, timeout_s: float,
              readings: int | None = None, report: Callable[[RelayNews, float], None] | None = None) -> int:
    """Read ``workers`` every ``every_s`` and send the news through ``link``, answering stack
    requests between readings, until no rank answers (the job ended: 0) or ``readings`` were
    sent; ``report`` is shown each reading's news and the CPU seconds the relay spent on it
    (asking, skimming, sending). Ctrl-C ends it (KeyboardInterrupt)."""
    host = relay_host(workers)
    relay = f"{socket.gethostname()}:{os.getpid()}"
    maker = NewsMaker()
    ranks = sorted(worker.rank for worker in workers)
    mine = {worker.rank: worker for worker in workers}
    number = 0
    while readings is None or number < readings:
        due, cpu = time.monotonic() + every_s, time.process_time()
        answers = {handler: ask_all(workers, handler, timeout_s) for handler in RECORDERS}
        news = RelayNews(relay=relay, host=host, number=number, every_s=every_s, ranks=maker.news(answers, ranks))
        for part in split_news(news):
            link.send(part)
        if report is not None:
            report(news, time.process_time() - cpu)
        number += 1
        if all(rank.error for rank in news.ranks):
            return 0
        while (left := due - time.monotonic()) > 0:
            asked = [mine[rank] for rank in sorted(set(link.requests(left))) if rank in mine]
            if asked:
                link.send(RelayNews(relay=relay, host=host, number=number, every_s=every_s,
                                    stacks=stack_lines(ask_all(asked, "dump_traceback", timeout_s))))
    return 0
