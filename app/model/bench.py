"""The bench view: busbw-versus-size series of a ``collviz bench`` run, at any cursor.

Rows come from :func:`collviz.runtime.reports.bench_table.bench_row` (the function ``bench_report`` builds
its table with) applied to each phase's ``Collective`` and ``Check`` events that lie before the
cursor, in phases up to the step shown, exactly as the headless table would compute them from
those events. Nothing here computes a bandwidth itself.

A phase's events are found with bisections over the log's per-rank and per-phase indexes, and a
phase's row is recomputed only when the set of its events before the cursor changed, so a frame
costs a few bisections per phase and rank, not a pass over the log.
"""

from __future__ import annotations

import weakref
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from collviz.runtime.reports.bench_table import BenchRow, bench_row, is_bench_log
from collviz.runtime.observation.metrics import bus_factor_text
from collviz.runtime.wire.protocol import AnyEvent

from .log import EventLog, Series

__all__ = ["BenchSeries", "BenchView", "bench_at"]


@dataclass(frozen=True)
class BenchSeries:
    """One operation's points so far (one algorithm's, with ``bench --algo``): its rows in sweep
    order and its busbw factor as text. ``op`` is the curve's label: ``all_reduce``, ``all_reduce ring``."""

    op: str
    factor_text: str
    rows: tuple[BenchRow, ...]

    @property
    def points(self) -> tuple[tuple[int, float], ...]:
        """(size S in bytes, busbw in GB/s) per row."""
        return tuple((row.size, row.busbw_gbps) for row in self.rows)


@dataclass(frozen=True)
class BenchView:
    """What the bench plot shows at the cursor.

    ``series``: one per operation (and algorithm) of the sweep, in the order the run declared them
    (one whose first size has not run yet has no points). ``rows``: every row so far, in phase order.
    ``cases``: the number of (operation, size) cases the run declared; ``world_size`` the ranks.
    """

    world_size: int
    cases: int
    rows: tuple[BenchRow, ...]
    series: tuple[BenchSeries, ...]


_Key = tuple[int, tuple[int, ...], int]
_row_cache: weakref.WeakKeyDictionary[EventLog, dict[int, tuple[_Key, BenchRow | None]]] = weakref.WeakKeyDictionary()
"""Per log, per phase: which of the phase's events the cached row was computed from, and the row."""


def _phase_range(series: Series, phase: int, cursor: int) -> tuple[int, int]:
    """Positions ``[lo, hi)`` in ``series`` of its events of ``phase`` that lie before ``cursor``."""
    lo = bisect_left(series.phase, phase)
    hi = min(bisect_right(series.phase, phase), bisect_left(series.index, cursor))
    return lo, max(lo, hi)


def _phase_row(log: EventLog, phase: int, cursor: int, cache: dict[int, tuple[_Key, BenchRow | None]]) -> BenchRow | None:
    """The row of ``phase`` from its events before ``cursor`` (cached until that set changes)."""
    ranks = [log.ranks[number] for number in sorted(log.ranks)]
    ranges = [_phase_range(index.collectives, phase, cursor) for index in ranks]
    index = log.phases.get(phase)
    checks = index.checks.count_upto(cursor) if index is not None else 0
    key = (log.world_size, tuple(hi - lo for lo, hi in ranges), checks)
    cached = cache.get(phase)
    if cached is not None and cached[0] == key:
        return cached[1]
    found: list[tuple[int, AnyEvent]] = []
    for rank, (lo, hi) in zip(ranks, ranges):
        found.extend(zip(rank.collectives.index[lo:hi], rank.collectives.events[lo:hi]))
    if index is not None:
        found.extend(zip(index.checks.index[:checks], index.checks.events[:checks]))
    found.sort(key=lambda pair: pair[0])
    row = bench_row([event for _, event in found], log.world_size)
    cache[phase] = (key, row)
    return row


def _factor_text(op: str, world_size: int) -> str:
    """The busbw factor of ``op`` as its formula (``?`` for an operation metrics does not know)."""
    try:
        return bus_factor_text(op, world_size)
    except ValueError:
        return "?"


def bench_at(log: EventLog, cursor: int, step: int) -> BenchView | None:
    """The bench view of ``log`` after its first ``cursor`` events, phases up to ``step``; None
    when the log is not a bench run's."""
    start = log.run_start
    if start is None or not is_bench_log((start,)):
        return None
    cache = _row_cache.setdefault(log, {})
    rows = tuple(row for phase in sorted(log.phases) if phase <= step
                 if (row := _phase_row(log, phase, cursor, cache)) is not None)
    declared = [op for op in str(start.options.get("ops", "")).split(",") if op]
    algos = [algo for algo in str(start.options.get("algos", "library")).split(",") if algo] or ["library"]
    keys = list(dict.fromkeys([*((op, algo) for op in declared for algo in algos), *((r.op, r.algo) for r in rows)]))
    series = tuple(
        BenchSeries(op=op if algo == "library" else f"{op} {algo}", factor_text=_factor_text(op, log.world_size),
                    rows=tuple(r for r in rows if (r.op, r.algo) == (op, algo)))
        for op, algo in keys
    )
    cases = int(start.options.get("cases", 0) or 0)
    return BenchView(world_size=log.world_size, cases=max(cases, len(rows)), rows=rows, series=series)
