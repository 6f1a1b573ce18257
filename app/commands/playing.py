"""Playing a scenario or a trace, in the viewer or headless: what ``run``, ``replay``, ``lesson``
and ``serve`` share.

A command parses its own command line and calls :func:`run_scenario` or :func:`replay_trace`;
the run is planned by the runtime (:func:`collviz.runtime.plan.plan_run`). Without a terminal
(stdin or stdout not a tty: a pipe, a file, a CI job) the viewer cannot run, so the run goes
headless and says so in one line.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from collviz.runtime.errors import UsageError

from .options import check_record_option, clean_stale_runs, make_output_folder, no_terminal, print_json
from .scenario_args import memory_need, run_options

if TYPE_CHECKING:
    from collviz.app.viewer_options import ViewerOptions
    from collviz.runtime.plan import RunPlan
    from collviz.runtime.sources.run import ImportedRun

__all__ = ["run_scenario", "play_plan", "replay_trace", "replay_paths", "open_artifacts", "is_collviz_trace", "viewer_options",
           "headless_instead"]


def headless_instead(headless: bool, json_output: bool = False, follows: str = "the summary follows") -> bool:
    """Whether to run without the viewer: asked for (``--headless``, ``--json``), or no terminal
    (then a one-line notice on stderr says so, and what ``follows`` instead)."""
    if headless or json_output:
        return True
    why = no_terminal()
    if why is not None:
        print(f"collviz: {why}: running headless ({follows}; --headless says so on purpose)", file=sys.stderr)
        return True
    return False


def notes_for(notes: Mapping[str, Mapping[str, str]], scenario: str, file: str) -> Mapping[str, str]:
    """The notes of ``scenario`` in a notes file; a section naming no scenario is a UsageError."""
    from collviz.runtime.scenario_files.loading import find_scenario

    for name in notes:
        if name != scenario:
            try:
                find_scenario(name)
            except UsageError as exc:
                raise UsageError(f"{file}: section [{name}]: {exc}") from None
    return notes.get(scenario, {})


def viewer_options(args: argparse.Namespace, given: ViewerOptions | None) -> ViewerOptions:
    """The viewer's options: ``given`` (a lesson's) with ``--pace`` and ``--present`` applied."""
    from collviz.app.viewer_options import ViewerOptions
    from collviz.runtime.limits import check_seconds

    options = given or ViewerOptions()
    if args.pace is not None:
        options.pace = check_seconds("--pace", args.pace)
    options.present = options.present or args.present
    return options


def run_scenario(name: str, args: argparse.Namespace, notes: Mapping[str, str] | None = None, notes_from: str = "",
                 viewer: ViewerOptions | None = None) -> int:
    """Run scenario ``name`` with its parsed command line ``args``; ``notes`` (a lesson item's,
    from ``notes_from``) are added to its narration, as ``--notes FILE`` adds a teacher's;
    ``viewer`` carries a lesson's viewer options. Returns the exit status."""
    from collviz.runtime.plan import plan_run
    from collviz.runtime.scenario_files.loading import find_scenario
    from collviz.runtime.scenario_files.notes import load_notes, with_notes

    scenario = find_scenario(name)
    if notes:
        scenario = with_notes(scenario, notes, notes_from)
    if args.notes is not None:
        scenario = with_notes(scenario, notes_for(load_notes(args.notes), scenario.name, str(args.notes)),
                              str(args.notes))
    if args.step and (args.headless or args.json):
        raise UsageError("--step needs the viewer (space releases each gate); drop --headless or --step")
    if (args.headless or args.json) and (args.pace is not None or args.present):
        raise UsageError("--pace and --present are for the viewer; drop --headless")
    # a headless run never imports the viewer (textual: a quarter of a second before the fork)
    options = None if args.headless or args.json else viewer_options(args, viewer)
    world_size = scenario.default_gpus if args.gpus is None else args.gpus
    memory = memory_need(args, scenario.collective, world_size)
    check_record_option(args)
    paced = options is not None and options.pace is not None
    plan = plan_run(scenario, world_size, backend=args.backend, options=run_options(args), step=args.step or paced,
                    record=args.record, timeout_s=args.timeout, memory=memory, memory_viz=args.memory_viz)
    if plan.memory_viz is not None:
        make_output_folder(plan.memory_viz, "--memory-viz")
    headless = headless_instead(args.headless, args.json)
    if headless and plan.step:
        raise UsageError(f"--step and --pace need the viewer, and {no_terminal()}")
    return play_plan(plan, headless=headless, json_output=args.json, viewer=options)


