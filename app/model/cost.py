"""What each collective of a step cost: bytes per rank, time, algbw and busbw.

Every figure comes from the run's events. A call's time is the slowest rank's measured duration
(the median over repeated calls of ``--iters``), and the cost names that rank; where the backend
only *enqueued* the work (its Collective events carry no duration) it is the slowest rank's time
for the whole phase, and :attr:`CallCost.timed` says so — unless the run is an imported artifact
that records no durations (its RunStart says why, :data:`UNTIMED_OPTION`): its phases are as
untimed as its calls, so such a call has no time at all. Each rank's own bytes and time are kept
(:attr:`CallCost.by_rank`): with uneven splits (all-to-all in a mixture of experts) there is no
"per rank" figure, so S is then the slowest rank's own. algbw and busbw follow nccl-tests'
definitions (:mod:`collviz.runtime.observation.metrics`).
"""

from __future__ import annotations

import statistics
from functools import partial
from itertools import groupby
from operator import attrgetter
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple, cast

from collviz.runtime.observation.metrics import Bandwidth, bandwidth, bus_factor
from collviz.runtime.wire.protocol import UNTIMED_OPTION, Collective, Phase, thin_event_type

from .log import EventLog
from .thin import read_thin

__all__ = ["CallCost", "RankCost", "costs_at", "MAX_CALLS"]

MAX_CALLS = 5
"""Most calls of one step whose costs the view carries: the latest, which the cost pane works
through, and the four before it that it names (each costs a decode of its ranks' events per
frame: at 64 ranks, 64 events a call)."""

Timing = Literal["call", "phase", "unknown", "absent"]

_CallEnd = thin_event_type(Collective, ("op", "group", "group_seq", "dtype", "bytes_in", "bytes_out", "algo_bytes",
                                        "iteration", "duration_ns", "clock"))
"""What a call's cost reads of each rank's end event (its group's ranks are read once per call)."""


class RankCost(NamedTuple):
    """One rank's part of a call: its bytes in and out, S as it counts it, and its own time (the
    median of its repetitions; None where not measured). A tuple: a 64-rank step's first visit
    makes 320 of them, at half a dataclass's cost each."""

    rank: int
    bytes_in: int
    bytes_out: int
    algo_bytes: int
    seconds: float | None


@dataclass(frozen=True)
class CallCost:
    """One collective call of a step, across the ranks that reported it.

    ``bytes_in``/``bytes_out``: the largest per-rank input and output (a root's, for rooted ops).
    ``algo_bytes``: S of nccl-tests (with uneven splits, the slowest rank's own). ``seconds``/
    ``timed``: the time and what it measured ("call": the slowest rank's call; "phase": the slowest
    rank's phase, the call having only been enqueued; "unknown": not yet; "absent": the imported
    artifact records no time for it). ``calls``: timed
    repetitions (the median is used). ``reported``: ranks whose end event arrived. ``rate``:
    algbw/busbw where an op has a bus factor and a time. ``by_rank``: each rank's own figures;
    ``slowest``: the rank whose time is ``seconds`` (None: not timed per call); ``clock``: how the
    time was measured (``host``, ``gpu``, or empty).
    """

    op: str
    group: str
    ranks: int
    dtype: str
    bytes_in: int
    bytes_out: int
    algo_bytes: int
    seconds: float | None
    timed: Timing
    calls: int
    reported: int
    rate: Bandwidth | None
    by_rank: tuple[RankCost, ...] = ()
    slowest: int | None = None
    clock: str = ""

    @property
    def even(self) -> bool:
        """Whether every rank moved the same bytes (so "per rank" means something)."""
        return len({(r.bytes_in, r.bytes_out) for r in self.by_rank}) <= 1


