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
from dataclasses import dataclass

from .snapshot import Ask, Reading, Snapshot, SnapshotOptions, confirm, read_once
from .workers import Worker, ask_all

__all__ = ["Pace", "watch"]


@dataclass(frozen=True)
class Pace:
    """The intervals between readings: ``fastest_s`` while the job changes or waits, doubling up to
    ``slowest_s`` while it is steady."""

    fastest_s: float = 1.0
    slowest_s: float = 10.0

    def after(self, interval_s: float, busy: bool) -> float:
        """The interval after a reading that found the job ``busy`` (changed or waiting), the last
        interval having been ``interval_s``."""
        return self.fastest_s if busy else min(self.slowest_s, max(interval_s, self.fastest_s) * 2)


def _gone(reading: Reading) -> bool:
    """Whether no rank answered (the job has ended, or its servers are gone)."""
    return all(now.error for now in reading.ranks.values())


def watch(workers: Sequence[Worker], show: Callable[[Snapshot], None], pace: Pace = Pace(),
          options: SnapshotOptions = SnapshotOptions(), readings: int | None = None, ask: Ask = ask_all,
          sleep: Callable[[float], None] = time.sleep) -> Snapshot:
    """Read every rank, paced by ``pace``, until ``readings`` readings were taken and one snapshot
    shown (None: until interrupted) or no rank answers (the job is gone); ``show`` each snapshot
    that differs from the one shown before. The last snapshot shown."""
    previous: Reading | None = None
    shown: Snapshot | None = None
    interval, taken = pace.fastest_s, 0
    while True:
        current = read_once(workers, options, ask)
        taken += 1
        if not current.waits:
            snapshot: Snapshot | None = current.unconfirmed()
        else:  # a wait counts once the next reading shows it too
            snapshot = confirm(previous, current, workers, options, ask) if previous is not None else None
        busy = snapshot is None or snapshot != shown or bool(current.waits)
        if snapshot is not None and snapshot != shown:
            show(snapshot)
            shown = snapshot
        if shown is not None and ((readings is not None and taken >= readings) or _gone(current)):
            return shown
        interval = pace.after(interval, busy)
        sleep(interval)
        previous = current
