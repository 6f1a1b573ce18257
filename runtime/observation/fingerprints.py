"""Collective fingerprints: every rank's call at the same place must be the same call.

Ranks number the collectives they issue on each process group (``Collective.group_seq``), so
call #k on a group is one collective seen from every member. Its fingerprint — op, dtype,
element count (for ops whose per-rank count must agree), root and reduce op — must agree across
them; gloo may let a disagreement complete silently (rank 2's reduce_scatter beside the others'
all_reduce returns garbage, exit 0), so :class:`FingerprintCheck` reports it as soon as two calls
at one place are seen to differ: which rank called what, beside what the others called.
:func:`disagreements` finds the same in a whole log on columns (:func:`places_disagreeing`: a
trace's index holds a call's group and number), the check fed only the calls of the places whose
fingerprints differ.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, count
from operator import attrgetter
from typing import Protocol

import numpy as np

from ..wire.protocol import AnyEvent, CallRanks, Collective
from .rank_lists import ranks_text

__all__ = ["SAME_COUNT_OPS", "Disagreement", "FingerprintCheck", "PrintedCall", "BegunCall", "disagreements",
           "checked_calls", "places_disagreeing", "fingerprint_codes"]

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


class PrintedCall(Protocol):
    """What a call's fingerprint reads of it (:func:`fingerprint_codes`): a Collective event, or a
    reader's thin form of one."""

    @property
    def edge(self) -> str: ...
    @property
    def iteration(self) -> int: ...
    @property
    def op(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def root(self) -> int | None: ...
    @property
    def reduce_op(self) -> str | None: ...


class BegunCall(PrintedCall, Protocol):
    """What the check reads of a call's begin: a Collective event, or a reader's thin form of one."""

    @property
    def rank(self) -> int: ...
    @property
    def group(self) -> str: ...
    @property
    def group_ranks(self) -> list[int]: ...
    @property
    def group_seq(self) -> int: ...


def fingerprint(event: PrintedCall | CallRanks) -> str:
    """What must agree across ranks, as the text the report shows: ``all_reduce(float32 ×8, sum)``."""
    return _fingerprint_text(event.op, event.dtype, event.count, event.root, event.reduce_op)


def _fingerprint_text(op: str, dtype: str, count: int, root: int | None, reduce_op: str | None) -> str:
    """:func:`fingerprint` of a call with these fields."""
    parts = [dtype]
    if op in SAME_COUNT_OPS:
        parts[0] += f" ×{count}"
    if root is not None:
        parts.append(f"root {root}")
    if reduce_op is not None:
        parts.append(reduce_op)
    return f"{op}({', '.join(parts)})"


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
                self._called(event, event.issued, event.t_ns if now_ns is None else now_ns)
            return
        if type(event) is Collective and event.edge == "begin" and event.iteration == 0:
            self._observe_begun(event, event.t_ns if now_ns is None else now_ns)

    def _observe_begun(self, event: BegunCall, seen_ns: int) -> None:
        """Record the start of a call (the first iteration's), seen at ``seen_ns``."""
        self._called(event, (event.rank,), seen_ns)

    def _called(self, event: BegunCall | CallRanks, ranks: Sequence[int], seen_ns: int) -> None:
        """Note that ``ranks`` began ``event``'s call as it says (one fingerprint for all of them),
        seen at ``seen_ns``."""
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
            place.first_split_ns = seen_ns
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


def disagreements(calls: Sequence[BegunCall]) -> list[Disagreement]:
    """Every disagreement among a whole log's ``calls`` (Collective events, or a reader's thin
    ones; for a replay of a trace that predates the check), as :class:`FingerprintCheck` reports
    them. Found on columns (:func:`places_disagreeing`), the check fed only the calls of the
    places whose fingerprints differ."""
    names: dict[str, int] = {}
    groups = np.fromiter(map(names.setdefault, map(_GROUP, calls), count()), np.int64, len(calls))
    seqs = np.fromiter(map(_GROUP_SEQ, calls), np.int64, len(calls))
    suspect = places_disagreeing(groups, seqs, fingerprint_codes(calls, {}))
    return checked_calls(compress(calls, suspect.tolist()))


def checked_calls(calls: Iterable[BegunCall]) -> list[Disagreement]:
    """Every disagreement among the begins of first iterations ``calls`` (in log order), as
    :class:`FingerprintCheck` reports them at the end of a log."""
    check = FingerprintCheck()
    for call in calls:
        check._observe_begun(call, 0)
    return check.check()


def places_disagreeing(groups: np.ndarray, seqs: np.ndarray, prints: np.ndarray) -> np.ndarray:
    """Which calls (bool) lie at a place whose calls' fingerprints differ, given each call's group
    (``groups``: any int64 that names it: a trace index's column), ``group_seq`` (``seqs``) and
    fingerprint (``prints``: :func:`fingerprint_codes`; -1, a call the check ignores). A place
    (group, number) whose counted calls share one fingerprint (a rank calling there twice
    included) holds no disagreement, so only the calls marked need the check."""
    counted = np.flatnonzero(prints >= 0)
    suspect = np.zeros(prints.size, bool)
    if counted.size < 2:
        return suspect
    order = counted[np.lexsort((seqs[counted], groups[counted]))]
    group, seq, printed = groups[order], seqs[order], prints[order]
    same_place = (group[1:] == group[:-1]) & (seq[1:] == seq[:-1])
    places = np.concatenate(([0], np.cumsum(~same_place)))  # each sorted call's place, numbered
    odd = places[1:][same_place & (printed[1:] != printed[:-1])]
    suspect[order] = np.isin(places, odd)
    return suspect


def fingerprint_codes(calls: Sequence[PrintedCall], texts: dict[str, int]) -> np.ndarray:
    """Each call's fingerprint (int64) as its number in ``texts`` (a table shared by every batch of
    one log's calls, grown here): -1 for a call that is not the begin of a first iteration (the
    check ignores those)."""
    seen: dict[tuple, int] = {}  # each distinct tuple of fields: the first call holding it
    firsts = np.fromiter(map(seen.setdefault, map(_PRINTED, calls), count()), np.int64, len(calls))
    code_of = np.full(len(calls), -1, np.int64)
    for (edge, iteration, *fields), first in seen.items():
        if edge == "begin" and iteration == 0:
            code_of[first] = texts.setdefault(_fingerprint_text(*fields), len(texts))
    return code_of[firsts]


_GROUP = attrgetter("group")
_GROUP_SEQ = attrgetter("group_seq")
_PRINTED = attrgetter("edge", "iteration", "op", "dtype", "count", "root", "reduce_op")
