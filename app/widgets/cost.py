"""The cost pane: what the step's collective calls moved and what they cost.

For the step's latest call, a headline (what it was, S and t, algbw = S/t, busbw = algbw × factor:
the figures a layout keeps on screen first), then what they stand on (bytes per rank in and out,
what the time measured, the factor's formula); the step's earlier calls are listed on one line.
``b`` opens the "why this factor" explanation.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.cells import cell_len
from rich.text import Text

from collviz.runtime.observation.metrics import human_rate
from collviz.runtime.wire.protocol import SIZES_NOT_READ
from ..model import CallCost
from ..model.panes import CostFields
from .render import content_size, format_bytes
from .text_pane import TextPane

__all__ = ["CostPane", "cost_headline", "cost_details", "cost_lines", "format_seconds", "TIMED_LABELS", "MASKED"]

TIMED_LABELS = {
    "call": "slowest rank's call",
    "phase": "slowest rank's whole phase (the call's own time was not observed)",
    "unknown": "not yet measured",
    "absent": "not recorded",
}
"""What a cost's time measured, as the pane says it."""


def format_seconds(seconds: float) -> str:
    """``0.00123`` → ``"1.23 ms"``; always with a unit."""
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


MASKED = "‒.‒‒"
"""What a time or a bandwidth shows as when volatile figures are masked (snapshot tests)."""


def cost_headline(cost: CallCost, mask_volatile: bool = False, width: int | None = None) -> Text:
    """The call's headline: what it was, then S and t, algbw = S/t and busbw = algbw × factor
    (times and rates as :data:`MASKED` with ``mask_volatile``): the lines a layout keeps on
    screen before any other (an untimed call's: what it was, S, and that t is missing). Where
    busbw's line is wider than ``width`` its figure goes on a line of its own, so a wrap never
    parts a number from its unit."""
    seconds = _seconds(mask_volatile)
    text = Text()
    if cost.dtype == SIZES_NOT_READ:  # a call read from stacks: its group is its own words, no size is known
        text.append(cost.group, "bold")
        text.append(f" · {cost.ranks} ranks · sizes not read (a stack holds none)\nt {TIMED_LABELS[cost.timed]}")
        return text
    text.append(cost.op, "bold")
    group = "" if cost.group == "world" else f" on {cost.group}"
    text.append(f"{group} · {cost.ranks} ranks · {cost.dtype}")
    if cost.reported < cost.ranks:
        text.append(f" · {cost.reported} of {cost.ranks} ranks so far", "dim")
    text.append(f"\nS = {format_bytes(cost.algo_bytes)} · ")
    if cost.seconds is None:
        text.append(f"t {TIMED_LABELS[cost.timed]}", "dim")
        return text
    text.append(f"t = {seconds(cost.seconds)}")
    if cost.rate is None:
        return text
    rate = f"{MASKED} B/s" if mask_volatile else None
    text.append(f"\nalgbw = S/t = {rate or human_rate(cost.rate.algbw)}")
    formula, busbw = f"busbw = algbw × {_factor(cost.op, cost.ranks)}", f"= {rate or human_rate(cost.rate.busbw)}"
    parted = width is not None and cell_len(f"{formula} {busbw}") > width
    text.append(f"\n{formula}\n      {busbw}" if parted else f"\n{formula} {busbw}")
    return text


def cost_details(cost: CallCost, mask_volatile: bool = False, untimed: str = "") -> Text:
    """What the headline's figures stand on, one short line each: bytes per rank in and out (each
    rank's, for an uneven call), what t measured (``untimed``: why an imported call has no time)
    and the bus factor's formula."""
    text = Text()
    sized = cost.dtype != SIZES_NOT_READ  # a call read from stacks has no sizes: its headline says so
    if sized and cost.even:
        text.append(f"{format_bytes(cost.bytes_in)} in → {format_bytes(cost.bytes_out)} out per rank")
    elif sized:
        text.append("uneven: each rank's in → out", "dim")
        text.append_text(_per_rank_text(cost, _seconds(mask_volatile)))
    if cost.seconds is None:
        why = f": {untimed}" if cost.timed == "absent" and untimed else ""
        text.append(f"{chr(10) if text.plain else ''}t: {TIMED_LABELS[cost.timed]}{why}", "dim")
        return text
    repeats = f", median of {cost.calls}" if cost.calls > 1 else ""
    whose = f" (r{cost.slowest})" if cost.slowest is not None and cost.timed == "call" else ""
    own = f"; S is r{cost.slowest}'s" if not cost.even and cost.slowest is not None else ""
    clock = {"gpu": ", GPU time (CUDA events)", "host": ""}.get(cost.clock, "")
    text.append(f"\nt: {TIMED_LABELS[cost.timed]}{whose}{repeats}{clock}{own}", "dim")
    if cost.rate is not None:
        text.append(f"\nfactor {_factor_name(cost.op)}, n = {cost.ranks} · b: why", "dim italic")
    return text


def cost_lines(cost: CallCost, mask_volatile: bool = False, untimed: str = "") -> Text:
    """The call's :func:`cost_headline`, then its :func:`cost_details`."""
    text = cost_headline(cost, mask_volatile)
    text.append("\n")
    text.append_text(cost_details(cost, mask_volatile, untimed))
    return text


