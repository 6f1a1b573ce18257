"""How often a running job is read. Each reading costs every rank the building of its whole Flight
Recorder answer (torch cannot send less; ``benchmarks/attach_cost.py`` measures it), so the pace
adapts: the fastest interval while something changes or some ranks wait, then twice as long after
each reading that found nothing new, up to the slowest the user set.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Pace"]


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
