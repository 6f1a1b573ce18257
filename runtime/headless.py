"""Running a session without a screen: progress on stderr, the summary on stdout."""

from __future__ import annotations

import sys
from typing import TextIO

from .launch import Session
from .protocol import AnyEvent, Phase, RunStart, Stall
from .summary import render_summary

__all__ = ["run_headless"]


def run_headless(session: Session, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Start ``session``, collect every event, print the summary; return the exit status.

    Ctrl-C stops every worker and still prints what was collected. Progress (one line per phase,
    as rank 0 enters it) goes to ``err`` when it is a terminal.
    """
    events: list[AnyEvent] = []
    show_progress = err.isatty()
    phase_count = 0
    session.start()
    try:
        while not session.finished:
            batch = session.poll(0.1)
            events.extend(batch)
            for event in batch:
                if isinstance(event, RunStart):
                    phase_count = event.phase_count
                elif isinstance(event, Stall):
                    print(f"collviz: hang: {event.text}", file=err, flush=True)
                elif show_progress and isinstance(event, Phase) and event.edge == "begin" and event.rank == 0:
                    print(f"collviz: phase {event.index + 1}/{phase_count} {event.name}", file=err, flush=True)
    except KeyboardInterrupt:
        session.stop()
        events.extend(session.poll(0))
    print(render_summary(events), file=out, flush=True)
    outcome = session.outcome
    if outcome.status != "ok":
        hint = f" (worker logs: {session.log_dir})" if outcome.status == "failed" and session.log_dir else ""
        print(f"collviz: {outcome.detail}{hint}", file=err, flush=True)
    if session.record_path is not None:
        print(f"collviz: trace written to {session.record_path}", file=err, flush=True)
    return outcome.exit_code
