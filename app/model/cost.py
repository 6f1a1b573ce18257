"""What each collective of a step cost: bytes per rank, time, algbw and busbw.

Every figure comes from the run's events. A call's time is the slowest rank's measured duration
(the median over repeated calls of ``--iters``); where the backend only *enqueued* the work (the
``c10d`` ops FSDP2 issues: their Collective events carry no duration) it is the slowest rank's
time for the whole phase, and :attr:`CallCost.timed` says so. algbw and busbw follow nccl-tests'
definitions (:mod:`collviz.runtime.observation.metrics`).
"""

from __future__ import annotations

import statistics
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Literal

from collviz.runtime.observation.metrics import Bandwidth, bandwidth, bus_factor
from collviz.runtime.wire.protocol import Collective, Phase

from .log import EventLog

__all__ = ["CallCost", "costs_at"]

Timing = Literal["call", "phase", "unknown"]


@dataclass(frozen=True)
class CallCost:
    """One collective call of a step, across the ranks that reported it.

    ``bytes_in``/``bytes_out``: the largest per-rank input and output (a root's, for rooted ops).
    ``algo_bytes``: S of nccl-tests. ``seconds``/``timed``: the time and what it measured ("call":
    the slowest rank's call; "phase": the slowest rank's phase, the call having only been enqueued;
    "unknown": not yet). ``calls``: timed repetitions (the median is used). ``reported``: ranks
    whose end event arrived. ``rate``: algbw/busbw where an op has a bus factor and a time.
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


def costs_at(log: EventLog, cursor: int, step: int) -> tuple[CallCost, ...]:
    """The cost of every collective call of phase ``step`` whose end was seen before ``cursor``,
    in the order the calls were issued."""
    phase = log.phases.get(step)
    if phase is None:
        return ()
    ends: list[Collective] = phase.collectives.events[: phase.collectives.count_upto(cursor)]
    calls: dict[tuple[str, int], list[Collective]] = {}
    for event in ends:
        calls.setdefault((event.group, event.group_seq), []).append(event)
    phase_time: float | None = None
    costs = []
    for events in calls.values():
        first = events[0]
        per_iteration: dict[int, int] = {}
        for event in events:
            if event.duration_ns is not None:
                per_iteration[event.iteration] = max(per_iteration.get(event.iteration, 0), event.duration_ns)
        if per_iteration:
            seconds, timed = statistics.median(per_iteration.values()) / 1e9, "call"
        else:
            phase_time = phase_time if phase_time is not None else _phase_seconds(log, cursor, step)
            seconds, timed = phase_time, "phase" if phase_time is not None else "unknown"
        ranks = len(first.group_ranks) or log.world_size
        costs.append(CallCost(
            op=first.op, group=first.group, ranks=ranks, dtype=first.dtype,
            bytes_in=max(e.bytes_in for e in events), bytes_out=max(e.bytes_out for e in events),
            algo_bytes=max(e.algo_bytes for e in events), seconds=seconds, timed=timed,
            calls=max(len(per_iteration), 1), reported=len({e.rank for e in events}),
            rate=_rate(first.op, ranks, max(e.algo_bytes for e in events), seconds),
        ))
    return tuple(costs)
