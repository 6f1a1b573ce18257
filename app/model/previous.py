"""A rank's buffer reports before its latest, as the view shows them beside it: a ring's ``x``
before a hop, an in-place all-reduce's input (:attr:`~.view.RankView.previous`). Read from the
trace only when something shows them (a rank panel or a rank's detail), every rank's at once."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Union, overload
from weakref import WeakKeyDictionary

from collviz.runtime.wire.protocol import Buffer, Freed, thin_event_type

from .log import EventLog, Series
from .thin import read_thin

__all__ = ["Candidate", "PreviousBuffers", "PreviousReports"]

_BufferMoment: Any = Union[thin_event_type(Buffer, ("phase", "moment")), thin_event_type(Freed, ("phase",))]
"""What telling a buffer's report before the latest apart reads of it (a Freed has no moment)."""

_MOMENTS: WeakKeyDictionary[EventLog, dict[int, str | None]] = WeakKeyDictionary()
"""Per log, the moment of each buffer report read thin so far, by log position (None: a free): a
step seen again reads none of them again (64 a 64-rank frame: a quarter of a millisecond)."""

Candidate = tuple[Series[Buffer | Freed], int, Buffer]
"""A buffer's series, the position in it of its latest report (of the step shown, not the first), and that report."""


def _previous_reports(log: EventLog, candidates: list[list[Candidate]]) -> list[list[Buffer]]:
    """Per rank, the report before each candidate's latest that the view shows beside it: of an
    earlier step, or of another moment of this one, holding other data. The moments of the
    reports of the same step are read thin, every rank's at once: a 64-rank flood's are all this
    step's ``after`` (decoded whole, 128 values each, a first visit paid for 64 of them)."""
    known = _MOMENTS.setdefault(log, {})
    unread = [series.index[at - 1] for found in candidates for series, at, _ in found
              if series.phase[at - 1] == series.phase[at] and series.index[at - 1] not in known]
    known.update(zip(unread, (getattr(event, "moment", None) for event in read_thin(log.events, unread, _BufferMoment))))
    shown: list[list[Buffer]] = []
    for found in candidates:
        previous: list[Buffer] = []
        for series, at, latest in found:
            if series.phase[at - 1] == series.phase[at] and known[series.index[at - 1]] in (None, latest.moment):
                continue  # the same moment of the same step (or a free): nothing to show beside it
            prior = series.events[at - 1]
            if isinstance(prior, Buffer) and _changed(prior, latest):
                previous.append(prior)
        shown.append(previous)
    return shown


class PreviousReports:
    """Every rank's reports shown beside its latest (:func:`_previous_reports`), read for all ranks
    at once when one rank's are first asked for. A view of many ranks draws them as a heatmap,
    which shows none (only a panel or a rank's detail does): a cold 64-rank view then reads none of
    the 64 records their moments are in."""

    def __init__(self, log: EventLog, candidates: list[list[Candidate]]) -> None:
        self._candidates = candidates
        self._unread: EventLog | None = log
        self._found: list[tuple[Buffer, ...]] = []

    def per_rank(self) -> list[Sequence[Buffer]]:
        """Each rank's reports before: empty where the rank has no candidate, else read when asked."""
        return [PreviousBuffers(self, at) if found else () for at, found in enumerate(self._candidates)]

    def of(self, at: int) -> tuple[Buffer, ...]:
        """Rank ``at``'s (its place in the view) reports before, every rank's read on the first call."""
        if self._unread is not None:
            self._found = [tuple(shown) for shown in _previous_reports(self._unread, self._candidates)]
            self._unread, self._candidates = None, []
        return self._found[at]


class PreviousBuffers(Sequence[Buffer]):
    """One rank's :attr:`RankView.previous`, read when first indexed, iterated or compared (as a
    tuple of Buffers)."""

    __slots__ = ("_reports", "_at")

    def __init__(self, reports: PreviousReports, at: int) -> None:
        self._reports = reports
        self._at = at

    def __len__(self) -> int:
        return len(self._reports.of(self._at))

    @overload
    def __getitem__(self, at: int) -> Buffer: ...

    @overload
    def __getitem__(self, at: slice) -> tuple[Buffer, ...]: ...

    def __getitem__(self, at: int | slice) -> Buffer | tuple[Buffer, ...]:
        return self._reports.of(self._at)[at]

    def __iter__(self) -> Iterator[Buffer]:
        return iter(self._reports.of(self._at))

    def __eq__(self, other: object) -> bool:
        found = self._reports.of(self._at)
        return found == (tuple(other) if isinstance(other, PreviousBuffers) else other)

    def __hash__(self) -> int:
        return hash(self._reports.of(self._at))

    def __repr__(self) -> str:
        return repr(self._reports.of(self._at))


def _changed(before: Buffer, after: Buffer) -> bool:
    """Whether ``after`` holds other data than ``before`` (the same buffer, reported again): their
    values, else their checksums; False where neither tells."""
    if before.values is not None and after.values is not None:
        return before.values != after.values
    if before.summary is not None and after.summary is not None:
        return before.summary.crc32 != after.summary.crc32
    return False
