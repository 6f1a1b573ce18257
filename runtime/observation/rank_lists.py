"""Lists of ranks as people read them: ``0–3, 5, 7–9`` (a 64-rank hang names ``ranks 0–4, 6–63``)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ranks_text"]


def ranks_text(ranks: Sequence[int]) -> str:
    """``0–3, 5, 7–9``: ranks in their order, each run of three or more consecutive ones as a range."""
    parts: list[str] = []
    start = 0
    for index in range(1, len(ranks) + 1):
        if index < len(ranks) and ranks[index] == ranks[index - 1] + 1:
            continue
        run = ranks[start:index]
        parts.append(f"{run[0]}–{run[-1]}" if len(run) >= 3 else ", ".join(map(str, run)))
        start = index
    return ", ".join(parts)
