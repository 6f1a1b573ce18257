"""When a running job is read next. Each reading costs every rank the building of its whole Flight
Recorder answer (torch 2.13 cannot send less: its handler takes no parameter; ~25 ms of a rank's
CPU at 2,000 calls, ``benchmarks/live_cost.py``), so the next reading is due once two things hold:

- the pace's interval has passed (:class:`Pace`): the fastest while some ranks wait (a wait is
  confirmed, and its time counted, at that pace), else the slowest the user set — a job whose calls
  flow steadily is read at the slowest pace, however fast its calls move;
- where a meter measures the ranks (:mod:`.reading_cost`), every working rank's own CPU has paid
  for the readings so far and the next one at its share: a steady job's second reading included,
  and a waited-on rank's readings while it works. A rank that does not work (it waits, sleeps,
  is stalled) holds nothing back, so a stall is read at the fastest pace.

Only two readings are not held by the meter: the first (nothing is known of its cost before it is
paid) and the one that confirms a wait the reading before saw for the first time (the user needs
a stall at once, and it is one reading).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Meter", "Pace", "Schedule"]


@dataclass(frozen=True)
class Pace:
    """The intervals between readings: ``fastest_s`` while ranks wait, ``slowest_s`` while none does."""

    fastest_s: float = 1.0
    slowest_s: float = 10.0

    def after(self, busy: bool) -> float:
        """The interval after a reading that found ranks waiting (``busy``) or not."""
        return self.fastest_s if busy else self.slowest_s


class Meter(Protocol):
    """What the schedule asks of a meter of the ranks' CPU (:class:`~.reading_cost.ReadingCost`)."""

    def owed_s(self) -> float:
        """The seconds, estimated from the ranks' CPU now, until every working rank has paid for
        the next reading (0: paid)."""


@dataclass
class Schedule:
    """When the next reading is due (see the module): ``pace``'s interval after the last reading,
    and, with a ``meter``, once it says the ranks have paid. The first reading is due at once."""

    pace: Pace
    meter: Meter | None = None
    clock: Callable[[], float] = time.monotonic
    interval: float = field(init=False)
    """The pace's interval after the last reading."""
    _due: float = field(init=False)
    _free: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        self.interval = self.pace.fastest_s
        self._due = self.clock()

    def read(self, busy: bool, confirming: bool = False) -> None:
        """A reading was taken: it found ranks waiting (``busy``) or not; ``confirming``: a wait
        it saw for the first time is to be confirmed, by a reading the meter does not hold."""
        self.interval = self.pace.after(busy)
        self._due = self.clock() + self.interval
        self._free = confirming

    def now(self) -> None:
        """Make the next reading due at once, held by nothing (a rank's process ended: its end is
        to be read, not found after a hold its running ranks earned)."""
        self._due = min(self._due, self.clock())
        self._free = True

    def held_s(self) -> float:
        """What the meter still asks (0: nothing, or no meter)."""
        return 0.0 if self._free or self.meter is None else max(0.0, self.meter.owed_s())

    def next_in(self) -> float:
        """Seconds until the next reading is due (the meter's part an estimate; 0: due now)."""
        return max(0.0, self._due - self.clock(), self.held_s())
