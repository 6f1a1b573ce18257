"""The collective calls of an indexed trace as its summary reads them (:mod:`.indexed`): the
begins only for the check that every rank called the same collective, the ends only where the
text shows them.

:class:`BegunCalls` turns a part's begins, decoded thin (their fingerprint's fields), into codes
beside their group and number from the index's columns, and reads in full only the begins at
places whose fingerprints differ (:func:`~..observation.fingerprints.places_disagreeing`).
:class:`ShownEnds` picks, from the columns, the ends the text summary's call lines read when every
call's first end is timed (:func:`~.summary.render_summary`: a phase's first
:data:`~.summary.SHOWN_CALLS` calls in detail, the others by their first end's op): each call's
first end, and every end of those first calls. Whether that held is known once they are decoded
(:meth:`ShownEnds.serves`); where not, the reader adds the others.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from ..observation.fingerprints import Disagreement, checked_calls, fingerprint_codes, places_disagreeing
from ..wire.columns import NotIntact
from ..wire.protocol import Collective, thin_event_type
from ..wire.stored import StoredEvents
from .summary import SHOWN_CALLS

__all__ = ["PRINTED_DECODER", "BegunCalls", "ShownEnds"]

PRINTED_DECODER = msgspec.msgpack.Decoder(list[thin_event_type(  # type: ignore[misc]
    Collective, ("edge", "iteration", "op", "dtype", "count", "root", "reduce_op"))])
"""Calls' begins as their fingerprint reads them (:class:`~..observation.fingerprints.PrintedCall`)."""


@dataclass
class BegunCalls:
    """The calls' begins of an indexed trace, gathered a part at a time: their log ``positions``,
    groups and numbers (from the columns) and fingerprints (numbered in ``texts``)."""

    positions: list[np.ndarray] = field(default_factory=list)
    groups: list[np.ndarray] = field(default_factory=list)
    seqs: list[np.ndarray] = field(default_factory=list)
    prints: list[np.ndarray] = field(default_factory=list)
    texts: dict[str, int] = field(default_factory=dict)

    def add(self, positions: np.ndarray, groups: np.ndarray, seqs: np.ndarray, printed: list[Any]) -> None:
        """One part's begins: their positions, groups, numbers, and the begins decoded thin
        (:data:`PRINTED_DECODER`)."""
        self.positions.append(positions)
        self.groups.append(groups)
        self.seqs.append(seqs)
        self.prints.append(fingerprint_codes(printed, self.texts))

    def mismatches(self, stored: StoredEvents) -> list[Disagreement]:
        """The calls that disagree, the begins at places whose fingerprints differ read in full
        from ``stored``. Raises NotIntact where the index files as a collective an event that is none."""
        if not self.positions:
            return []
        suspect = places_disagreeing(np.concatenate(self.groups), np.concatenate(self.seqs),
                                     np.concatenate(self.prints))
        calls = [event for event in map(stored.__getitem__, np.concatenate(self.positions)[suspect].tolist())
                 if isinstance(event, Collective)]
        if len(calls) < int(suspect.sum()):
            raise NotIntact("the index files as a collective an event that is none")
        return checked_calls(calls)


@dataclass
class ShownEnds:
    """Which ends of calls the text summary reads, chosen a part at a time in log order: ``detailed``
    says, of each call seen (phase, group, number), whether it is among its phase's first
    :data:`~.summary.SHOWN_CALLS` (``called``: how many calls each phase has)."""

    detailed: dict[tuple[int, int, int], bool] = field(default_factory=dict)
    called: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))

    def pick(self, phases: np.ndarray, groups: np.ndarray, seqs: np.ndarray) -> np.ndarray:
        """Which of one part's ends (their phases, groups and numbers, in log order; bool) to
        decode: each call's first, and every end of a phase's first calls."""
        shown = np.zeros(phases.size, bool)
        if not phases.size:
            return shown
        order = np.lexsort((seqs, groups, phases))  # stable: log order within each call
        phase, group, seq = phases[order], groups[order], seqs[order]
        heads = np.flatnonzero(np.concatenate(([True], (phase[1:] != phase[:-1]) | (group[1:] != group[:-1])
                                               | (seq[1:] != seq[:-1]))))
        calls = list(zip(phase[heads].tolist(), group[heads].tolist(), seq[heads].tolist()))
        detailed = np.zeros(heads.size, bool)
        first = np.zeros(heads.size, bool)
        for at in np.argsort(order[heads], kind="stable").tolist():  # the calls in order of their first end
            call = calls[at]
            if call not in self.detailed:
                self.detailed[call] = self.called[call[0]] < SHOWN_CALLS
                self.called[call[0]] += 1
                first[at] = True
            detailed[at] = self.detailed[call]
        picked = np.repeat(detailed, np.diff(np.append(heads, order.size)))
        picked[heads[first]] = True
        shown[order] = picked
        return shown

    @staticmethod
    def serves(ends: list[Any]) -> bool:
        """Whether the ends decoded (``ends``, Collective ends) are all the text needs: each is timed,
        so each call's first end is its first timed one, and the calls are in the order the text
        lists them."""
        return all(end.duration_ns for end in ends)
