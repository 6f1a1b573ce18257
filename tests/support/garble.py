"""Decoded JSON garbled for fuzz tests: fields replaced by values of another kind or an impossible size."""

from __future__ import annotations

import random

JUNK = (None, "x", -1, 10**30, -(10**30), [], {}, [[-5]], 1e308, True, "[0, 1, 99999999999]", [[10**20, 10**20]], 0,
        2**63, 5663.0, 0.5, -0.0)
"""What a field may become: wrong kinds, sizes beyond any device, numbers past 64 bits, floats whole
and fractional."""


def garbled(value: object, rng: random.Random, odds: float) -> object:
    """``value`` with each field and item replaced, at ``odds``, by one of :data:`JUNK`."""
    if isinstance(value, dict):
        return {k: rng.choice(JUNK) if rng.random() < odds else garbled(v, rng, odds) for k, v in value.items()}
    if isinstance(value, list):
        return [rng.choice(JUNK) if rng.random() < odds else garbled(v, rng, odds) for v in value]
    return value