def _phase_seconds(log: EventLog, cursor: int, step: int) -> float | None:
    """The slowest rank's time in phase ``step``, from its begin and end events before ``cursor``."""
    slowest = None
    for index in log.ranks.values():
        series = index.phases
        low, high = bisect_left(series.phase, step), bisect_right(series.phase, step)
        begin = end = None
        for position in range(low, high):
            if series.index[position] >= cursor:
                break
            event: Phase = series.events[position]
            if event.edge == "begin":
                begin = event.t_ns
            else:
                end = event.t_ns
        if begin is not None and end is not None and end >= begin:
            slowest = max(slowest or 0, end - begin)
    return None if slowest is None else slowest / 1e9


def _rate(op: str, ranks: int, size: int, seconds: float | None) -> Bandwidth | None:
    try:
        bus_factor(op, ranks)
    except ValueError:
        return None
    return bandwidth(op, ranks, size, seconds) if seconds and size else None


def costs_at(log: EventLog, cursor: int, step: int) -> tuple[tuple[CallCost, ...], int]:
    """The cost of the last :data:`MAX_CALLS` collective calls of phase ``step`` whose end was seen
    before ``cursor`` (in the order they were issued), and how many calls the step has so far.

    Only the shown calls' events are read (those after the first shown call's first end), and only
    the fields a cost needs (:data:`_CallEnd`), so a phase of thousands of calls costs no more per
    frame than one of a few.
    """
    phase = log.phases.get(step)
    if phase is None:
        return (), 0
    ended = phase.collectives.count_upto(cursor)
    cached = phase.costs
    if cached is not None and cached[0] == ended and cached[1] == len(phase.call_firsts):
        return cached[2], cached[3]
    calls = bisect_left(phase.call_firsts, cursor)
    first = max(0, calls - MAX_CALLS)
    shown = phase.call_keys[first:calls]
    if not shown:
        return (), 0
    by_call: dict[tuple[str, int], list[Any]] = {key: [] for key in shown}
    series = phase.collectives
    since = bisect_left(series.index, phase.call_firsts[first], 0, ended)  # the shown calls' ends lie after
    # a grouped live event (CallRanks) is read per rank by its series; a stored trace never holds one
    ends = series.events[since:ended] if series.holds_grouped \
        else read_thin(log.events, series.index[since:ended], _CallEnd)
    for event in reversed(ends):
        found = by_call.get((event.group, event.group_seq))
        if found is not None:
            found.append(event)
    phase_time: float | None = None
    costs = []
    timed_by_phase = False
    recorded = log.run_start is None or UNTIMED_OPTION not in log.run_start.options
    for key, call_first in zip(shown, phase.call_firsts[first:calls]):
        group_ranks = len(series.events[bisect_left(series.index, call_first)].group_ranks) or log.world_size
        cost, needs_phase_time = _cost(by_call[key], group_ranks)
        if needs_phase_time and not recorded:
            cost = replace(cost, timed="absent")
        elif needs_phase_time:
            timed_by_phase = True
            phase_time = phase_time if phase_time is not None else _phase_seconds(log, cursor, step)
            cost = replace(cost, seconds=phase_time, timed="phase" if phase_time is not None else "unknown",
                           rate=_rate(cost.op, cost.ranks, cost.algo_bytes, phase_time))
        costs.append(cost)
    # the same ends make the same costs, unless a call is timed by the phase so far (the cursor's)
    phase.costs = None if timed_by_phase else (ended, len(phase.call_firsts), tuple(costs), calls)
    return tuple(costs), calls


_RANK, _DURATION = attrgetter("rank"), attrgetter("duration_ns")
_rank_cost_of = partial(tuple.__new__, RankCost)
"""A RankCost of a row of its fields, made in C (``RankCost._make`` runs Python code a rank)."""
_BYTES_IN, _BYTES_OUT, _ALGO_BYTES = attrgetter("bytes_in"), attrgetter("bytes_out"), attrgetter("algo_bytes")
_ITERATION, _CLOCK, _SECONDS = attrgetter("iteration"), attrgetter("clock"), attrgetter("seconds")
_NANOSECONDS = 1e9
"""Nanoseconds a second (``_NANOSECONDS.__rtruediv__`` maps durations in ns to seconds, in C)."""


