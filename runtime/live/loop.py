"""The one loop every live view steps: a reader's readings, at the pace's intervals, through one feed.

:class:`LiveLoop` is what ``collviz attach`` (viewer and ``--watch``), ``collviz run``'s Flight
Recorder mode and ``collviz replay --follow`` all step: :meth:`LiveLoop.step_if_due` takes a
reading when one is due (never waiting for it: a launcher's own loop calls it between its other
work), :meth:`LiveLoop.wait_and_step` waits for the next one (up to a timeout, woken by
:meth:`LiveLoop.interrupt`). Each reading goes to the feed (its events into the session's sink)
and sets when the next is due (:class:`~.pace.Schedule`): after the fastest interval while ranks
wait (a wait that has lasted — its waiters had issued the call ``fastest_s`` or more before the
reading began, or the reading before showed it too: :attr:`LiveLoop.busy`), the slowest while none
does, however fast the calls move; and, where a :class:`~.reading_cost.ReadingCost` measures the
ranks, not before every working rank's own CPU has paid for it (a reading costs each rank its whole
recorder's answer) — every reading but the first and the one that confirms a new wait. A wait
younger than the reading is no reason to read again soon: a rank whose server builds its answer is
held out of its next call meanwhile (on a loaded machine for a second and more), and its peers wait
for it.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from ..observation.rank_lists import ranks_text

from .feed import Feed
from .pace import Pace, Schedule
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
    latest: Reading | None = field(default=None, init=False)
    """The last reading taken."""
    busy: bool = field(default=False, init=False)
    """Whether the last reading showed a wait that has lasted (the next reading is soon)."""
    waiting: dict[CallKey, Wait] = field(default_factory=dict, init=False)
    """The waits confirmed at the last reading any rank answered: those the job's end cut short."""
    _schedule: Schedule = field(init=False)
    _woken: threading.Event = field(default_factory=threading.Event, init=False)

    def __post_init__(self) -> None:
        self._schedule = Schedule(self.pace, self.cost)

    @property
    def interval(self) -> float:
        """The pace's interval after the last reading (the meter may hold the next one longer:
        :meth:`next_in`)."""
        return self._schedule.interval

    def step(self, final: bool = False, excused: Collection[int] = ()) -> Reading:
        """One reading now, through the feed (``final``: every wait in it is final; none on a rank
        of ``excused`` is a Stall); the next is due an interval later."""
        if self.cost is not None:
            self.cost.before()
        began_ns = self.feed.now_ns()
        reading = self.reader.read()
        if self.cost is not None:
            self.cost.after()
        self.feed.take(reading, self.stall_after_s, final, excused)
        if not reading.gone:
            self.waiting = dict(self.feed.confirmed)
        lasting = self._lasting_waits(reading, began_ns)
        self.busy = bool(self.feed.confirmed or lasting)
        self._schedule.read(self.busy, confirming=bool(lasting - set(self.feed.confirmed)))
        self.latest = reading
        return reading

    def _lasting_waits(self, reading: Reading, began_ns: int) -> set[CallKey]:
        """The waits ``reading``, begun at ``began_ns`` (the feed's clock), shows that are worth
        reading again soon (see the module)."""
        lasted_ns = self.pace.fastest_s * 1e9
        return {key for key, wait in waits_of(reading).items() if began_ns - wait.issued_ns >= lasted_ns}

    def _note_exits(self) -> None:
        """A measured rank whose process ended makes the next reading due at once, held by nothing."""
        if self.cost is not None and self.cost.newly_exited():
            self._schedule.now()

    def held_s(self) -> float:
        """What the meter still asks before the next reading, the pace's interval aside (0: nothing)."""
        self._note_exits()
        return self._schedule.held_s()

    def next_in(self) -> float:
        """Seconds until the next reading is due (estimated where the meter holds it; 0: now)."""
        self._note_exits()
        return self._schedule.next_in()

    @property
    def due(self) -> bool:
        """Whether the next reading is due."""
        return self.next_in() <= 0

    def step_if_due(self) -> Reading | None:
        """A reading if one is due (see :meth:`step`), else None at once."""
        return self.step() if self.due else None

    def wait_and_step(self, timeout: float) -> Reading | None:
        """Wait up to ``timeout`` seconds for the next reading to fall due, then take it; None when
        it did not fall due in time (the meter's estimate included) or :meth:`interrupt` woke the
        wait. A measured rank whose process ended makes the next reading due at once."""
        wait = self.next_in()
        if self._woken.wait(min(wait, timeout)) or wait > timeout:
            return None
        return self.step() if wait <= 0 or self.due else None

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
