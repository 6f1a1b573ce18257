"""Where the step keys move the cursor, and the replay speeds: pure functions of the log."""

from __future__ import annotations

import gc
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from contextlib import contextmanager

from collviz.runtime.reports.bench_table import is_bench_log

from .log import EventLog
from .view import ViewState, step_at, view_at

__all__ = ["SPEEDS", "next_boundary", "previous_boundary", "seek_step", "seek_call", "call_range", "first_collective",
           "exchange_steps", "next_exchange",
           "faster", "slower",
           "step_pieces", "ViewAhead", "paused_collector"]

SPEEDS: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
"""Replay speeds in steps per second, slowest first."""


def next_boundary(log: EventLog, cursor: int) -> int:
    """The first step boundary after ``cursor`` (the end of the log if there is none)."""
    stops = log.boundaries()
    at = bisect_right(stops, cursor)
    return stops[at] if at < len(stops) else len(log)


def previous_boundary(log: EventLog, cursor: int) -> int:
    """The frame of the step before the one shown at ``cursor``: the end of that step (0 before
    the first). From the end of the log this is the step before the last, never the last again,
    and from anywhere in step k it is step k−1's end, whichever way the cursor got there."""
    shown = step_at(log, cursor)
    ends = log.step_ends
    if shown == 0 or not ends:
        return 0
    return ends[min(shown, len(ends)) - 1]


def seek_step(log: EventLog, number: int) -> int:
    """The cursor at the end of step ``number`` (1-based, clamped); the log's end if not reached."""
    if number <= 0:
        return 0
    ends = log.step_ends
    if number <= len(ends):
        return ends[number - 1]
    return len(log)


def call_range(log: EventLog) -> tuple[int, int] | None:
    """The lowest and highest call number of the run's collective calls so far (calls are numbered
    per process group, #1 first; a trace recorded before 2026-11-28 numbers collviz's own from
    #0); None: no call yet."""
    numbers = [number for phase in log.phases.values() for _, number in phase.call_keys]
    return (min(numbers), max(numbers)) if numbers else None


def seek_call(log: EventLog, number: int) -> tuple[int, list[str]] | None:
    """Where call #``number`` is: the cursor at the end of the first step that ran a call of that
    number (on any process group; the log's end while that step runs), and the groups with a call
    of that number, that step's first; None where no call has it."""
    places = sorted((step, group) for step, phase in log.phases.items() for group, seq in phase.call_keys
                    if seq == number)
    if not places:
        return None
    step = places[0][0]
    groups = list(dict.fromkeys(group for _, group in places))
    return (log.step_ends[step] if step < len(log.step_ends) else len(log)), groups


def first_collective(log: EventLog) -> int | None:
    """The cursor at the end of the first step that moved data between ranks (see
    :func:`exchange_steps`; None: no step did, or the run is a bench sweep, whose plot is the whole
    sweep): where a finished run opens, since a run's last step (its unobserved timed steps, its
    checks) is its emptiest, and where a lesson built of hops starts (a ring all-reduce at hop 1, a
    pipeline at its first microbatch)."""
    if log.run_start is not None and is_bench_log((log.run_start,)):
        return None
    steps = exchange_steps(log)
    return log.step_ends[steps[0]] if steps else None


def exchange_steps(log: EventLog) -> list[int]:
    """The steps (0-based, ended) that moved data between ranks, in order: a collective call, a
    hop of one (a ring's send/recv) or a pipeline schedule's microbatches."""
    ended = len(log.step_ends)
    return [number for number, phase in sorted(log.phases.items())
            if number < ended and (phase.call_firsts or phase.transfers.index or phase.spans.index)]


def next_exchange(log: EventLog, cursor: int, direction: int) -> int | None:
    """The cursor at the end of the next (``direction`` 1) or previous (-1) step that moved data
    (:func:`exchange_steps`) from the step shown at ``cursor``; None where there is none."""
    shown = step_at(log, cursor)
    steps = exchange_steps(log)
    found = ([n for n in steps if n > shown or (n == shown and cursor < log.step_ends[n])][:1] if direction > 0
             else [n for n in steps if n < shown][-1:])
    return log.step_ends[found[0]] if found else None


def step_pieces(log: EventLog, cursor: int) -> int:
    """How many pipeline spans the step shown at ``cursor`` has so far: the pieces its schedule
    can be stepped through (0 for a step that is not pipelined, even one after such a step that
    keeps its timeline on screen). From the log's indexes alone: nothing is decoded."""
    phase = log.phases.get(step_at(log, cursor))
    return phase.spans.count_upto(cursor) if phase is not None else 0


def faster(speed: float) -> float:
    """The next speed up from ``speed`` (the fastest stays)."""
    at = bisect_right(SPEEDS, speed)
    return SPEEDS[at] if at < len(SPEEDS) else SPEEDS[-1]


def slower(speed: float) -> float:
    """The next speed down from ``speed`` (the slowest stays)."""
    at = bisect_left(SPEEDS, speed)
    return SPEEDS[at - 1] if at > 0 else SPEEDS[0]


class ViewAhead:
    """The view at the step boundary after the one shown, built while the viewer idles, so that
    stepping on through a finished run or a recorded trace shows a view already made: a first
    visit of a 64-rank step otherwise decodes some 500 events from the file and builds the view
    (two thirds of a cold seek). One view is kept, for the log at the length it had and as far as
    it was filed: a log that has grown since (a live run) or been filed further (a trace read
    after its first frame) makes it stale, never shown."""

    def __init__(self) -> None:
        self._log: EventLog | None = None
        self._key = (-1, -1, -1, -1)
        self._view: ViewState | None = None

    def prepare(self, log: EventLog, cursor: int, tail: int) -> None:
        """Build the view of ``log`` at the boundary after ``cursor`` (``tail``: as
        :func:`~.view.view_at` takes it), unless it is built already or there is none; the
        cyclic collector paused, as for a frame."""
        target = next_boundary(log, cursor)
        key = (len(log), log.filed, target, tail)
        if target != cursor and (log is not self._log or key != self._key):
            with paused_collector():
                self._log, self._key, self._view = log, key, view_at(log, target, tail)

    def take(self, log: EventLog, cursor: int, tail: int) -> ViewState | None:
        """The view built ahead if it is the one at ``cursor`` of ``log`` as it is now, else None."""
        return self._view if log is self._log and self._key == (len(log), log.filed, cursor, tail) else None

    def view(self, log: EventLog, cursor: int, tail: int) -> ViewState:
        """The view of ``log`` at ``cursor``: the one built ahead if it is that one, else built now."""
        return self.take(log, cursor, tail) or view_at(log, cursor, tail)


@contextmanager
def paused_collector() -> Iterator[None]:
    """The cyclic collector paused while a view is built, enabled again after if it was: a first
    visit of a 64-rank step decodes some 500 events (tens of thousands of objects, most kept in the
    store's cache), which set off dozens of collections mid-build, each rescanning what the last
    ones kept (3 ms of a 15 ms seek); paused, one collection follows."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
