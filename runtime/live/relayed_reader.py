"""A running job read through its per-host relays (``collviz attach --listen HOST:PORT``): the
viewer's end of :mod:`.relay`.

:class:`RelayedReader` holds, per rank and recorder, the entries its relay sent (each replaced by
its newer version as the relay sends one) and reads them as the attach reader reads worker
servers' answers (:func:`~.recorder_reader.tail_reading`): the same calls, waits and floors, so
the feed, the loop, the snapshot and the viewer stay as they are. Once a reading found a group's
calls complete on every rank read, the entries before them are dropped: what it holds is the
calls still in flight and the news. A rank is as its relay last said (with the host the relay
named); the ranks of a relay silent for three of its readings and the deadline are named as
not read. The first reading does not wait for every rank: it shows what has arrived, the rest of
the job joining as its relays report it (a 1,024-rank job's relays take minutes over their first
whole buffers under load; meanwhile the news of the ranks reported is read, and trimmed). The stacks of ranks others wait on are asked of the relays, each answering for its own.

The socket is the caller's (a :class:`Listener`): this module never imports ZeroMQ.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import msgspec

from ..sources.flight_recorder import device_of_backend
from ..sources.reading import collector_paused
from ..wire.relay_news import RankNews, RelayNews
from .reading import End, RankRead, Reading
from .recorder_reader import ENDED, attached_run_start, tail_reading
from .relay import EntryKey
from .tail import EntryPlace, Floors, Place, Trace, at_or_after, entry_key, place_of

__all__ = ["Listener", "RelayedReader"]

SILENT_READINGS = 3
"""A relay's readings missed (beyond the deadline) before its ranks are named as not read."""


class Listener(Protocol):
    """The viewer's socket to its relays (:class:`~collviz.runtime.wire.relay_link.RelayListener`)."""

    def receive(self, timeout_s: float) -> list[RelayNews]:
        """The news that arrived, waiting up to ``timeout_s`` for the first."""

    def ask_stacks(self, ranks: list[int]) -> None:
        """Ask every relay for the stacks of ``ranks``."""


@dataclass
class _Held:
    """One rank's recorder as its relay sent it: the header, and each entry by its place (with
    the fields that place it and its :func:`~.tail.entry_key`, None where it is not placed)."""

    header: dict[str, Any] = field(default_factory=dict)
    entries: dict[EntryKey, tuple[msgspec.Raw, Place | None, EntryPlace | None]] = field(default_factory=dict)

    def trace(self) -> Trace:
        """The recorder's trace, as if its worker server had answered it."""
        held = self.entries.values()
        return Trace(self.header.get("version", ""), self.header.get("pg_config", {}),
                     self.header.get("pg_status", {}), [raw for raw, _, _ in held], [place for _, place, _ in held],
                     [key for _, _, key in held])


@dataclass
class _Relay:
    """When a relay was last heard, how often it reads, and its ranks."""

    heard: float
    every_s: float
    ranks: set[int]


