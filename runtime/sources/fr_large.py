"""A Flight Recorder import too large to hold as events (a whole job: 1,024 ranks × 2,000 calls).

The checks read the whole :class:`~.call_table.CallTable` (:mod:`.call_checks`), the headless
summary is made from it (:class:`~.table_summary.TableSummary`), and the events — what the viewer
and ``collviz export`` show — are those of the job's last steps only, where it stopped (a hang is
in each rank's last calls), as many as :data:`~.flight_recorder.EVENTS_UP_TO` calls; a warning
says which steps they are. The Stall, Mismatch, RankEnd and RunEnd events are the whole job's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ..wire.protocol import AnyEvent
from .call_checks import find_problems
from .fr_table import JobTable
from .run import ImportedRun, Origin, Step, emit_steps, finish_run, no_progress, start_run
from .table_summary import TableSummary

__all__ = ["large_run"]


def large_run(origin: Origin, job: JobTable, warnings: list[str], ranks: Sequence[int], missing: Mapping[int, str],
              steps_of: Callable[[JobTable, Sequence[int]], list[Step]], most_calls: int) -> ImportedRun:
    """The run ``job`` describes: its verdict and summary from the whole table, its events for
    the last steps that hold at most ``most_calls`` calls (``steps_of`` builds them)."""
    table = job.table
    findings = find_problems(table, job.step_names, job.last_step, missing, origin.world_size, origin.check_calls,
                             warnings, origin.failed.accounts)
    shown = _last_steps(table.step_starts(), most_calls)
    if len(shown) < table.step_count:
        warnings.append(f"{len(table):,} calls on {len(ranks):,} ranks, more than the {most_calls:,} the viewer takes: "
                        f"it and export show the last {len(shown):,} of {table.step_count:,} steps "
                        f"({job.step_names[shown[0]]} to {job.step_names[shown[-1]]}), where the job stopped; "
                        "the summary (--headless, --json) covers every call")
    start_ns = int(table.t_ns.min())
    end_ns = int((table.t_ns + np.where(table.completed & (table.duration_ns > 0), table.duration_ns, 0)).max())

    def events() -> list[AnyEvent]:
        steps = steps_of(job, shown)
        stamp = start_run(origin, len(steps), start_ns, ranks, missing)
        last = emit_steps(stamp, steps, no_progress)  # built when the viewer asks, after the import's progress line is gone
        return finish_run(stamp, origin, table, findings, ranks, last, end_ns, []).events

    frame = finish_run(start_run(origin, table.step_count, start_ns, ranks, missing), origin, table, findings, ranks,
                       job.last_step, end_ns, warnings).events
    calls_events = 2 * len(table) + 2 * int(table.completed.sum())  # Phase and Collective begins; ends where completed
    summary = TableSummary.of(table, job.step_names, frame, calls_events)
    return ImportedRun(origin.scenario, events, warnings, 1 if findings.failed else 0, summary)


def _last_steps(starts: np.ndarray, most_calls: int) -> list[int]:
    """The last steps whose calls together are at most ``most_calls`` (at least the last step)."""
    sizes = np.diff(starts)[::-1]
    count = max(1, int(np.searchsorted(np.cumsum(sizes), most_calls, side="right")))
    return list(range(len(sizes) - count, len(sizes)))
