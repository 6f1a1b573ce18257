"""Running a bench session without a screen: one progress line per size on stderr, the table on stdout."""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from typing import TextIO

from .bench_report import bench_report, bench_row, render_json, render_table
from .launch import Session
from .protocol import AnyEvent, Check, Collective, Phase

__all__ = ["run_bench"]


def run_bench(session: Session, *, as_json: bool = False, explain: bool = False,
              out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Start ``session`` (a bench plan), print progress as each size completes, then the report.

    Returns the run's exit status, or 1 when it finished but some result was wrong. Ctrl-C stops
    every worker and still prints the rows collected so far.
    """
    events: list[AnyEvent] = []
    by_phase: dict[int, list[AnyEvent]] = defaultdict(list)
    ended: Counter[int] = Counter()
    world_size, phase_count = session.plan.world_size, session.plan.program.phase_count
    session.start()
    try:
        while not session.finished:
            for event in session.poll(0.1):
                events.append(event)
                if isinstance(event, (Collective, Check)):
                    by_phase[event.phase].append(event)
                elif isinstance(event, Phase) and event.edge == "end":
                    ended[event.index] += 1
                    if ended[event.index] == world_size:
                        _progress(err, event.index, phase_count, by_phase[event.index], world_size)
    except KeyboardInterrupt:
        session.stop()
        events.extend(session.poll(0))
    report = bench_report(events)
    print(render_json(report) if as_json else render_table(report, explain=explain), file=out, flush=True)
    outcome = session.outcome
    if outcome.status != "ok":
        hint = f" (worker logs: {session.log_dir})" if outcome.status == "failed" else ""
        print(f"collviz: {outcome.detail}{hint}", file=err, flush=True)
    if session.plan.record is not None:
        print(f"collviz: trace written to {session.plan.record}", file=err, flush=True)
    if outcome.exit_code == 0 and report.wrong_total:
        print(f"collviz: {report.wrong_total} result elements were wrong", file=err, flush=True)
        return 1
    return outcome.exit_code


def _progress(err: TextIO, index: int, count: int, phase_events: list[AnyEvent], world_size: int) -> None:
    row = bench_row(phase_events, world_size)
    if row is None:
        return
    print(f"collviz: bench {index + 1}/{count} {row.op} {row.size} B: {row.time_us:.1f} µs, "
          f"busbw {row.busbw_gbps:.3f} GB/s", file=err, flush=True)
