"""Running a session without a screen: progress on stderr, the report on stdout.

Every headless command drives its session through :func:`drive`: start, poll until finished,
Ctrl-C stops every worker and keeps what was collected. :func:`run_headless` prints a scenario's
summary, :func:`run_bench` a bench table, :func:`collect` returns the events silently (``compare``).
"""

from __future__ import annotations

import json
import signal
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import TextIO

from ..errors import EXIT_RECORDING_INCOMPLETE
from ..reports.bench_table import bench_report, bench_row, render_json, render_table
from ..reports.nccl_log import nccl_choices
from ..reports.progress import ProgressLine
from ..reports.summary import render_summary
from ..reports.summary_json import summary_document
from ..reports.warnings import say_warnings, with_warnings
from ..wire.protocol import AnyEvent, Check, Collective, Phase, RunStart, Stall
from .contract import RunOutcome, Session
from .local import LocalSession

__all__ = ["drive", "collect", "run_headless", "run_bench", "report_outcome", "report_recording"]


def drive(session: Session, on_event: Callable[[AnyEvent], None] | None = None) -> list[AnyEvent]:
    """Start ``session`` and return every event it produced, passing each to ``on_event`` as it arrives.

    Ctrl-C stops every worker; the events received so far (and the stop's own) are still returned.
    """
    events: list[AnyEvent] = []
    session.start()
    try:
        while not session.finished:
            batch = session.poll(0.1)
            events.extend(batch)
            if on_event is not None:
                for event in batch:
                    on_event(event)
    except KeyboardInterrupt as interrupt:
        session.stop(getattr(interrupt, "signum", signal.SIGINT))
        events.extend(session.poll(0))
    return events


def collect(session: Session, on_event: Callable[[AnyEvent], None] | None = None) -> list[AnyEvent]:
    """Run ``session`` to its end with no output of its own; every event (each also passed to
    ``on_event``). After Ctrl-C has stopped every worker, KeyboardInterrupt is raised again so a
    caller running several sessions stops too."""
    events = drive(session, on_event)
    if _outcome(session).status == "interrupted":
        raise KeyboardInterrupt
    return events


def _outcome(session: Session) -> RunOutcome:
    """How ``session`` ended (:func:`drive` returns once it has)."""
    if session.outcome is None:
        raise RuntimeError("the session has not ended")
    return session.outcome


def report_outcome(session: Session, exit_code: int, err: TextIO) -> int:
    """Say how the run ended (why it failed, and where the workers' logs were kept) and where its
    trace is; ``exit_code`` (the viewer's, or the run's), counting an incomplete recording."""
    outcome = session.outcome
    if outcome is not None and outcome.status != "ok":
        hint = f" (worker logs: {session.log_dir})" if outcome.status == "failed" and session.log_dir else ""
        print(f"collviz: {outcome.detail}{hint}", file=err, flush=True)
    return report_recording(session, exit_code, err)


def report_recording(session: Session, exit_code: int, err: TextIO) -> int:
    """Say where the trace is (and why it is incomplete); ``exit_code``, or
    :data:`EXIT_RECORDING_INCOMPLETE` for a run that was ok but whose recording stopped early."""
    if session.record_path is None:
        return exit_code
    if session.recording_error is None:
        print(f"collviz: trace written to {session.record_path}", file=err, flush=True)
        return exit_code
    print(f"collviz: {session.recording_error}; the run itself went on to its end "
          f"({session.record_path} holds everything before)", file=err, flush=True)
    return EXIT_RECORDING_INCOMPLETE if exit_code == 0 else exit_code


def run_headless(session: Session, out: TextIO | None = None, err: TextIO | None = None, *,
                 as_json: bool = False) -> int:
    """Start ``session``, collect every event, print the summary (``as_json``: its JSON document,
    with the ``warnings`` said on ``err``); return the exit status.

    Ctrl-C stops every worker and still prints what was collected. Progress (a bar over the phases,
    as rank 0 enters each) goes to ``err`` when it is a terminal and the ranks' output is not echoed. ``out`` and ``err`` default to
    the process's stdout and stderr at the time of the call.
    """
    out, err = out or sys.stdout, err or sys.stderr
    progress = ProgressLine(err, "phase", 0)
    if isinstance(session, LocalSession) and session.echo is not None:  # the ranks' own lines come as they are written:
        progress.enabled = False  # a line redrawn in place among them would garble both

    told: set[tuple[str, int]] = set()

    def on_event(event: AnyEvent) -> None:
        if isinstance(event, RunStart):
            progress.update(0, total=event.phase_count)
        elif isinstance(event, Stall) and (event.group, event.group_seq) not in told:  # once per wait
            told.add((event.group, event.group_seq))
            progress.close()
            print(f"collviz: hang: {event.text}", file=err, flush=True)
        elif isinstance(event, Phase) and event.edge == "begin" and event.rank == 0:
            progress.update(event.index + 1, event.name)

    events = drive(session, on_event)
    progress.close()
    warnings = session.warnings if isinstance(session, LocalSession) else []  # what its dumps could not show
    text = (json.dumps(with_warnings(summary_document(events), warnings), indent=2, ensure_ascii=False) if as_json
            else render_summary(events))
    print(text, file=out, flush=True)
    say_warnings(warnings, err)
    return report_outcome(session, _outcome(session).exit_code, err)


def run_bench(session: LocalSession, *, as_json: bool = False, explain: bool = False,
              out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Start ``session`` (a bench plan), show progress as each size completes, then the report.

    Returns the run's exit status, or 1 when it finished but some result was wrong. Ctrl-C stops
    every worker and still prints the rows collected so far. ``out`` and ``err`` default to the
    process's stdout and stderr at the time of the call.
    """
    out, err = out or sys.stdout, err or sys.stderr
    by_phase: dict[int, list[AnyEvent]] = defaultdict(list)
    ended: Counter[int] = Counter()
    world_size = session.plan.world_size
    progress = ProgressLine(err, "bench", session.plan.program.phase_count)
    completed = 0

    def on_event(event: AnyEvent) -> None:
        nonlocal completed
        if isinstance(event, (Collective, Check)):
            by_phase[event.phase].append(event)
        elif isinstance(event, Phase) and event.edge == "end":
            ended[event.index] += 1
            if ended[event.index] == world_size:
                completed += 1
                progress.update(completed, _row_text(by_phase[event.index], world_size))

    report = bench_report(drive(session, on_event))
    progress.close()
    nccl = nccl_choices(session.nccl_lines)  # empty unless an NCCL run printed its choices
    print(render_json(report) if as_json else render_table(report, explain=explain, nccl=nccl), file=out, flush=True)
    run_exit_code = _outcome(session).exit_code
    exit_code = report_outcome(session, run_exit_code, err)
    if run_exit_code == 0 and report.wrong_total:
        print(f"collviz: {report.wrong_total} result elements were wrong", file=err, flush=True)
        return 1
    return exit_code


def _row_text(phase_events: list[AnyEvent], world_size: int) -> str:
    """The progress line's detail for one completed (operation, size): its time and busbw."""
    row = bench_row(phase_events, world_size)
    if row is None:
        return ""
    return f"{row.op} {row.size} B: {row.time_us:.1f} µs, busbw {row.busbw_gbps:.3f} GB/s"
