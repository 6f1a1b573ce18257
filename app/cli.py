"""The ``collviz`` command: list scenarios, run one (viewer or headless), replay a trace.

Every user mistake becomes one line on stderr, ``collviz: error: …``, and exit status 2.
"""

from __future__ import annotations

import argparse
import faulthandler
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from collviz.runtime.errors import STOP_SIGNALS, Interrupted, UsageError, exit_status_for

from .parsing import OneLineParser, add_viewer_options, parse_size, run_options, run_parser

if TYPE_CHECKING:
    from collviz.app.app import ViewerOptions

__all__ = ["main", "cmd_run", "cmd_replay"]

TOP_HELP = """\
usage: collviz SCENARIO [options]       run a scenario (collviz SCENARIO --help for options)
       collviz list                     the scenarios, one line each
       collviz replay TRACE [--headless]  replay a recorded trace
       collviz bench [OPS] --sizes 1K:16M  nccl-tests-style size sweep (table, --json)
       collviz export TRACE --perfetto OUT.json  timeline for ui.perfetto.dev / chrome://tracing
       collviz compare ddp fsdp --gpus 4  peak memory per rank, measured side by side (--params 7e9: estimates)
       collviz lesson --list | NAME     a sequence of scenarios with a teacher's notes
       collviz serve TARGET --port P    the viewer in a class's browsers, one per tab
       collviz --version                collviz, torch, backend (gloo/NCCL) and GPU versions

collviz runs real torch.distributed collectives on real worker processes and shows what every rank
holds, what moved between ranks, and what it cost in time and memory.

Quick start:
  collviz list
  collviz all-reduce --gpus 4             live viewer (q quits, ? shows keys)
  collviz all-reduce --gpus 4 --headless  plain-text summary: buffers before/after, provenance,
                                          bytes moved, time, algbw/busbw with their formula
"""


def notes_for(notes: Mapping[str, Mapping[str, str]], scenario: str, file: str) -> Mapping[str, str]:
    """The notes of ``scenario`` in a notes file; a section naming no scenario is a UsageError."""
    from collviz.runtime.scenarios.loading import find_scenario

    for name in notes:
        if name != scenario:
            try:
                find_scenario(name)
            except UsageError as exc:
                raise UsageError(f"{file}: section [{name}]: {exc}") from None
    return notes.get(scenario, {})


def clean_stale_runs() -> None:
    """Remove the run folders of collviz launchers that were killed (SIGKILL), saying so."""
    from collviz.runtime.launch import remove_stale_run_folders

    removed = remove_stale_run_folders()
    if removed:
        print(f"collviz: removed {len(removed)} run folder{'s' if len(removed) > 1 else ''} left by a killed "
              f"collviz: {', '.join(removed)}", file=sys.stderr)


def check_record_option(args: argparse.Namespace) -> None:
    """UsageError for a --record target that cannot or should not be written (see check_new_output)."""
    from collviz.runtime.wire.files import check_new_output

    if args.record is not None:
        check_new_output(args.record, "--record", force=args.force)


GATHERING = frozenset({"all_gather", "gather"})
"""Collectives whose output on a rank is world size × its input."""


def check_run_numbers(args: argparse.Namespace, collective: str, world_size: int) -> None:
    """--timeout, --iters and --size within their bounds, and the run's buffers within memory."""
    from collviz.app.limits import MAX_ITERS, check_count, check_fits_in_memory, check_seconds, check_size

    check_seconds("--timeout", args.timeout)
    check_count("--iters", args.iters, 1, MAX_ITERS)
    if args.size is not None:
        size = check_size("--size", parse_size(args.size))
        # input, output, tag input and output, before/after snapshots; gathering outputs are world × input
        buffers = 4 + (world_size if collective in GATHERING else 1)
        check_fits_in_memory(f"--size {args.size} on {world_size} ranks", world_size, size, buffers)


def _cmd_list() -> int:
    from collviz.runtime.scenarios.loading import list_scenarios

    scenarios = list_scenarios()
    width = max(len(s.name) for s in scenarios)
    for scenario in scenarios:
        print(f"{scenario.name:<{width}}  {scenario.description}")
    return 0


def cmd_replay(argv: Sequence[str], viewer: ViewerOptions | None = None) -> int:
    """Replay the trace ``argv`` names (viewer or summary); ``viewer`` carries a lesson's options."""
    parser = OneLineParser(prog="collviz replay", description="Replay a recorded trace.", allow_abbrev=False)
    parser.add_argument("trace", type=Path, help="a .cvz file written with --record")
    parser.add_argument("--headless", action="store_true", help="print the summary instead of opening the viewer")
    parser.add_argument("--quiz", action="store_true",
                        help="predict, then reveal: → asks what each collective produced before showing it (z toggles)")
    add_viewer_options(parser, "play one step every S seconds (space pauses)")
    args = parser.parse_args(argv)
    from collviz.runtime.wire.trace import read_trace

    if args.headless:
        from collviz.runtime.observation.metrics import human_bytes
        from collviz.runtime.reports.progress import ProgressLine
        from collviz.runtime.reports.summary import render_summary

        progress = ProgressLine(sys.stderr, f"reading {args.trace}", 0, count_text=human_bytes)
        contents = read_trace(args.trace, lambda done, total: progress.update(done, total=total))
        progress.close()
        if contents.warning:
            print(f"collviz: warning: {contents.warning}", file=sys.stderr)
        from collviz.runtime.reports.bench_table import bench_report, is_bench_log, render_table

        bench = is_bench_log(contents.events)
        print(render_table(bench_report(contents.events)) if bench else render_summary(contents.events))
        return 0
    read_trace(args.trace)  # fail fast, with a one-line error, before the screen opens
    from collviz.app.app import run_viewer

    return run_viewer(trace=args.trace, quiz=args.quiz, options=viewer_options(args, viewer))


