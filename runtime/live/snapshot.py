"""One snapshot of a running job, like ``py-spy dump``: per rank the call it last completed and
the call it is in now, who waits on whom, and for each rank the others wait on, its Python stack
line; the exit status says whether every rank is in step.

A snapshot is made by the one live loop (:class:`~.loop.LiveLoop`, its events discarded): a wait
counts once the next reading shows the same ranks waiting in the same call
(:attr:`~.feed.Feed.confirmed`), so the job is read twice, ``interval_s`` apart, where the first
reading shows a wait (a call some ranks entered a moment before the others is in flight, not a
wait). Only the ranks others wait on are asked for their stacks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..observation.rank_lists import ranks_text
from ..wire.protocol import AnyEvent
from .feed import Feed
from .loop import LiveLoop, how_it_ended
from .pace import Pace
from .reading import End, Reader, Reading, call_text, waits_of
from .reading_cost import ReadingCost

__all__ = ["RankNow", "Snapshot", "Wait", "snapshot_of", "take_snapshot", "watch"]


@dataclass(frozen=True)
class RankNow:
    """One rank as read: the call it last completed and the call it is in (their text; empty
    when none), or why it could not be read; the host it runs on, where the source says."""

    rank: int
    done: str = ""
    inside: str = ""
    error: str = ""
    at: str | None = None
    """Where the rank is beyond its call, from its stack (:attr:`~.reading.Reading.places`); None:
    the reading holds calls completed instead."""
    host: str = ""


@dataclass(frozen=True)
class Wait:
    """Ranks waiting in one call for others: the call (as worded), who waits, who is missing, and
    where each missing rank's Python is (rank → stack line, empty where it could not be read)."""

    call: str
    waiting: tuple[int, ...]
    missing: tuple[int, ...]
    stacks: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Snapshot:
    """Every rank as read, and the waits both readings agree on."""

    ranks: list[RankNow]
    waits: list[Wait]

    @property
    def exit_status(self) -> int:
        """0 when every rank answered and none waits on another; else 1."""
        return 1 if self.waits or any(now.error for now in self.ranks) else 0

    def document(self) -> dict:
        """The snapshot as JSON-ready data (``collviz attach --json``): per rank its last completed
        call and the call it is in (null when none), the call it waits in and for whom, the call it
        is missing from and its stack line, or why it was not read; then every wait, the ranks
        others wait on (``missing``), the ranks not read and the exit status."""
        waiting = {rank: wait for wait in self.waits for rank in wait.waiting}
        missing = {rank: wait for wait in self.waits for rank in wait.missing}
        ranks = []
        for now in self.ranks:
            row: dict = {"rank": now.rank, **({"host": now.host} if now.host else {})}
            if now.error:
                ranks.append({**row, "error": now.error})
                continue
            waits_in, absent_from = waiting.get(now.rank), missing.get(now.rank)
            history = {"at": now.at or None} if now.at is not None else {"last_completed": now.done or None}
            ranks.append({**row, **history, "current": now.inside or None,
                          "waiting_in": waits_in.call if waits_in else None,
                          "waiting_for": list(waits_in.missing) if waits_in else [],
                          "missing_from": absent_from.call if absent_from else None,
                          "stack": (absent_from.stacks.get(now.rank) or None) if absent_from else None})
        return {"ranks": ranks,
                "waits": [{"call": w.call, "waiting": list(w.waiting), "missing": list(w.missing),
                           "stacks": {str(r): w.stacks.get(r) or None for r in w.missing}} for w in self.waits],
                "missing": sorted(missing), "not_read": [now.rank for now in self.ranks if now.error],
                "in_step": self.exit_status == 0, "exit_status": self.exit_status}

    def text(self) -> str:
        """The snapshot in lines: one per rank, then one per wait with each missing rank's stack."""
        lines = []
        for now in self.ranks:
            who = f"rank {now.rank}" + (f" on {now.host}" if now.host else "")
            if now.error:
                lines.append(f"{who}: not read: {now.error}")
                continue
            if now.at is not None:
                where = f"now in {now.inside}" if now.inside else "in no collective"
                lines.append(f"{who}: {where}" + (f", {'inside' if now.inside else 'at'} {now.at}" if now.at else ""))
                continue
            done = f"last completed {now.done}" if now.done else "no call completed"
            lines.append(f"{who}: {done}; " + (f"now in {now.inside}" if now.inside else "in no collective"))
        for wait in self.waits:
            plural = "s" if len(wait.missing) > 1 else ""
            lines.append(f"waiting: {wait.call}: rank{'s' if len(wait.waiting) > 1 else ''} {ranks_text(wait.waiting)} "
                         f"wait{'' if len(wait.waiting) > 1 else 's'} for rank{plural} {ranks_text(wait.missing)}")
            for rank in wait.missing:
                lines.append(f"  rank {rank} is missing from the call, at {wait.stacks.get(rank) or '(stack not read)'}")
        if not self.waits and not any(now.error for now in self.ranks):
            lines.append("every rank is in step")
        return "\n".join(lines)


