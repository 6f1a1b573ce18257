"""Bounds on every number a user gives, checked before any process starts.

Each check raises a one-line UsageError naming the option, the value and the range it must lie
in, so nonsense (``--iters 10^22``, ``--timeout nan``, ``--size 99999999999999GiB``) never reaches
a worker. Whether a run fits in memory depends on where its ranks run: the run plan checks it
(:func:`collviz.runtime.plan.plan_run`).
"""

from __future__ import annotations

import math

from .errors import UsageError
from .observation.metrics import human_bytes

__all__ = ["MAX_SIZE_BYTES", "MAX_ITERS", "MIN_TIMEOUT_S", "MAX_TIMEOUT_S", "MEMORY_HEADROOM", "check_count",
           "check_seconds", "check_size"]

MAX_SIZE_BYTES = 1 << 40
"""Largest ``--size`` per rank (1 TiB); the run plan's memory check usually refuses far less."""

MAX_ITERS = 100_000
"""Most timed calls (``--iters``) or warm-up calls one run may ask for."""

MIN_TIMEOUT_S = 1.0
"""Shortest hang timeout: below it, ordinary scheduling delays on a busy machine read as hangs."""

MAX_TIMEOUT_S = 86_400.0
"""Longest hang timeout (a day)."""

MEMORY_HEADROOM = 0.8
"""Share of the available memory a run's estimate may take."""


def check_count(option: str, value: int, low: int, high: int) -> int:
    """``value`` if ``low ≤ value ≤ high``; else a UsageError naming the range."""
    if not low <= value <= high:
        raise UsageError(f"{option} {value}: must be between {low:,} and {high:,}")
    return value


def check_seconds(option: str, value: float) -> float:
    """A finite number of seconds between :data:`MIN_TIMEOUT_S` and :data:`MAX_TIMEOUT_S`."""
    if not math.isfinite(value) or not MIN_TIMEOUT_S <= value <= MAX_TIMEOUT_S:
        raise UsageError(f"{option} {value:g}: must be a number of seconds between {MIN_TIMEOUT_S:g} "
                         f"and {MAX_TIMEOUT_S:g}")
    return value


def check_size(option: str, value: int) -> int:
    """A byte count between 1 and :data:`MAX_SIZE_BYTES`."""
    if not 1 <= value <= MAX_SIZE_BYTES:
        raise UsageError(f"{option} {value:,} B: must be between 1 B and {human_bytes(MAX_SIZE_BYTES)}")
    return value
