"""Paced runs: gates that open by themselves every S seconds, unless the teacher pauses.

A pure clock-driven decision, so it is tested with a fake clock: the app asks :meth:`Pacer.due`
on a short timer and releases the next gate when it says so (and only while every rank waits
there: a slow step is never skipped).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Pacer"]


@dataclass
class Pacer:
    """Says when the next gate is due: ``period`` seconds after the previous one opened (or after
    pacing resumed), never while ``paused``."""

    period: float
    clock: Callable[[], float] = time.monotonic
    paused: bool = False
    _due_at: float | None = field(default=None, repr=False)

    def due(self, ready: bool) -> bool:
        """Whether to open the next gate now; ``ready``: every rank waits at it. The period
        counts from the moment the ranks were ready, so a slow step still gets its full time."""
        if self.paused or not ready:
            self._due_at = None if not ready else self._due_at
            return False
        now = self.clock()
        if self._due_at is None:
            self._due_at = now + self.period
        if now < self._due_at:
            return False
        self._due_at = None
        return True

    def toggle(self) -> bool:
        """Pause or resume; returns whether pacing is now paused (resuming waits a full period)."""
        self.paused = not self.paused
        self._due_at = None
        return self.paused

    def remaining(self) -> float | None:
        """Seconds until the next gate opens (None while paused or until the ranks are ready)."""
        if self.paused or self._due_at is None:
            return None
        return max(0.0, self._due_at - self.clock())
