"""Pieces of the memory chart: category colours, rank grouping, columns, stacked cells, axis labels.

Pure functions of a rank's memory samples, so the chart is tested without a terminal. A column
stands for one or more consecutive samples (the one with the most live bytes among them, so a
peak is never averaged away); a cell holds eighths of its height, the lower part drawn with a
lower-block character in one category's colour and the rest as the background in the next.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from operator import gt

from rich.style import Style

from ..model import MemoryTrack
from .render import short_blocks

__all__ = [
    "CATEGORY_ORDER", "CATEGORY_COLOURS", "category_colour", "category_style", "RankGroup", "SeriesDigests", "group_ranks",
    "representative_groups",
    "sample_columns", "stacked_cells", "phase_label", "Cell",
]

CATEGORY_ORDER = ("params", "grads", "optimizer", "activations", "communication", "inputs", "timing copy", "other")
"""Stacking order, bottom to top: what a step keeps first, what it allocates and frees last."""

CATEGORY_COLOURS = {
    "params": "#4e79a7", "grads": "#f28e2b", "optimizer": "#b07aa1", "activations": "#59a14f",
    "communication": "#e15759", "inputs": "#edc948", "timing copy": "#9c755f", "other": "#bab0ac",
}
"""Colour of each memory category (any other category is drawn like ``other``)."""

_LOWER = " ▁▂▃▄▅▆▇█"
_BLANK = Style()

Cell = tuple[str, Style]
"""One character of the chart and its style."""


def category_colour(name: str) -> str:
    """The colour of category ``name``."""
    return CATEGORY_COLOURS.get(name, CATEGORY_COLOURS["other"])


@lru_cache(maxsize=256)
def category_style(name: str) -> Style:
    """Text in category ``name``'s colour, one shared object per category (line widgets key
    strips on style identity)."""
    return Style(color=category_colour(name))


@dataclass(frozen=True)
class RankGroup:
    """Ranks whose memory samples are identical, shown as one row; ``note`` qualifies the label
    (``"min"``, ``"median"``, ``"max"`` when only representatives are shown)."""

    ranks: tuple[int, ...]
    track: MemoryTrack
    note: str = ""

    @property
    def label(self) -> str:
        """``r2``, ``r0–r3`` (consecutive ranks), ``r0,r2`` or ``r5 max``."""
        ranks = self.ranks
        if len(ranks) == 1:
            text = f"r{ranks[0]}"
        elif list(ranks) == list(range(ranks[0], ranks[-1] + 1)):
            text = f"r{ranks[0]}–{ranks[-1]}"
        else:
            text = ",".join(f"r{r}" for r in ranks[:3]) + ("…" if len(ranks) > 3 else "")
        return f"{text} {self.note}" if self.note else text


class SeriesDigests:
    """A running digest of each rank's memory series, extended as the series grow.

    The log's series only ever grow, so each rank's digest (the sum of every sample's hash, each
    salted with its position: the same whichever frames the samples arrived in, and the same for
    two ranks exactly when their samples are, bar a 64-bit collision; and the categories seen) is
    brought up to date with the new samples alone, in C-level passes over them: grouping identical
    ranks and listing the legend's categories cost nothing per frame, however long the run.
    """

    def __init__(self) -> None:
        self._state: dict[int, tuple[object, int, int, frozenset[str]]] = {}

    def digest(self, track: MemoryTrack) -> tuple[int, frozenset[str]]:
        """(hash of the first ``track.length`` samples, categories seen in them)."""
        key = id(track.live)
        state = self._state.get(key)
        if state is not None and state[0] is track.live and state[1] == track.length:  # a replay's: always
            return state[2], state[3]
        owner, done, value, seen = state or (None, 0, 0, frozenset())
        if owner is not track.live or done > track.length:  # a new series, or a shorter view of it
            done, value, seen = 0, 0, frozenset()
        if done < track.length:
            live = track.live[done : track.length]
            samples = track.categories[done : track.length]
            shapes = map(tuple, map(dict.items, samples))
            value += sum(map(hash, zip(range(done, track.length), live, track.peaks[done : track.length], shapes)))
            new = set().union(*samples)
            if any(map(gt, live, map(sum, map(dict.values, samples)))):
                new.add("other")
            if new - seen:
                seen = seen | new
        self._state[key] = (track.live, track.length, value, seen)
        return value, seen


def group_ranks(tracks: Sequence[MemoryTrack], digests: SeriesDigests) -> list[RankGroup]:
    """Ranks with identical samples (bytes, categories, peaks, cursor, device figures) grouped,
    in rank order."""
    digest = digests.digest
    groups: dict[tuple, list[int]] = {}
    for rank, track in enumerate(tracks):
        cuda, nvml = track.cuda, track.nvml  # None on CPU: no repr to make
        signature = (track.length, track.upto, digest(track)[0],
                     None if cuda is None else repr(cuda), None if nvml is None else repr(nvml))
        groups.setdefault(signature, []).append(rank)
    return [RankGroup(tuple(ranks), tracks[ranks[0]]) for ranks in groups.values()]


def representative_groups(groups: list[RankGroup], limit: int) -> tuple[list[RankGroup], int]:
    """At most ``limit`` groups: all of them, or the ones holding the lowest, median and highest
    peak (labelled so) when there are more; also how many ranks are not shown."""
    if len(groups) <= limit:
        return groups, 0
    ordered = sorted(groups, key=lambda g: (g.track.peak, g.ranks))
    picks = [("min", ordered[0]), ("median", ordered[len(ordered) // 2]), ("max", ordered[-1])][:max(limit, 1)]
    shown = [RankGroup(group.ranks, group.track, note) for note, group in picks]
    hidden = sum(len(g.ranks) for g in groups) - sum(len(g.ranks) for g in shown)
    return shown, hidden


def sample_columns(live: Sequence[int], count: int, width: int) -> list[int]:
    """For each of ``width`` columns, the sample it draws: samples spread over the columns when
    there are fewer, else the sample with the most live bytes among those the column covers."""
    if not count or width <= 0:
        return []
    columns = []
    for column in range(width):
        low = column * count // width
        high = min(count, max(low + 1, (column + 1) * count // width))
        if high - low == 1:
            columns.append(low)
        else:  # slices, max and index run in C: a long run costs little per frame
            span = live[low:high]
            columns.append(low + span.index(max(span)))
    return columns


def stacked_cells(categories: dict[str, int], top: int, rows: int, dim: bool) -> list[Cell]:
    """The ``rows`` cells (bottom first) of one column: ``categories`` stacked in
    :data:`CATEGORY_ORDER`, ``top`` bytes being the full height; grey when ``dim``.

    Memoised: a run's columns repeat a few (categories, scale) pairs, and building cells and
    their styles anew for every column of every frame would cost most of a frame."""
    return _stacked(tuple(categories.items()), top, rows, dim)


@lru_cache(maxsize=8192)
def _cell_style(colour: str, background: str | None) -> Style:
    return Style(color=colour, bgcolor=background)


@lru_cache(maxsize=8192)
def _stacked(items: tuple[tuple[str, int], ...], top: int, rows: int, dim: bool) -> list[Cell]:
    categories = dict(items)
    eighths = rows * 8
    total = sum(categories.values())
    order = sorted(categories, key=lambda c: (CATEGORY_ORDER.index(c) if c in CATEGORY_ORDER else len(CATEGORY_ORDER), c))
    bands: list[tuple[int, int, str]] = []  # (start, end) in eighths, category
    running = 0
    for name in order:
        if categories[name] <= 0:
            continue
        start = round(running / top * eighths) if top else 0
        running += categories[name]
        end = round(running / top * eighths) if top else 0
        if end > start:
            bands.append((start, min(end, eighths), name))
    if total > 0 and not bands and top:
        bands.append((0, 1, order[-1]))  # too small to round up: still one eighth, not nothing
    cells: list[Cell] = []
    for row in range(rows):
        low, high = row * 8, row * 8 + 8
        inside = [(max(s, low), min(e, high), name) for s, e, name in bands if s < high and e > low]
        if not inside:
            cells.append((" ", _BLANK))
            continue
        top_end = inside[-1][1]
        if top_end < high:  # the stack ends in this cell: its height, in the colour filling most of it
            main = max(inside, key=lambda band: band[1] - band[0])[2]
            colour = "#5a5a5a" if dim else category_colour(main)
            cells.append((_LOWER[top_end - low], _cell_style(colour, None)))
            continue
        # a full cell: the lowest category's share as the glyph, the largest other one behind it
        first_end, first = inside[0][1], inside[0][2]
        rest = [(e - s, name) for s, e, name in inside[1:]]
        above = max(rest)[1] if rest else None
        colour = "#5a5a5a" if dim else category_colour(first)
        background = None if above is None else ("#3a3a3a" if dim else category_colour(above))
        cells.append((_LOWER[first_end - low], _cell_style(colour, background)))
    return cells


_WORDS = {"forward": "fwd", "backward": "bwd", "embed": "emb", "optimizer": "opt", "bucket": "bkt",
          "all-gather": "ag", "reduce-scatter": "rs", "all-reduce": "ar", "gradients": "grad", "compute": "comp",
          "reshard": "reshard", "check": "check"}


@lru_cache(maxsize=4096)
def phase_label(name: str) -> str:
    """A short axis label for a phase: the part before ``:``, words abbreviated (``block 0
    forward: all-gather`` → ``b0 fwd``, ``hop 3/6: …`` → ``hop 3``, ``AdamW step…`` → ``AdamW``,
    ``3 more steps, unobserved: …`` → ``3 more steps``: a count keeps what it counts).
    Memoised: the axis asks for a label per column, every frame."""
    head = name.split(":")[0].split(",")[0].strip() or name
    head = re.split(r"\s+of\s+", head)[0]  # "hop 2/6 of ring" → "hop 2/6"
    head = short_blocks(head)
    head = re.sub(r"(\d+)/\d+", r"\1", head)
    words = [_WORDS.get(word, word) for word in head.split()]
    if len(words) > 2 and not any(ch.isdigit() for ch in words[1]) and not words[0].isdigit():
        words = words[:1]
    return " ".join(words[:3])
