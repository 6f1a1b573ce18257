"""Watching a running job (``collviz attach --watch``): every rank read again and again, at a pace
that costs the job little. Each reading costs every rank the building of its whole Flight Recorder
answer (torch 2.13 cannot send less; ``benchmarks/attach_cost.py`` measures it), so the pace
adapts: the fastest interval while something changes or some ranks wait, then twice as long after
each reading that found nothing new, up to the slowest. A wait is confirmed by the next reading
(the same ranks waiting in the same call), as :func:`~.snapshot.take_snapshot` does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .snapshot import Ask, Reading, Snapshot, SnapshotOptions, confirm, read_once
from .tail import Floors
from .workers import Worker, ask_all

__all__ = ["Pace", "Watcher", "gone", "watch"]


@dataclass(frozen=True)
class Pace:
    """The intervals between readings: ``fastest_s`` while the job changes or waits, doubling up to
    ``slowest_s`` while it is steady."""

    fastest_s: float = 1.0
    slowest_s: float = 10.0
    changes: bool = True
    """Whether a reading that found the job changed counts as busy (False: only waits do, for a job
    nobody watches live, read for its hangs)."""

    def after(self, interval_s: float, busy: bool) -> float:
        """The interval after a reading that found the job ``busy`` (changed or waiting), the last
        interval having been ``interval_s``."""
        return self.fastest_s if busy else min(self.slowest_s, max(interval_s, self.fastest_s) * 2)


def gone(reading: Reading) -> bool:
    """Whether no rank answered (the job has ended, or its servers are gone)."""
    return all(now.error for now in reading.ranks.values())


@dataclass
class Watcher:
    """Readings one at a time, each confirming the waits of the one before, and the pace: after
    each :meth:`read`, :attr:`interval` is the time to wait before the next. What ``watch`` and
    the live viewer's session (:mod:`~collviz.runtime.sessions.attached`) both step through."""

    workers: Sequence[Worker]
    pace: Pace = Pace()
    options: SnapshotOptions = SnapshotOptions()
    ask: Ask = ask_all
    interval: float = field(init=False)
    """The time to wait before the next reading."""
    shown: Snapshot | None = field(default=None, init=False)
    """The last new snapshot :meth:`read` returned."""
    latest: Snapshot | None = field(default=None, init=False)
    """The last reading's snapshot, new or not (None while a wait waits for the next reading to
    confirm it)."""
    previous: Reading | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.interval = self.pace.fastest_s

    def read(self, since: Floors | None = None) -> tuple[Reading, Snapshot | None]:
        """Read every rank (``since``: see :func:`~.snapshot.read_once`); the reading, and its
        snapshot where it differs from the last one returned (None where it does not, or where a
        wait waits for the next reading to confirm it)."""
        current = read_once(self.workers, self.options, self.ask, since)
        if not current.waits:
            snapshot: Snapshot | None = current.unconfirmed()
        else:  # a wait counts once the next reading shows it too
            snapshot = (confirm(self.previous, current, self.workers, self.options, self.ask)
                        if self.previous is not None else None)
        busy = bool(current.waits) or (self.pace.changes and snapshot != self.shown)
        new = snapshot if snapshot is not None and snapshot != self.shown else None
        if new is not None:
            self.shown = new
        self.interval = self.pace.after(self.interval, busy)
        self.previous, self.latest = current, snapshot
        return current, new


def watch(workers: Sequence[Worker], show: Callable[[Snapshot], None], pace: Pace = Pace(),
          options: SnapshotOptions = SnapshotOptions(), readings: int | None = None, ask: Ask = ask_all,
          sleep: Callable[[float], None] = time.sleep) -> Snapshot:
    """Read every rank, paced by ``pace``, until ``readings`` readings were taken and one snapshot
    shown (None: until interrupted) or no rank answers (the job is gone); ``show`` each snapshot
    that differs from the one shown before. The last snapshot shown."""
    watcher = Watcher(workers, pace, options, ask)
    taken = 0
    while True:
        current, new = watcher.read()
        taken += 1
        if new is not None:
            show(new)
        if watcher.shown is not None and ((readings is not None and taken >= readings) or gone(current)):
            return watcher.shown
        sleep(watcher.interval)
