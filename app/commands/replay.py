"""``collviz replay TRACE``: a recorded trace in the viewer, or its summary (``--headless``); also a
user's own artifacts (``collviz replay fr/``: Flight Recorder dumps, profiler traces, an NCCL log),
and a running job's NCCL Inspector folder followed as it grows (``--follow``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .options import (
    OneLineParser,
    add_headless_option,
    add_json_option,
    add_record_option,
    add_viewer_options,
    check_record_option,
    command_parser,
    path_argument,
)
from .playing import headless_instead, replay_paths, viewer_options

__all__ = ["build_parser", "main"]

EPILOG = """\
examples:
  collviz replay run.cvz                  a collviz trace (--record), in the viewer
  collviz replay run.cvz --headless       its summary, as the run printed it
  collviz replay fr/                      Flight Recorder dumps (one per rank): who waits in which
                                          call, who never arrived, calls that disagree (exit 1)
  collviz replay prof/ --headless         torch.profiler traces (one per rank): every collective
                                          with its size, group, time and busbw
  collviz replay nccl.log                 an NCCL_DEBUG=INFO log: NCCL's rings, trees and choices
  collviz replay insp/                    NCCL Inspector output (NCCL_INSPECTOR_DUMP_DIR) after the job
  collviz replay --follow insp/           ... while the job writes it: each call as its records
                                          arrive, until q or the folder has not grown for --idle
                                          seconds (default 60); --record t.cvz keeps it; headless,
                                          one line per new step

What an artifact does not hold (values, provenance) is shown as absent, never made up.
"""


def build_parser() -> OneLineParser:
    """``collviz replay TRACE [--headless] [--json] [--quiz] [--pace S] [--present]``."""
    parser = command_parser("collviz replay", "Replay a recorded trace, or open your own job's artifacts.", EPILOG)
    parser.add_argument("paths", type=path_argument, nargs="+", metavar="PATH",
                        help="a .cvz file written with --record; or Flight Recorder dumps, torch.profiler traces "
                             "(one per rank), an NCCL_DEBUG=INFO log or NCCL Inspector output, as files or a folder")
    add_headless_option(parser, "the summary the run printed")
    add_json_option(parser, "the summary (or a bench trace's table)")
    parser.add_argument("--quiz", action="store_true",
                        help="predict, then reveal: → asks what each collective produced before showing it (z toggles)")
    add_viewer_options(parser, "play one step every S seconds (space pauses)")
    parser.add_argument("--follow", action="store_true",
                        help="follow a running job's NCCL Inspector folder as its files grow (one PATH, a folder)")
    parser.add_argument("--idle", type=float, metavar="S",
                        help=f"with --follow: end once the folder has not grown for S seconds (default {IDLE_S:g})")
    add_record_option(parser)
    return parser


IDLE_S = 60.0
"""How long a followed folder may not grow before the job is taken as over (``--idle``)."""


def main(argv: Sequence[str]) -> int:
    """Replay the trace ``argv`` names, or follow the Inspector folder it names."""
    from collviz.runtime.errors import UsageError

    args = build_parser().parse_args(argv)
    if args.follow:
        return _follow(args)
    for given, option in ((args.idle, "--idle"), (args.record, "--record")):
        if given is not None:
            raise UsageError(f"{option} goes with --follow (a replay records nothing new)")
    viewer = None if args.headless or args.json else viewer_options(args, None)
    return replay_paths(args.paths, headless=args.headless, json_output=args.json, quiz=args.quiz, viewer=viewer)


def _follow(args: argparse.Namespace) -> int:
    """The Inspector folder ``args`` names, followed in the viewer, or headless with one line per
    new step, until it stops growing or the user quits; how it ended on stderr."""
    from collviz.runtime.errors import UsageError
    from collviz.runtime.limits import check_seconds
    from collviz.runtime.sessions.live import followed_session
    from collviz.runtime.sessions.headless import drive, report_outcome

    if len(args.paths) != 1:
        raise UsageError("--follow follows one folder of NCCL Inspector files")
    if args.json or args.quiz:
        raise UsageError(f"{'--json' if args.json else '--quiz'} is for a replay; --follow shows the job as it runs")
    check_record_option(args)
    idle = check_seconds("--idle", args.idle) if args.idle is not None else IDLE_S
    headless = headless_instead(args.headless, follows="a line per new step follows")
    announce = (lambda line: print(line, flush=True)) if headless else None
    session = followed_session(args.paths[0], record=args.record, idle_s=idle, announce=announce)
    session.start()
    if headless:
        print(f"collviz replay: following {args.paths[0]} (Ctrl-C stops; ends after {idle:g} s without growth)",
              flush=True)
        drive(session)
        exit_code = session.outcome.exit_code if session.outcome is not None else 0
        if session.outcome is not None and session.outcome.status == "ok":
            print(f"collviz: {session.outcome.detail}", file=sys.stderr, flush=True)
        return report_outcome(session, exit_code, sys.stderr)
    from collviz.app.app import run_viewer

    exit_code = run_viewer(session=session, options=viewer_options(args, None))
    return report_outcome(session, exit_code, sys.stderr)
