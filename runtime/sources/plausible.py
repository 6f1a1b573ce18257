"""What values an artifact can hold: a rank, a size, a duration that could have been measured.

A damaged or hand-edited artifact can say anything: a negative duration, 10³⁰ elements, rank 10⁴⁰.
Such a value is not a measurement: a source flags it as damaged input in a warning and leaves it
out (a duration becomes absent, a call with an impossible size or rank is not shown), rather than
clamping it into something that reads like one (a 1 ns call at 8.2e+06 GB/s). The bounds are far
past any real job: they only catch what cannot be.
"""

from __future__ import annotations

__all__ = ["MAX_RANKS", "MAX_CALL_BYTES", "MAX_DURATION_NS", "rank_ok", "bytes_ok", "duration_ok"]

MAX_RANKS = 1 << 20
"""More ranks than any job has had (the largest run tens of thousands of GPUs)."""

MAX_CALL_BYTES = 1 << 50
"""One PiB: more than one call's buffer on any device (the largest hold a few hundred GiB)."""

MAX_DURATION_NS = 7 * 24 * 3600 * 10**9
"""A week: longer than any one call's measured time (NCCL's watchdog ends a call after minutes)."""


def rank_ok(rank: int, nranks: int = MAX_RANKS) -> bool:
    """Whether ``rank`` can be a rank of a job of ``nranks`` ranks (0 ≤ rank < nranks ≤ MAX_RANKS)."""
    return 0 <= rank < min(nranks, MAX_RANKS)


def bytes_ok(count: int) -> bool:
    """Whether ``count`` bytes (or elements) can be one call's buffer on one device."""
    return 0 <= count <= MAX_CALL_BYTES


def duration_ok(duration_ns: float) -> bool:
    """Whether a call can have taken ``duration_ns``: more than zero and at most a week."""
    return 0 < duration_ns <= MAX_DURATION_NS