@dataclass
class RelayedReader:
    """Reads the job its relays report to ``listener`` (see the module): the first reading waits
    up to ``first_wait_s`` for the first news, then at most one of its relay's readings for the
    rest of the job, and shows what has arrived; a rank of the job no relay has reported yet is not
    yet read (in no call, neither waiting nor waited for) until ``first_wait_s`` after the first
    reading, then named as not read. ``whole_first``: the first reading waits up to
    ``first_wait_s`` for every rank instead, and names at once those still unreported (a
    snapshot's verdict covers the whole job). Stacks are waited for up to ``timeout_s``.
    ``from_first`` and ``floors`` as :class:`~.recorder_reader.RecorderReader`'s."""

    listener: Listener
    timeout_s: float = 2.0
    first_wait_s: float = 10.0
    whole_first: bool = False
    target: str = ""
    from_first: bool = True
    clock: Callable[[], float] = time.monotonic
    floors: Floors | None = None
    warnings: list[str] = field(default_factory=list)
    _held: dict[tuple[int, int], _Held] = field(default_factory=dict)
    _ranks: dict[int, RankNews] = field(default_factory=dict)
    _hosts: dict[int, str] = field(default_factory=dict)
    _relays: dict[str, _Relay] = field(default_factory=dict)
    _stacks: dict[int, str] = field(default_factory=dict)
    _paths: dict[int, tuple[str, Path]] = field(default_factory=dict)
    _size: int = 0
    """The job's ranks as the recorders' headers say (its largest group's members; 0: no header yet)."""
    _first_at: float | None = None
    """When the first reading was taken (None: not yet)."""

    def read(self) -> Reading:
        """What the relays said since the reading before, added to what they said earlier (the
        collector paused: a 1,024-rank reading makes ~12,000 calls and ~60,000 containers, none
        cyclic, and the collector's passes over them were a third of its CPU)."""
        with collector_paused():
            return self._read()

    def _read(self) -> Reading:
        self._take(self.listener.receive(0.0 if self._first_at is not None else min(self.first_wait_s, 0.05)))
        if self._first_at is None:
            self._first_news()
            self._first_at = self.clock()
        silent = self._silent()
        unread = {rank: RankRead(rank, error=why) for rank, why in self._unreported().items()}
        unread.update({rank: RankRead(rank, error=news.error or silent.get(rank, ""), slow=news.slow,
                                      host=self._hosts.get(rank, ""))
                       for rank, news in self._ranks.items() if news.error or rank in silent})
        traces: dict[int, list[Trace]] = {}
        for (rank, _), held in sorted(self._held.items()):
            if rank in self._ranks and rank not in unread:
                traces.setdefault(rank, []).append(held.trace())
        paths = {rank: self._path(rank) for rank in self._ranks}
        reading, floors = tail_reading(traces, unread, paths,
                                       self.floors if self.floors is not None else {} if self.from_first else None,
                                       self.warnings, self._hosts)
        if traces and not unread and self._whole():
            self.floors = floors
        self._drop_below(floors, traces)
        return reading

    def _path(self, rank: int) -> Path:
        """Where a rank's calls are said to come from (its host's name and its rank), made once."""
        host = self._hosts.get(rank, "relayed")
        found = self._paths.get(rank)
        if found is None or found[0] != host:
            found = self._paths[rank] = (host, Path(host) / f"rank{rank}")
        return found[1]

    def _take(self, arrived: Sequence[RelayNews]) -> None:
        """Hold what the news says (a rank's later news replacing its earlier)."""
        for news in arrived:
            relay = self._relays.setdefault(news.relay, _Relay(self.clock(), news.every_s, set()))
            relay.heard, relay.every_s = self.clock(), news.every_s
            self._stacks.update(news.stacks)
            for rank in news.ranks:
                relay.ranks.add(rank.rank)
                self._ranks[rank.rank] = rank
                self._hosts[rank.rank] = news.host
                for recorder in rank.recorders:
                    held = self._held.setdefault((rank.rank, recorder.recorder), _Held())
                    if recorder.header:
                        held.header = _header(recorder.header)
                        self._size = max([self._size] + [len(_members(config)) for config in
                                                         held.header.get("pg_config", {}).values()
                                                         if isinstance(config, dict)])
                    for raw in recorder.entries:
                        place = place_of(raw)
                        key = entry_key(place) if place is not None else None
                        held.entries[key if key is not None else (raw,)] = (msgspec.Raw(raw), place, key)

    def _first_news(self) -> None:
        """Wait up to ``first_wait_s`` for the first news, then up to one reading of its relay
        (each started relay has sent once by then) for every rank of the job."""
        deadline = self.clock() + self.first_wait_s
        while not self._relays and (left := deadline - self.clock()) > 0:
            self._take(self.listener.receive(min(left, 0.1)))
        if self._relays and not self.whole_first:
            deadline = min(deadline, self.clock() + max(relay.every_s for relay in self._relays.values()))
        while not self._whole() and (left := deadline - self.clock()) > 0:
            self._take(self.listener.receive(min(left, 0.1)))

    def _unreported(self) -> dict[int, str]:
        """rank → why it is not read, for the job's ranks no relay reported within ``first_wait_s``
        of the first reading (before then they are not yet read, and left out; with ``whole_first``,
        from the first reading, which waited that long for them)."""
        if self._first_at is None or (not self.whole_first and self.clock() - self._first_at < self.first_wait_s):
            return {}
        return {rank: f"no relay reported it within {self.first_wait_s:g} s" for rank in range(self._size)
                if rank not in self._ranks}

    def _whole(self) -> bool:
        """Whether every rank of the job (as a recorder's header says) is reported."""
        return self._size > 0 and len(self._ranks) >= self._size

    def _silent(self) -> dict[int, str]:
        """rank → why it is not read, for the ranks of each relay not heard for too long."""
        silent = {}
        for name, relay in self._relays.items():
            quiet = self.clock() - relay.heard
            if quiet > SILENT_READINGS * relay.every_s + self.timeout_s:
                silent.update({rank: f"its relay ({name}) sent nothing for {quiet:.0f} s" for rank in relay.ranks})
        return silent

    def _drop_below(self, floors: Floors, traces: dict[int, list[Trace]]) -> None:
        """Drop the entries of ranks read that lie before their group's floor, retired."""
        for (rank, _), held in self._held.items():
            if rank in traces:
                held.entries = {key: entry for key, entry in held.entries.items()
                                if (place := entry[1]) is None or not place.retired or (placed := entry[2]) is None
                                or at_or_after(placed, floors)}

    def stacks(self, ranks: Sequence[int]) -> dict[int, str]:
        """rank → its own line of code, as its relay read it (asked now, waited for ``timeout_s``)."""
        for rank in ranks:
            self._stacks.pop(rank, None)
        self.listener.ask_stacks(list(ranks))
        deadline = self.clock() + self.timeout_s
        while any(rank not in self._stacks for rank in ranks) and (left := deadline - self.clock()) > 0:
            self._take(self.listener.receive(min(left, 0.1)))
        return {rank: self._stacks.get(rank, f"(stack not read: its relay did not answer within {self.timeout_s:g} s)")
                for rank in ranks}

    def run_start(self, reading: Reading) -> dict[str, Any] | None:
        """The attached job's RunStart: its ranks, through how many relays."""
        count = len(self._relays)
        return attached_run_start(reading, max(self._ranks, default=0) + 1,
                                  f"{len(self._ranks)} ranks through {count} relay{'s' if count != 1 else ''}"
                                  + (f" at {self.target}" if self.target else ""))

    def rank_start(self, rank: int, reading: Reading) -> dict[str, Any]:
        """The rank's host, as its relay named it."""
        return dict(device=device_of_backend(reading.backend), backend=reading.backend, host=self._hosts.get(rank, ""), pid=0)

    def ended(self, reading: Reading) -> End | None:
        """Over once no rank answers."""
        return End("ok", ENDED) if reading.gone else None


def _header(raw: bytes) -> dict[str, Any]:
    decoded = msgspec.json.decode(raw)
    return decoded if isinstance(decoded, dict) else {}


def _members(config: dict) -> list:
    ranks = config.get("ranks", [])
    if isinstance(ranks, str):
        try:
            ranks = json.loads(ranks)
        except ValueError:
            return []
    return ranks if isinstance(ranks, list) else []