class _Discard:
    """A feed's sink for a snapshot: its events are not wanted, only its confirmed waits."""

    def take(self, event: AnyEvent) -> None:
        """Drop the event."""

    def emit(self, event_type: type[AnyEvent], **fields: Any) -> None:
        """Drop the event."""


def snapshot_of(feed: Feed, reading: Reading) -> Snapshot:
    """The snapshot of ``reading``, its waits those ``feed`` confirmed (with their stacks)."""
    done: dict[int, str] = {}
    inside: dict[int, str] = {}  # the latest call each rank began and did not end (on any backend)
    for call in reading.calls:
        text = reading.call_texts.get(call.key) or call_text(call.op, call.group, call.group_seq)
        if call.completed:
            done[call.rank] = text
        else:
            inside[call.rank] = text
    places = reading.places if reading.places else None
    ranks = [RankNow(rank, error=read.error, host=read.host) if read.error else
             RankNow(rank, done.get(rank, ""), inside.get(rank, ""), host=read.host,
                     at=None if places is None else places.get(rank, ""))
             for rank, read in sorted(reading.ranks.items())]
    waits = [Wait(wait.text, wait.waiting, wait.missing, {r: feed.stacks_of(wait).get(r, "") for r in wait.missing})
             for wait in feed.confirmed.values()]
    return Snapshot(ranks, waits)


def _loop(reader: Reader, pace: Pace, cost: ReadingCost | None = None) -> LiveLoop:
    return LiveLoop(reader, Feed(_Discard(), "snapshot", reader, names_silent=False, grouped=True), pace, cost=cost)


def take_snapshot(reader: Reader, interval_s: float = 1.0, sleep: Callable[[float], None] = time.sleep) -> Snapshot:
    """Read every rank (twice when some wait, ``interval_s`` apart) and ask the ranks the others
    wait on for their stacks; the snapshot of the last reading."""
    loop = _loop(reader, Pace(interval_s, interval_s))
    reading = loop.step()
    if not _unconfirmed(loop.feed, reading):
        return snapshot_of(loop.feed, reading)
    sleep(interval_s)
    return snapshot_of(loop.feed, loop.step())


def _unconfirmed(feed: Feed, reading: Reading) -> bool:
    """Whether ``reading`` shows a wait the feed has not confirmed yet (the next reading may)."""
    return bool(set(waits_of(reading)) - set(feed.confirmed))


def watch(reader: Reader, show: Callable[[Snapshot, float], None], pace: Pace = Pace(), readings: int | None = None,
          sleep: Callable[[float], None] = time.sleep,
          cost: ReadingCost | None = None) -> tuple[Snapshot | None, Reading, End | None]:
    """Read every rank, paced by ``pace`` (held back by ``cost`` where it measures the ranks: its
    debt re-measured after each wait, a wait at most ``pace.slowest_s``), until ``readings``
    readings were taken (None: until interrupted) or the reader says the job ended; ``show`` each
    snapshot that differs from the one shown before, with the seconds until the next reading, as
    estimated then (a first reading that shows a wait that has lasted is not shown: the next,
    soon, confirms it or not). The last snapshot shown (None: none was), the last reading, and how
    the job ended (None: it has not; :func:`~.loop.how_it_ended`: ``failed`` where ranks were
    waiting at its end)."""
    loop = _loop(reader, pace, cost)
    shown: Snapshot | None = None
    taken = 0
    while True:
        reading = loop.step()
        taken += 1
        end = reader.ended(reading)
        if end is not None:
            return shown, reading, how_it_ended(end, loop.waiting)
        snapshot = snapshot_of(loop.feed, reading)
        if snapshot != shown and not (taken == 1 and loop.busy and _unconfirmed(loop.feed, reading)):
            shown = snapshot
            show(snapshot, loop.next_in())
        if readings is not None and taken >= readings:
            return shown, reading, None
        sleep(loop.interval)
        while (held := loop.held_s()) > 0:
            sleep(min(held, pace.slowest_s))
