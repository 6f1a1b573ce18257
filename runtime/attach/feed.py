"""An attached job as collviz events, reading after reading: what the live viewer, the recorder
and export read (through :class:`~collviz.runtime.sessions.attached.AttachedSession`).

Each reading (:func:`~.snapshot.read_once`) holds the tail of every rank's Flight Recorder as the
dump reader's events; :class:`Feed` passes on only what no earlier reading showed:

- ``RunStart`` once the job has issued a call (or when the session ends): the world size, the
  backend, and why the run has no values or durations (:data:`REASON`); ``RankStart`` for each
  rank the first time it answers.
- One viewer step per call, numbered in the order calls are first seen: per rank a ``Phase`` and
  ``Collective`` begin once the rank has issued the call, their ends once it completed it (op,
  group, sequence number, element type and count, bytes; a duration where the recorder kept one).
  Times are the recorder's own (when the call was issued), on the monotonic clock of collviz's own
  events; an untimed call ends when it began, as in an import.
- ``Stall`` for each wait a second reading confirms (once its waiters have waited ``stall_after_s``,
  where :meth:`Feed.take` is given one): the call, who waits and since when, who is missing, and
  the line of its own code each missing rank is at.
- ``RankEnd`` (``error``) for a rank whose server stops answering while others still answer,
  after two readings in a row (one may be a slow answer): named, never waited for again. A rank
  that never answered is named so too, unless the feed is ``patient`` (a launcher's job that is
  starting: its server may not be up yet).

A job collviz launched itself (``collviz run``: :class:`Launched`) has its launcher's RunStart and
RankEnd events instead (it follows the ranks' processes, so no rank is named by its silence), and
its RankStart events say each rank's process id, host and device.

A call's state is dropped once every member read (a rank with a server, not named) completed it
and the tail no longer holds it, so a long watch holds no more than the calls still in flight; a
later tail that starts earlier again (a reading some rank did not answer, a last reading from
dumps) shows no call up to the last dropped in its group again.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..observation.rank_lists import ranks_text
from ..wire.protocol import (
    NOT_RECORDED_OPTION,
    UNTIMED_OPTION,
    AnyEvent,
    Collective,
    Phase,
    RankEnd,
    RankStart,
    RunStart,
    Stall,
)
from .snapshot import Reading, Snapshot
from .tail import Floors
from .workers import Worker

__all__ = ["REASON", "UNTIMED", "NOT_RECORDED", "SILENT_READINGS", "Feed", "Launched", "Sink"]

REASON = "attached to a running job: Flight Recorder sizes and states, no values"
"""The RunStart's backend line for an attached job."""

UNTIMED = "an attached job's Flight Recorder records durations only on NCCL with TORCH_NCCL_ENABLE_TIMING=1"
"""Why an attached job's calls may have no duration (the RunStart's :data:`UNTIMED_OPTION`)."""

NOT_RECORDED = ("attached to a running job: its Flight Recorder holds each call's sizes and state, "
                "no values, provenance or transfers")
"""Why an attached job shows no values (the RunStart's :data:`NOT_RECORDED_OPTION`)."""

SILENT_READINGS = 2
"""Readings in a row a rank must not answer, while others do, before it is named."""

_Key = tuple[str, int, str]
"""A call: (group, sequence number, op)."""


class Sink(Protocol):
    """Where the feed's events go (the session's :class:`~collviz.runtime.sessions.intake.EventIntake`)."""

    def take(self, event: AnyEvent) -> None:
        """Take in an event stamped for one of the job's ranks."""

    def emit(self, event_type: type[AnyEvent], **fields: Any) -> None:
        """Take in an event of the session's own (rank ``LAUNCHER_RANK``), stamped by the sink."""


@dataclass(frozen=True)
class Launched:
    """What the launcher of the job knows (``collviz run``): each rank's process id (``pids``), the
    host, and the ranks' device where the plan knows it (empty: unknown)."""

    pids: Mapping[int, int]
    host: str
    device: str = ""


@dataclass
class _Call:
    """One call as shown so far: its step, its members, when each rank issued it (its own clock)
    and which ranks completed it."""

    index: int
    members: tuple[int, ...]
    issued: dict[int, int] = field(default_factory=dict)
    ended: set[int] = field(default_factory=set)


def _key(event: Collective) -> _Key:
    return event.group, event.group_seq, event.op