def _rank_cost(rank: int, own: list[Any]) -> RankCost:
    """One rank's figures over its repetitions of a call: the largest bytes, the median time."""
    durations = [e.duration_ns for e in own if e.duration_ns is not None]
    return RankCost(rank, max(e.bytes_in for e in own), max(e.bytes_out for e in own), max(e.algo_bytes for e in own),
                    statistics.median(durations) / 1e9 if durations else None)


def _cost(events: list[Any], ranks: int) -> tuple[CallCost, bool]:
    """One call's cost from its ranks' end events (each with :data:`_CallEnd`'s fields) on a group of
    ``ranks``; True when its time must come from the phase.

    The ranks' figures built as columns, in C (a 64-rank call is read on every first visit of its
    step: eight generator passes cost 0.3 ms a call, one Python loop a rank still 0.15 ms)."""
    first = events[0]
    durations, iterations = list(map(_DURATION, events)), list(map(_ITERATION, events))
    per_iteration = _slowest_per_iteration(iterations, durations)
    clock = next(filter(None, map(_CLOCK, events)), "")
    ordered = sorted(events, key=_RANK)
    ranks_of = list(map(_RANK, ordered))
    if len(set(ranks_of)) == len(ordered):  # the common case (one iteration): a cost a rank, built as columns
        ins, outs = list(map(_BYTES_IN, ordered)), list(map(_BYTES_OUT, ordered))
        algos = list(map(_ALGO_BYTES, ordered))
        ordered_durations = list(map(_DURATION, ordered))
        times = list(map(_NANOSECONDS.__rtruediv__, ordered_durations)) if None not in ordered_durations \
            else [None if duration is None else duration / 1e9 for duration in ordered_durations]
        by_rank = list(map(_rank_cost_of, zip(ranks_of, ins, outs, algos, times)))
    else:
        by_rank = [_rank_cost(rank, list(own)) for rank, own in groupby(ordered, key=_RANK)]
        _, ins, outs, algos, _ = map(list, zip(*by_rank))
    timed = by_rank if None not in map(_SECONDS, by_rank) else [cost for cost in by_rank if cost.seconds is not None]
    slowest = max(timed, key=_SECONDS) if timed else None  # the first of the slowest
    seconds = statistics.median(per_iteration.values()) / 1e9 if per_iteration else None
    bytes_in, bytes_out = max(ins), max(outs)
    even = ins.count(ins[0]) == len(ins) and outs.count(outs[0]) == len(outs)  # every rank moved the same
    size = max(algos) if even or slowest is None else slowest.algo_bytes
    cost = CallCost(
        op=first.op, group=first.group, ranks=ranks, dtype=first.dtype, bytes_in=bytes_in, bytes_out=bytes_out,
        algo_bytes=size, seconds=seconds, timed="call" if per_iteration else "unknown",
        calls=max(len(per_iteration), 1), reported=len(by_rank), rate=_rate(first.op, ranks, size, seconds),
        by_rank=tuple(by_rank), slowest=None if slowest is None else slowest.rank, clock=clock,
    )
    return cost, not per_iteration


def _slowest_per_iteration(iterations: list[int], durations: list[int | None]) -> dict[int, int]:
    """iteration → the longest duration measured in it (iterations with none left out), of
    parallel columns; one iteration with every duration measured (the common case) in C."""
    if iterations.count(iterations[0]) == len(iterations) and None not in durations:
        return {iterations[0]: max(cast("list[int]", durations))}
    slowest: dict[int, int] = {}
    for iteration, duration in zip(iterations, durations):
        if duration is not None:
            slowest[iteration] = max(slowest.get(iteration, 0), duration)
    return slowest