def play_plan(plan: RunPlan, *, headless: bool, json_output: bool = False, viewer: ViewerOptions | None = None) -> int:
    """Start the planned run: headless (its summary, or ``json_output``'s document) or in the
    viewer (``viewer``: its options); say what it runs on first. A script's ranks' output reaches
    the terminal prefixed with their rank: as it is written when headless (all of it on stderr
    with ``json_output``), after the viewer closes otherwise. Returns the exit status."""
    from collviz.runtime.sessions.local import LocalSession
    from collviz.runtime.sessions.rank_output import KeptLines, TerminalEcho

    print(f"collviz: {plan.banner}", file=sys.stderr)
    clean_stale_runs()
    session = LocalSession(plan)
    kept = None
    if plan.backend.row.program_joins:  # a user's script: its output goes where its author expects it
        session.echo = (TerminalEcho(sys.stdout, sys.stderr, both_to=sys.stderr if json_output else None) if headless
                        else (kept := KeptLines()))
    if headless:
        from collviz.runtime.sessions.headless import run_headless

        return run_headless(session, as_json=json_output)
    from collviz.app.app import run_viewer
    from collviz.app.viewer_options import ViewerOptions
    from collviz.runtime.sessions.headless import report_outcome, report_recording
    from collviz.runtime.sessions.recorder_live import WATCHED

    session.pace = WATCHED  # a run read from Flight Recorder: its calls shown every 10 s, its waits every second
    session.start()  # fork before the viewer starts its threads
    options = viewer or ViewerOptions()
    exit_code = run_viewer(session=session, options=options)
    if kept is not None:
        kept.replay(sys.stdout, sys.stderr)
    if options.left_at is not None:  # q: the user's choice, said as such (no signal was sent)
        print(f"collviz: you left the run {options.left_at}; every worker was stopped", file=sys.stderr)
        return report_recording(session, exit_code, sys.stderr)
    return report_outcome(session, exit_code, sys.stderr)


def is_collviz_trace(path: Path) -> bool:
    """Whether ``path`` is a regular file that starts with the collviz trace magic (read without
    blocking: a fifo or a device is not one; nor is a name no file can have, one with a NUL byte)."""
    import os
    import stat

    from collviz.runtime.wire.trace import TRACE_MAGIC

    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError):
        return False
    try:
        return stat.S_ISREG(os.fstat(handle).st_mode) and os.read(handle, len(TRACE_MAGIC)) == TRACE_MAGIC
    finally:
        os.close(handle)


def open_artifacts(paths: list[Path]) -> ImportedRun:
    """A user's own artifacts (Flight Recorder dumps, profiler traces, an NCCL log) as a run's
    events, its warnings said on stderr, with a progress line there while they are read (on a
    terminal)."""
    from collviz.runtime.reports.progress import StagedProgress
    from collviz.runtime.reports.warnings import say_warnings
    from collviz.runtime.sources.detect import open_artifacts as open_sources

    progress = StagedProgress(sys.stderr)
    try:
        imported = open_sources(paths, progress)
    finally:
        progress.close()
    say_warnings(imported.warnings, sys.stderr)
    return imported