def _narration(event: Collective) -> str:
    out = f" → {event.bytes_out:,} B out" if event.bytes_out != event.bytes_in else ""
    return (f"{event.op} #{event.group_seq} on group {event.group} (ranks {ranks_text(event.group_ranks)}): "
            f"{event.dtype} ×{event.count:,}, {event.bytes_in:,} B in{out} on rank {event.rank}.\n"
            "Read live from the job's Flight Recorder: sizes and state, no values or provenance"
            + ("." if event.duration_ns else ", no duration."))


@dataclass
class Feed:
    """Turns each reading of ``workers`` into the events no reading before showed, into ``sink``;
    ``run`` is the run id of the ranks' events, ``target`` what the user attached to (for the
    description), ``patient`` see the module. :attr:`since` is where the next reading's tails start."""

    sink: Sink
    run: str
    workers: Sequence[Worker]
    target: str = ""
    patient: bool = False
    """Whether a rank that never answered is left unnamed (it may not have started yet)."""
    launched: Launched | None = None
    """The job's launcher, where collviz launched it: see the module."""
    since: Floors = field(default_factory=dict)
    """Each group's floor at the last reading every rank answered: calls from there on are read again."""
    started: bool = False
    """Whether the RunStart was emitted."""
    _clock_ns: int = field(default_factory=lambda: time.monotonic_ns() - time.time_ns())
    _seq: dict[int, int] = field(default_factory=dict)
    _calls: dict[_Key, _Call] = field(default_factory=dict)
    _done_up_to: dict[str, int] = field(default_factory=dict)
    """Per group, the last call dropped: it and those before it are never shown again."""
    _next_index: int = 0
    _answered: set[int] = field(default_factory=set)
    _silent: dict[int, int] = field(default_factory=dict)
    _named: set[int] = field(default_factory=set)
    _stalled: set[tuple[str, int]] = field(default_factory=set)
    _world: int = 0
    _backend: str = "unknown"

    def take(self, reading: Reading, snapshot: Snapshot | None, stall_after_s: float = 0.0) -> None:
        """Pass on what ``reading`` shows that no reading before did; ``snapshot``: its snapshot
        (its confirmed waits become Stall events, each once, once its waiters have waited
        ``stall_after_s``)."""
        start = next((e for e in reading.events if isinstance(e, RunStart)), None)
        if start is not None:
            self._world, self._backend = max(self._world, start.world_size), start.backend
        if not self.started and start is not None:
            self.begin(start.nccl_version)
        if self.started:
            self._new_ranks(reading)
            self._calls_of(reading)
            if snapshot is not None:
                self._stalls(reading, snapshot, stall_after_s)
        if self.launched is None:
            self._silences(reading)
        if all(not now.error for now in reading.ranks.values()):
            self.since = dict(reading.floors)

    def begin(self, nccl_version: str = "") -> None:
        """Emit the RunStart (once): at the first call seen, or as the session ends without one
        (a launched job's RunStart is its launcher's: the feed only starts)."""
        if self.started:
            return
        self.started = True
        if self.launched is not None:
            return
        world = max(self._world, max((w.rank for w in self.workers), default=-1) + 1)
        count = len(self.workers)
        self.sink.emit(RunStart, scenario="attach", world_size=world, backend=self._backend,
                       device_kind="cuda" if self._backend == "nccl" else "cpu", backend_reason=REASON, mode="live",
                       options={UNTIMED_OPTION: UNTIMED, NOT_RECORDED_OPTION: NOT_RECORDED},
                       description=(f"Attached to a running job ({count} worker server{'s' if count > 1 else ''}"
                                    + (f" at {self.target}" if self.target else "") + "): each rank's Flight "
                                    "Recorder read live, one step per collective call as the ranks issue and "
                                    "complete it; where ranks wait for others, the line of code the missing ranks "
                                    "are at. Sizes and states only: no values."),
                       torch_version="not recorded", nccl_version=nccl_version)

    def stamp(self, event_type: type[Any], rank: int, t_ns: int, **fields: Any) -> None:
        """Pass on an event of ``rank`` (its next sequence number: a launcher's RankEnd included)."""
        seq = self._seq.get(rank, 0)
        self._seq[rank] = seq + 1
        self.sink.take(event_type(run=self.run, rank=rank, seq=seq, t_ns=t_ns, **fields))

    def _new_ranks(self, reading: Reading) -> None:
        for rank, now in sorted(reading.ranks.items()):
            if not now.error and rank not in self._answered and rank not in self._named:
                self._answered.add(rank)
                launched = self.launched or Launched({}, "")
                self.stamp(RankStart, rank, time.monotonic_ns(), device=launched.device or "device unknown",
                           backend=self._backend, host=launched.host, pid=launched.pids.get(rank, 0))

    def _calls_of(self, reading: Reading) -> None:
        """Each rank's calls newly issued or completed, as step events; then drop what is done."""
        seen: set[_Key] = set()
        for event in reading.events:
            if not isinstance(event, Collective) or event.rank in self._named:
                continue
            key = _key(event)
            if event.group_seq <= self._done_up_to.get(event.group, 0):
                continue  # a call already shown and dropped, in a reading whose tail starts earlier
            seen.add(key)
            call = self._calls.get(key)
            if call is None:
                call = self._calls[key] = _Call(self._next_index, tuple(event.group_ranks))
                self._next_index += 1
            name = f"{event.op} #{event.group_seq} on group {event.group}"
            at = event.t_ns + self._clock_ns
            fields = {kept: getattr(event, kept) for kept in _COLLECTIVE_FIELDS}
            if event.edge == "begin" and event.rank not in call.issued:
                call.issued[event.rank] = event.t_ns
                self.stamp(Phase, event.rank, at, index=call.index, name=name, edge="begin",
                            narration=_narration(event))
                self.stamp(Collective, event.rank, at, phase=call.index, edge="begin", **fields)
            elif event.edge == "end" and event.rank in call.issued and event.rank not in call.ended:
                call.ended.add(event.rank)
                self.stamp(Collective, event.rank, at, phase=call.index, edge="end", **fields)
                self.stamp(Phase, event.rank, at, index=call.index, name=name, edge="end")
        read = {worker.rank for worker in self.workers} - self._named
        for key in [k for k, call in self._calls.items() if k not in seen and call.ended >= read.intersection(call.members)]:
            del self._calls[key]
            self._done_up_to[key[0]] = max(self._done_up_to.get(key[0], 0), key[1])

    def _stalls(self, reading: Reading, snapshot: Snapshot, after_s: float) -> None:
        """A Stall for each wait ``snapshot`` confirms, waited ``after_s`` at least, that none was
        emitted for yet."""
        places = {wait.call: place for place, wait in reading.waits.items()}
        for wait in snapshot.waits:
            place = places.get(wait.call)
            found = next(((key, call) for key, call in self._calls.items() if key[:2] == place), None)
            if place is None or found is None or place in self._stalled:
                continue
            (_, _, op), call = found
            issued = [call.issued[rank] for rank in wait.waiting if rank in call.issued]
            waited_s = max(0.0, (time.time_ns() - min(issued)) / 1e9) if issued else 0.0
            if waited_s < after_s:
                continue
            self._stalled.add(place)
            elsewhere = [f"rank {rank} is missing from the call, at {wait.stacks.get(rank) or '(stack not read)'}"
                         for rank in wait.missing]
            plural = len(wait.waiting) > 1
            text = (f"{wait.call}: rank{'s' if plural else ''} {ranks_text(wait.waiting)} waiting {waited_s:.0f} s; "
                    + "; ".join(elsewhere))
            self.sink.emit(Stall, group=place[0], group_seq=place[1], op=op, waiting=list(wait.waiting),
                           elsewhere=elsewhere, waited_s=waited_s, text=text)

    def _silences(self, reading: Reading) -> None:
        """Name each rank that did not answer :data:`SILENT_READINGS` readings in a row while others did."""
        if all(now.error for now in reading.ranks.values()):
            return  # the job has ended (or every server is gone): the session's end, not a rank's
        for rank, now in sorted(reading.ranks.items()):
            if not now.error:
                self._silent.pop(rank, None)
                continue
            self._silent[rank] = self._silent.get(rank, 0) + 1
            unstarted = rank not in self._answered
            if (self._silent[rank] >= SILENT_READINGS and rank not in self._named and self.started
                    and not (unstarted and self.patient)):
                self._named.add(rank)
                what = "never answered" if unstarted else "stopped answering"
                self.stamp(RankEnd, rank, time.monotonic_ns(), status="error",
                            error=f"its worker server {what} ({now.error}): ended or stuck; no longer read")


_COLLECTIVE_FIELDS = ("op", "group", "group_ranks", "group_seq", "dtype", "count", "bytes_in", "bytes_out",
                      "algo_bytes", "root", "duration_ns")
"""The fields of the reader's Collective events passed on as they are."""
