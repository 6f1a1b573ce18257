"""``collviz replay TRACE``: a recorded trace in the viewer, or its summary (``--headless``); also a
user's own artifacts (``collviz replay fr/``: Flight Recorder dumps, profiler traces, an NCCL log)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .options import OneLineParser, add_headless_option, add_json_option, add_viewer_options, command_parser
from .playing import replay_paths, viewer_options

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

What an artifact does not hold (values, provenance) is shown as absent, never made up.
"""


def build_parser() -> OneLineParser:
    """``collviz replay TRACE [--headless] [--json] [--quiz] [--pace S] [--present]``."""
    parser = command_parser("collviz replay", "Replay a recorded trace, or open your own job's artifacts.", EPILOG)
    parser.add_argument("paths", type=Path, nargs="+", metavar="PATH",
                        help="a .cvz file written with --record; or Flight Recorder dumps, torch.profiler traces "
                             "(one per rank), an NCCL_DEBUG=INFO log or NCCL Inspector output, as files or a folder")
    add_headless_option(parser, "the summary the run printed")
    add_json_option(parser, "the summary (or a bench trace's table)")
    parser.add_argument("--quiz", action="store_true",
                        help="predict, then reveal: → asks what each collective produced before showing it (z toggles)")
    add_viewer_options(parser, "play one step every S seconds (space pauses)")
    return parser


def main(argv: Sequence[str]) -> int:
    """Replay the trace ``argv`` names."""
    args = build_parser().parse_args(argv)
    viewer = None if args.headless or args.json else viewer_options(args, None)
    return replay_paths(args.paths, headless=args.headless, json_output=args.json, quiz=args.quiz, viewer=viewer)