def cmd_run(name: str, argv: Sequence[str], notes: Mapping[str, str] | None = None, notes_from: str = "",
            viewer: ViewerOptions | None = None) -> int:
    """Run scenario ``name`` with its command line ``argv``; ``notes`` (a lesson item's, from
    ``notes_from``) are added to its narration, as ``--notes FILE`` adds a teacher's; ``viewer``
    carries a lesson's viewer options."""
    from collviz.runtime.launch import RunPlan, Session, choose_backend
    from collviz.runtime.scenarios.loading import find_scenario
    from collviz.runtime.scenarios.notes import load_notes, with_notes
    from collviz.runtime.scenarios.registry import build_program

    args = run_parser(name).parse_args(argv)
    scenario = find_scenario(name)
    if notes:
        scenario = with_notes(scenario, notes, notes_from)
    if args.notes is not None:
        scenario = with_notes(scenario, notes_for(load_notes(args.notes), scenario.name, str(args.notes)),
                              str(args.notes))
    world_size = scenario.default_gpus if args.gpus is None else args.gpus
    backend = choose_backend(args.backend, world_size)
    if args.step and args.headless:
        raise UsageError("--step needs the viewer (space releases each gate); drop --headless or --step")
    if args.headless and (args.pace is not None or args.present):
        raise UsageError("--pace and --present are for the viewer; drop --headless")
    options = viewer_options(args, viewer)
    check_run_numbers(args, scenario.collective, world_size)
    check_record_option(args)
    program = build_program(scenario, world_size, run_options(args))
    plan = RunPlan(scenario=scenario, world_size=world_size, backend=backend, program=program,
                   step=args.step or options.pace is not None, record=args.record, timeout_s=args.timeout)
    print(f"collviz: {backend.reason}", file=sys.stderr)
    clean_stale_runs()
    session = Session(plan)
    if args.headless:
        from collviz.runtime.headless import run_headless

        return run_headless(session)
    from collviz.app.app import run_viewer

    session.start()  # fork before the viewer starts its threads
    from collviz.runtime.headless import report_recording

    return report_recording(session, run_viewer(session=session, options=options), sys.stderr)


def viewer_options(args: argparse.Namespace, given: ViewerOptions | None) -> ViewerOptions:
    """The viewer's options: ``given`` (a lesson's) with ``--pace`` and ``--present`` applied."""
    from collviz.app.app import ViewerOptions
    from collviz.app.limits import check_seconds

    options = given or ViewerOptions()
    if args.pace is not None:
        options.pace = check_seconds("--pace", args.pace)
    options.present = options.present or args.present
    return options


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``collviz`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _stop_on_signals()
    _stacks_on_sigusr1()
    try:
        if not argv or argv[0] in ("-h", "--help", "help"):
            print(TOP_HELP)
            return 0 if argv else 2
        if argv[0] in ("-V", "--version", "version"):
            from collviz.runtime.observation.environment import version_lines

            print("\n".join(version_lines()))
            return 0
        command, rest = argv[0], argv[1:]
        if command == "list":
            return _cmd_list()
        if command == "replay":
            return cmd_replay(rest)
        if command == "bench":
            from collviz.app.bench_cmd import cmd_bench

            return cmd_bench(rest)
        if command in ("worker", "view"):
            from collviz.app.remote_cmd import cmd_view, cmd_worker

            return cmd_worker(rest) if command == "worker" else cmd_view(rest)
        if command == "compare":
            from collviz.app.compare_cmd import cmd_compare

            return cmd_compare(rest)
        if command in ("serve", "serve-slot"):
            from collviz.app.serve_cmd import cmd_serve, cmd_serve_slot

            return cmd_serve(rest) if command == "serve" else cmd_serve_slot(rest)
        if command == "lesson":
            from collviz.app.lesson_cmd import cmd_lesson

            return cmd_lesson(rest)
        if command == "export":
            from collviz.app.export_cmd import cmd_export

            return cmd_export(rest)
        if command.startswith("-"):
            raise UsageError(f"expected a scenario name or a command first, got {command!r} (see: collviz --help)")
        return cmd_run(command, rest)
    except UsageError as exc:
        print(f"collviz: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interrupt:
        print(f"collviz: interrupted ({interrupt.args[0] if interrupt.args else 'SIGINT'})", file=sys.stderr)
        return exit_status_for(interrupt)


def _stacks_on_sigusr1() -> None:
    """``kill -USR1 PID`` prints every thread's Python stack on stderr (for a process that seems
    stuck); nothing when stderr has no file descriptor (an embedding, a test capturing it)."""
    try:
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    except (AttributeError, ValueError):  # no SIGUSR1 (Windows), or io.UnsupportedOperation: no fileno
        pass


def _stop_on_signals() -> None:
    """SIGTERM and SIGHUP end a run as Ctrl-C does (workers stopped, summary, trace closed),
    with exit status 128 + signal; the viewer replaces this with its own quit (see the app).

    Ctrl-C's own handler is installed too: a process started with SIGINT ignored (a parent that
    ignores it, a background job of a script) would otherwise inherit the ignoring and never stop
    on SIGINT.
    """

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted(signum)

    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in STOP_SIGNALS:
        signal.signal(signum, interrupt)


if __name__ == "__main__":
    sys.exit(main())
