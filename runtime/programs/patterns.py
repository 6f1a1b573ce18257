"""Generated inputs that stay exact: small integers every dtype holds, so results can be checked.

Element i of rank r is ``r·count + i + 1`` when every value, and every result the operation can
make from them, is an integer the dtype holds exactly; otherwise the values cycle with a period
small enough that they are, each rank's cycle shifted by its rank: ``(i + r) mod P + 1`` (so
ranks hold different inputs whenever P allows, even when P divides the count).
"""

from __future__ import annotations

import torch

__all__ = ["EXACT_LIMIT", "pattern", "exact_period"]

EXACT_LIMIT = {"float32": 2**24, "float64": 2**53, "float16": 2**11, "bfloat16": 2**8,
               "int8": 2**7 - 1, "uint8": 2**8 - 1, "int16": 2**15 - 1, "int32": 2**31 - 1, "int64": 2**63 - 1}
"""Largest integer each dtype holds exactly (all smaller non-negative integers are exact too)."""


def pattern(rank: int, count: int, period: int | None, device: torch.device) -> torch.Tensor:
    """Rank ``rank``'s generated values as an integer tensor: ``(i + rank) mod period + 1``, or
    ``rank·count + i + 1`` when ``period`` is None."""
    index_dtype = torch.int32 if (rank + 1) * count < 2**31 else torch.int64
    indexes = torch.arange(count, dtype=index_dtype, device=device)
    return (indexes + rank) % period + 1 if period else indexes + rank * count + 1


def exact_period(dtype: str, world_size: int, count: int, reduce_op: str | None) -> int | None:
    """The period generated inputs need so that the values and what ``reduce_op`` makes of them
    over ``world_size`` ranks (None: no reduction) stay exact in ``dtype``; None when the plain
    rule already does."""
    limit = EXACT_LIMIT[dtype]
    n = world_size

    def exact(largest: int) -> bool:
        if reduce_op in ("sum", "avg"):
            return n * largest <= limit
        if reduce_op == "product":
            return largest ** n <= limit
        return largest <= limit

    if exact(n * count):
        return None
    if reduce_op in ("sum", "avg"):
        return max(1, limit // n)
    if reduce_op == "product":
        root = int(limit ** (1 / n))
        while (root + 1) ** n <= limit:  # float roots can land one below or above
            root += 1
        while root > 1 and root**n > limit:
            root -= 1
        return max(1, root)
    return limit
