"""The loop of a session that reads its source itself, reading after reading: an attached job's
worker servers (:mod:`.attached`), a folder of NCCL Inspector files growing (:mod:`.followed`).

:class:`Readings` holds what such sessions share: a poll waits for the next reading to fall due
(or returns after its timeout), takes it, and hands out what the reading passed into the
session's :class:`~.intake.EventIntake`; a reading and a stop never overlap; the run ends once,
by the reading that finds the source over or by ``stop``, with the session's last events before
the RunEnd and the trace closed (readable).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..wire.protocol import AnyEvent
from .contract import RunOutcome
from .intake import EventIntake

__all__ = ["Readings"]


@dataclass
class Readings:
    """Readings of one source into ``intake``: ``read`` takes one (its events into the intake) and
    returns the seconds until the next, or the outcome when the source is over; ``last`` passes
    the session's last events into the intake just before the RunEnd."""

    intake: EventIntake
    read: Callable[[], float | RunOutcome]
    last: Callable[[], None]
    outcome: RunOutcome | None = None
    """How the run ended (None until it has)."""
    _due: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)

    def poll(self, timeout: float) -> list[AnyEvent]:
        """The events taken in since the last call: takes a reading if one falls due within
        ``timeout`` seconds (waiting for it), else waits ``timeout``."""
        if self.outcome is None:
            wait = self._due - time.monotonic()
            if self._stopping.wait(max(0.0, min(wait, timeout))) or wait > timeout:
                return self.intake.take_pending()
            with self._lock:
                if self.outcome is None:
                    after = self.read()
                    if isinstance(after, RunOutcome):
                        self._end(after)
                    else:
                        self.intake.flush()
                        self._due = time.monotonic() + after
        return self.intake.take_pending()

    def stop(self, outcome: RunOutcome) -> None:
        """End the run as ``outcome`` says, unless it has ended; waits for a reading under way."""
        self._stopping.set()
        with self._lock:
            if self.outcome is None:
                self._end(outcome)

    def _end(self, outcome: RunOutcome) -> None:
        self.last()
        self.intake.close(outcome)
        self.outcome = outcome
