"""How a viewer runs beyond what it shows: pacing, the projector layout, the lesson it belongs to.

Plain data the command line builds and the app (:mod:`.app`) reads; kept apart so commands and
tests can build them without the app's module.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LessonPlace", "ViewerOptions"]


@dataclass(frozen=True)
class LessonPlace:
    """Where a lesson stands: its name, the item playing (``number`` of ``total``) and its title."""

    name: str
    number: int
    total: int
    title: str

    def __str__(self) -> str:
        return f"lesson {self.name} · {self.number}/{self.total} {self.title}"


@dataclass
class ViewerOptions:
    """How the viewer runs, beyond what it shows: ``pace`` (seconds per step: a step-through run's
    gates open by themselves, a replay plays), ``present`` (the projector layout and theme),
    ``lesson`` (while a lesson plays, which item: q and n leave it for the next item, p for the
    previous one, Q ends the lesson, recorded in ``navigation``: ``next``, ``previous`` or
    ``end``), ``clock`` (the pacing clock; tests pass a fake one). The viewer writes back
    ``present`` as the user left it (``P``: a lesson keeps it for its next item) and ``left_at``:
    where the user quit a run before its end (None: it ended, or was never left)."""

    pace: float | None = None
    present: bool = False
    lesson: LessonPlace | None = None
    navigation: str | None = None
    left_at: str | None = None
    clock: Callable[[], float] = time.monotonic
