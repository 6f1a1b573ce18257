"""The one loop every live view steps: a reader's readings, at the pace's intervals, through one feed.

:class:`LiveLoop` is what ``collviz attach`` (viewer and ``--watch``), ``collviz run``'s Flight
Recorder mode and ``collviz replay --follow`` all step: :meth:`LiveLoop.step_if_due` takes a
reading when one is due (never waiting for it: a launcher's own loop calls it between its other
work), :meth:`LiveLoop.wait_and_step` waits for the next one (up to a timeout, woken by
:meth:`LiveLoop.interrupt`). Each reading goes to the feed (its events into the session's sink)
and sets the next interval: the fastest while ranks wait (a wait that has lasted — its waiters
had issued the call ``fastest_s`` or more before the reading began, or the reading before showed it
too: :attr:`LiveLoop.busy`), the slowest while none
does, however fast the calls move (where a :class:`~.reading_cost.ReadingCost` measures the ranks,
reached by doubling from the fastest), and longer where it measures that the ranks' CPU has not yet
paid for another reading (:class:`~.pace.Pace`: a reading costs
each rank its whole recorder's answer). A wait younger than the reading is no reason to read again
soon: a rank whose server builds its answer is held out of its next call meanwhile (on a loaded
machine for a second and more), and its peers wait for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from ..observation.rank_lists import ranks_text

from .feed import Feed
from .pace import Pace
from .reading import CallKey, End, Reader, Reading, Wait, waits_of
from .reading_cost import ReadingCost

__all__ = ["LiveLoop", "how_it_ended"]


@dataclass
class LiveLoop:
    """Readings of ``reader`` through ``feed`` at ``pace`` (held back by ``cost`` where it measures
    the ranks); a confirmed wait becomes a Stall once waited ``stall_after_s``."""

    reader: Reader
    feed: Feed
    pace: Pace = Pace()
    stall_after_s: float = 0.0
    cost: ReadingCost | None = None
    interval: float = field(init=False)
    """The time to wait before the next reading."""
    latest: Reading | None = field(default=None, init=False)
    """The last reading taken."""
    busy: bool = field(default=False, init=False)
    """Whether the last reading showed a wait that has lasted (the next reading is soon)."""
    waiting: dict[CallKey, Wait] = field(default_factory=dict, init=False)
    """The waits confirmed at the last reading any rank answered: those the job's end cut short."""
    _due: float = field(default_factory=time.monotonic, init=False)
    _woken: threading.Event = field(default_factory=threading.Event, init=False)

    def __post_init__(self) -> None:
        self.interval = self.pace.fastest_s

    def step(self, final: bool = False, excused: Collection[int] = ()) -> Reading:
        """One reading now, through the feed (``final``: every wait in it is final; none on a rank
        of ``excused`` is a Stall); the next is due an interval later."""
        if self.cost is not None:
            self.cost.before()
        began_ns = self.feed.now_ns()
        reading = self.reader.read()
        held_s = self.cost.after() if self.cost is not None else 0.0
        self.feed.take(reading, self.stall_after_s, final, excused)
        if not reading.gone:
            self.waiting = dict(self.feed.confirmed)
        self.busy = self._lasting_wait(reading, began_ns)
        eased_from = None if self.cost is None else min(self.interval, self.pace.slowest_s)
        self.interval = self.pace.after(self.busy, held_s, eased_from)
        self._due = time.monotonic() + self.interval
        self.latest = reading
        return reading

    def _lasting_wait(self, reading: Reading, began_ns: int) -> bool:
        """Whether ``reading``, begun at ``began_ns`` (the feed's clock), shows a wait worth reading
        again soon (see the module)."""
        waits = waits_of(reading)
        if self.feed.confirmed:
            return True
        lasted_ns = self.pace.fastest_s * 1e9
        return any(began_ns - wait.issued_ns >= lasted_ns for wait in waits.values())

    @property
    def due(self) -> bool:
        """Whether the next reading is due."""
        return time.monotonic() >= self._due

    def step_if_due(self) -> Reading | None:
        """A reading if one is due (see :meth:`step`), else None at once."""
        return self.step() if self.due else None

    def wait_and_step(self, timeout: float) -> Reading | None:
        """Wait up to ``timeout`` seconds for the next reading to fall due, then take it; None when
        it did not fall due in time or :meth:`interrupt` woke the wait. A measured rank whose
        process ended makes the next reading due at once."""
        if self.cost is not None and self.cost.newly_exited():
            self._due = min(self._due, time.monotonic())
        wait = self._due - time.monotonic()
        if self._woken.wait(max(0.0, min(wait, timeout))) or wait > timeout:
            return None
        return self.step()

    def interrupt(self) -> None:
        """Wake a :meth:`wait_and_step` under way (from another thread, or a signal's handler)."""
        self._woken.set()


def how_it_ended(end: End, waiting: Mapping[CallKey, Wait]) -> End:
    """How a job ended as the user is told: ``end``, or, where ranks were waiting at the last
    reading any rank answered (:attr:`LiveLoop.waiting`), ``failed``: it ended stalled, the
    longest wait named."""
    if not waiting or end.status != "ok":
        return end
    wait = min(waiting.values(), key=lambda found: found.issued_ns)
    plural = "s" if len(wait.waiting) > 1 else ""
    others = f" (and {len(waiting) - 1} other wait{'s' if len(waiting) > 2 else ''})" if len(waiting) > 1 else ""
    return End("failed", f"the job ended while rank{plural} {ranks_text(wait.waiting)} waited in {wait.text} for "
                         f"rank{'s' if len(wait.missing) > 1 else ''} {ranks_text(wait.missing)}{others}")