def _seconds(mask_volatile: bool) -> Callable[[float], str]:
    """How a time is written: :func:`format_seconds`, or :data:`MASKED` with ``mask_volatile``."""
    return (lambda t: f"{MASKED} s") if mask_volatile else format_seconds


NO_CALL = "no collective call in this step"
"""What the pane says for a step without collective calls: all it says (one line is enough)."""


def _no_cost(fields: CostFields) -> str:
    """Why the step shows no cost: no call of it has ended (each call the ranks are still inside,
    with those ranks), or it has none."""
    inside: dict[tuple[str, str, int], list[int]] = {}
    for rank, latest in fields.latest_calls:
        if latest is not None and latest.edge == "begin" and latest.phase == fields.step:
            inside.setdefault((latest.op, latest.group, latest.group_seq), []).append(rank)
    if not inside:
        return NO_CALL
    def name(op: str, group: str, seq: int) -> str:
        return group if fields.worded_by_group else f"{op} #{seq}"

    if len(inside) == 1:
        [(call, ranks)] = inside.items()
        return f"{name(*call)} has not ended on {_ranks_text(ranks)}: no cost"
    calls = "; ".join(f"{name(*call)} on {_ranks_text(ranks)}" for call, ranks in inside.items())
    return f"calls not ended: {calls}: no cost"


def _ranks_text(ranks: list[int]) -> str:
    """``r0, r1, r3``, or ``12 ranks`` where the list would not be read."""
    return ", ".join(f"r{r}" for r in ranks) if len(ranks) <= 4 else f"{len(ranks)} ranks"


MAX_RANKS_LISTED = 8
"""Ranks an uneven call lists one by one; beyond, the range of their figures."""


def _per_rank_text(cost: CallCost, seconds: Callable[[float], str]) -> Text:
    """Each rank's bytes in → out and its own time (uneven calls), the slowest marked."""
    text = Text()
    ranks = cost.by_rank
    if len(ranks) > MAX_RANKS_LISTED:
        low_in, high_in = min(r.bytes_in for r in ranks), max(r.bytes_in for r in ranks)
        low_out, high_out = min(r.bytes_out for r in ranks), max(r.bytes_out for r in ranks)
        text.append(f"\n{format_bytes(low_in)}–{format_bytes(high_in)} in → "
                    f"{format_bytes(low_out)}–{format_bytes(high_out)} out ({len(ranks)} ranks)")
        return text
    for r in ranks:
        took = f" {seconds(r.seconds)}" if r.seconds is not None else ""
        text.append(f"\nr{r.rank} {format_bytes(r.bytes_in)} → {format_bytes(r.bytes_out)}{took}",
                    "bold" if r.rank == cost.slowest else "")
        if r.rank == cost.slowest:
            text.append(" slowest", "dim")
    return text


def _factor(op: str, n: int) -> str:
    """The bus factor's value as a fraction with this run's n."""
    if op == "all_reduce":
        return f"2·{n - 1}/{n}"
    if op in ("broadcast", "reduce"):
        return "1"
    return f"{n - 1}/{n}"


def _factor_name(op: str) -> str:
    """The bus factor's formula."""
    if op == "all_reduce":
        return "2(n−1)/n"
    if op in ("broadcast", "reduce"):
        return "1"
    return "(n−1)/n"


class CostPane(TextPane):
    """The step's latest collective call in figures, its headline first; its earlier calls on one
    line. ``compact`` (the projector layout): the headline alone."""

    def __init__(self, *, mask_volatile: bool = False, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.mask_volatile = mask_volatile
        self.compact = False
        self._fields: CostFields | None = None
        self._drawn: tuple[object, ...] | None = None

    def on_resize(self) -> None:
        """A new width may part busbw's line differently (see :func:`cost_headline`)."""
        if self._fields is not None:
            self.show(self._fields)
        super().on_resize()

    def show(self, fields: CostFields) -> None:
        """Render the costs of the step shown; the text is built only where it would differ from the
        one shown (a run's steps repeat their calls, and with them their costs)."""
        self._fields = fields
        costs = fields.costs
        if not costs:
            self._drawn = None
            self.set_title("cost")
            why = _no_cost(fields)
            self.show_text(Text(why, "dim"), quiet=why == NO_CALL)  # a call not ended says which, whole
            return
        latest = costs[-1]
        count = fields.call_count
        self.set_title(f"cost · {count:,} collective call{'s' if count > 1 else ''}"
                       + (" · the latest" if count > 1 else ""))
        width = content_size(self).width
        # the latest call's figures, and the four before it by op and size: what the text shows of them
        drawn = (latest, tuple((c.op, c.algo_bytes) for c in costs[-5:-1]), count, fields.untimed, width, self.compact,
                 self.mask_volatile)
        if drawn == self._drawn:
            return
        self._drawn = drawn
        headline = cost_headline(latest, self.mask_volatile, width or None)
        if self.compact:
            self.show_text(headline, headline)
            return
        text = headline.copy()
        text.append("\n")
        text.append_text(cost_details(latest, self.mask_volatile, fields.untimed))
        earlier = costs[:-1][::-1]
        if earlier:
            listed = ", ".join(f"{c.op} {format_bytes(c.algo_bytes)}" for c in earlier[:4])
            more = f" and {count - 1 - len(earlier[:4]):,} more" if count - 1 > len(earlier[:4]) else ""
            text.append(f"\nbefore it: {listed}{more}", "dim")
        self.show_text(text, headline)
