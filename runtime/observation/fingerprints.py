"""Collective fingerprints: every rank's call at the same place must be the same call.

Ranks number the collectives they issue on each process group (``Collective.group_seq``), so
call #k on a group is one collective seen from every member. Its fingerprint — op, dtype,
element count (for ops whose per-rank count must agree), root and reduce op — must agree across
them; gloo may let a disagreement complete silently (rank 2's reduce_scatter beside the others'
all_reduce returns garbage, exit 0), so :class:`FingerprintCheck` reports it as soon as two calls
at one place are seen to differ: which rank called what, beside what the others called.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..wire.protocol import AnyEvent, CallRanks, Collective
from .rank_lists import ranks_text

__all__ = ["SAME_COUNT_OPS", "Disagreement", "FingerprintCheck", "disagreements"]

SAME_COUNT_OPS = frozenset({"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "gather"})
"""Ops whose input element count is the same on every rank (all_to_all may split unevenly, and a
scatter's non-root ranks hold no input)."""


@dataclass(frozen=True)
class Disagreement:
    """Call ``group_seq`` of ``group`` (members ``group_ranks``) differs between ranks.

    ``calls``: rank → its call, as text; ``odd_ranks``: the ranks outside the largest party.
    """

    group: str
    group_ranks: tuple[int, ...]
    group_seq: int
    calls: dict[int, str]
    odd_ranks: list[int]

    @property
    def text(self) -> str:
        """``rank 2 called reduce_scatter(float32 ×8) as call #1 on group world, where ranks 0, 1, 3
        called all_reduce(float32 ×8, sum)``."""
        majority = [r for r in sorted(self.calls) if r not in self.odd_ranks]
        odd = "; ".join(f"rank {r} called {self.calls[r]}" for r in self.odd_ranks)
        others = ranks_text(majority)
        plural = "ranks" if len(majority) > 1 else "rank"
        return (f"collective mismatch at call #{self.group_seq} on group {self.group}: {odd}, "
                f"where {plural} {others} called {self.calls[majority[0]]}")


def fingerprint(event: Collective | CallRanks) -> str:
    """What must agree across ranks, as the text the report shows: ``all_reduce(float32 ×8, sum)``."""
    parts = [event.dtype]
    if event.op in SAME_COUNT_OPS:
        parts[0] += f" ×{event.count}"
    if event.root is not None:
        parts.append(f"root {event.root}")
    if event.reduce_op is not None:
        parts.append(event.reduce_op)
    return f"{event.op}({', '.join(parts)})"


GRACE_S = 0.5
"""How long a disagreement waits for the rest of the group's calls before it is reported (so the
odd rank is told from the majority), unless every member has already called."""


@dataclass
class _Place:
    calls: dict[int, str] = field(default_factory=dict)
    first_split_ns: int | None = None


@dataclass
class FingerprintCheck:
    """Follows Collective events and CallRanks (:meth:`observe`: a CallRanks's issuing ranks at once); :meth:`check` returns each place where calls
    differ once, when every member of the group has called there or :data:`GRACE_S` after the
    difference first showed."""

    _places: dict[tuple[str, tuple[int, ...], int], _Place] = field(default_factory=dict)
    _pending: set[tuple[str, tuple[int, ...], int]] = field(default_factory=set)
    _reported: set[tuple[str, tuple[int, ...], int]] = field(default_factory=set)
    _last_ranks: tuple[list[int], tuple[int, ...]] = field(default_factory=lambda: ([], ()))
    """The last event's rank list and its tuple: an import's events share their group's list, so a
    1,024-rank group's tuple is made once, not once per call and rank."""

    def observe(self, event: AnyEvent, now_ns: int | None = None) -> None:
        """Record ``event`` if it is the start of a call (``now_ns``: when it was seen; its own
        time stamp by default)."""
        if type(event) is CallRanks:
            if event.issued:
                self._called(event, event.issued, now_ns)
            return
        if type(event) is not Collective or event.edge != "begin" or event.iteration != 0:
            return
        self._called(event, (event.rank,), now_ns)

    def _called(self, event: Collective | CallRanks, ranks: Sequence[int], now_ns: int | None) -> None:
        """Note that ``ranks`` began ``event``'s call as it says (one fingerprint for all of them)."""
        if event.group_ranks is not self._last_ranks[0]:
            self._last_ranks = (event.group_ranks, tuple(event.group_ranks))
        key = (event.group, self._last_ranks[1], event.group_seq)
        place = self._places.get(key)
        if place is None:
            place = self._places[key] = _Place()
        called = fingerprint(event)
        split = False
        if place.calls and place.first_split_ns is None and key not in self._reported:
            new = set(ranks) if len(ranks) > 1 else ranks  # until they split, the others' calls agree: one compared
            split = next((call != called for rank, call in place.calls.items() if rank not in new), False)
        place.calls.update(dict.fromkeys(ranks, called))
        if split:
            place.first_split_ns = event.t_ns if now_ns is None else now_ns
            self._pending.add(key)

    def check(self, now_ns: int | None = None) -> list[Disagreement]:
        """Disagreements due now (``None``: all of them, as at the end of a log), each once."""
        due = []
        for key in sorted(self._pending):
            place = self._places[key]
            complete = len(place.calls) >= len(key[1])
            split_ns = place.first_split_ns
            if now_ns is None or complete or split_ns is not None and now_ns - split_ns >= GRACE_S * 1e9:
                due.append(key)
        found = []
        for key in due:
            self._pending.discard(key)
            self._reported.add(key)
            found.append(_disagreement(key, self._places[key].calls))
        return found


def _disagreement(key: tuple[str, tuple[int, ...], int], calls: dict[int, str]) -> Disagreement:
    counts = Counter(calls.values())
    majority = max(counts, key=lambda call: (counts[call], -min(r for r, c in calls.items() if c == call)))
    odd = sorted(r for r, call in calls.items() if call != majority)
    return Disagreement(key[0], key[1], key[2], dict(sorted(calls.items())), odd)


def disagreements(events: Iterable[AnyEvent]) -> list[Disagreement]:
    """Every disagreement in a whole event log (for a replay of a trace that predates the check)."""
    check = FingerprintCheck()
    for event in events:
        check.observe(event)
    return check.check()
