"""Lists of ranks as people read them: ``0–3, 5, 7–9`` (a 64-rank hang names ``ranks 0–4, 6–63``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["ranks_text"]


def ranks_text(ranks: Sequence[int]) -> str:
    """``0–3, 5, 7–9``: ranks in their order, each run of three or more consecutive ones as a range
    (the runs found by one pass over the list's steps: a million ranks in one run are one step)."""
    parts: list[str] = []
    ends = [index for index, (a, b) in enumerate(zip(ranks, ranks[1:]), start=1) if b != a + 1] if len(ranks) < 4096 \
        else (np.flatnonzero(np.diff(np.asarray(ranks, dtype=np.int64)) != 1) + 1).tolist()
    start = 0
    for index in ends + [len(ranks)]:
        run = ranks[start:index]
        parts.append(f"{run[0]}–{run[-1]}" if len(run) >= 3 else ", ".join(map(str, run)))
        start = index
    return ", ".join(parts) if ranks else ""