def replay_paths(paths: list[Path], *, headless: bool = False, json_output: bool = False, quiz: bool = False,
                 viewer: ViewerOptions | None = None) -> int:
    """Replay a collviz trace, or open a user's artifacts as one (the exit status is then the
    job's own: 1 when it hung or its ranks' calls disagreed, as for a live run)."""
    if len(paths) == 1 and (is_collviz_trace(paths[0]) or paths[0].suffix == ".cvz"):  # a damaged .cvz: its own error
        return replay_trace(paths[0], headless=headless, json_output=json_output, quiz=quiz, viewer=viewer)
    imported = open_artifacts(paths)
    if headless_instead(headless, json_output):
        from collviz.runtime.reports.summary import render_summary
        from collviz.runtime.reports.summary_json import summary_document
        from collviz.runtime.reports.warnings import with_warnings

        summary = imported.summary  # an import too large for events: its summary from its table
        if json_output:
            print_json(with_warnings(summary.document() if summary is not None else summary_document(imported.events),
                                     imported.warnings))
        else:
            print(summary.text() if summary is not None else render_summary(imported.events))
        return imported.exit_status
    from collviz.app.app import run_viewer

    return run_viewer(events=imported.events, quiz=quiz, options=viewer) or imported.exit_status


def replay_trace(trace: Path, *, headless: bool = False, json_output: bool = False, quiz: bool = False,
                 viewer: ViewerOptions | None = None) -> int:
    """Replay ``trace``: in the viewer, or headless (its summary, bench table, or their JSON)."""
    from collviz.runtime.wire.trace import trace_layout

    if headless_instead(headless, json_output):
        gc.disable()  # a million acyclic events and lines: the collector walking them would double the time
        try:
            return _print_summary(trace, json_output)
        finally:
            gc.freeze()  # what was made meanwhile joins the oldest generation at once (two list splices): else
            gc.unfreeze()  # the first young collection once it is on walks every event read (0.08 s at 1M events)
            gc.enable()
    trace_layout(trace)  # fail fast, with a one-line error, before the screen opens (it reads the header alone)
    from collviz.app.app import run_viewer

    return run_viewer(trace=trace, quiz=quiz, options=viewer)


_LAST_READ: list[object] = []
"""The events the last headless replay read, still referenced: a million events freed one by one
as the summary returned took ~5 % of the command (py-spy, 1M events), just before the process
exits (which frees them at once); the next replay in the same process frees them."""


def _print_summary(trace: Path, json_output: bool) -> int:
    """Print the summary of ``trace`` (its bench table, or their JSON): read through its index
    where it has one that serves (:mod:`collviz.runtime.reports.indexed`), else read whole."""
    from collviz.runtime.observation.metrics import human_bytes
    from collviz.runtime.reports.bench_table import bench_report, is_bench_log, render_json, render_table
    from collviz.runtime.reports.indexed import read_for_summary
    from collviz.runtime.reports.progress import ProgressLine
    from collviz.runtime.reports.summary import render_summary
    from collviz.runtime.reports.summary_json import summary_document
    from collviz.runtime.reports.warnings import say_warnings, with_warnings
    from collviz.runtime.wire.trace import read_trace

    progress = ProgressLine(sys.stderr, f"reading {trace}", 0, count_text=human_bytes)

    def follow(done: int, total: int) -> None:
        progress.update(done, total=total)

    indexed = read_for_summary(trace, text=not json_output, progress=follow)  # None: no index serves
    if indexed is not None:
        events, warning, transfers, buffers = indexed.events, indexed.warning, indexed.transfers, indexed.buffers
        mismatches = indexed.mismatches
    else:
        contents = read_trace(trace, follow)
        events, warning, transfers, buffers, mismatches = contents.events, contents.warning, None, None, None
    progress.close()
    _LAST_READ[:] = [events]
    warnings = say_warnings([warning] if warning else [], sys.stderr)
    if is_bench_log(events):
        report = bench_report(events)
        print(render_json(report, warnings) if json_output else render_table(report))
    elif json_output:
        print_json(with_warnings(summary_document(events, mismatches), warnings))
    else:
        print(render_summary(events, transfers, buffers, mismatches))
    return 0
