"""How often a running job is read. Each reading costs every rank the building of its whole Flight
Recorder answer (torch 2.13 cannot send less: its handler takes no parameter; ~25 ms of a rank's
CPU at 2,000 calls, ``benchmarks/live_cost.py``), so the pace adapts: the fastest interval while
some ranks wait (a wait is confirmed, and its time counted, at that pace), else the slowest the
user set — a job whose calls flow steadily is read at the slowest pace, however fast its calls
move — or longer, where the ranks' measured CPU has not yet paid for another reading
(:mod:`.reading_cost`); where it is measured, a steady job slows to the slowest pace by doubling
the interval from the fastest, so that a young job's first readings, which cost little, show how
fast its readings' cost grows before a costly one is taken.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Pace"]


@dataclass(frozen=True)
class Pace:
    """The intervals between readings: ``fastest_s`` while ranks wait, ``slowest_s`` while none does."""

    fastest_s: float = 1.0
    slowest_s: float = 10.0

    def after(self, busy: bool, held_s: float = 0.0, eased_from_s: float | None = None) -> float:
        """The interval after a reading that found ranks waiting (``busy``) or not; a steady one
        at least ``held_s`` (what the readings' measured cost asks), and, ``eased_from_s`` given
        (the interval before), twice that rather than the slowest at once (at least the fastest)."""
        if busy:
            return self.fastest_s
        steady = self.slowest_s if eased_from_s is None else min(self.slowest_s, max(self.fastest_s, 2 * eased_from_s))
        return max(steady, held_s)
