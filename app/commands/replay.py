"""``collviz replay TRACE``: a recorded trace in the viewer, or its summary (``--headless``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .options import OneLineParser, add_headless_option, add_json_option, add_viewer_options, command_parser
from .playing import replay_trace, viewer_options

__all__ = ["build_parser", "main"]


def build_parser() -> OneLineParser:
    """``collviz replay TRACE [--headless] [--json] [--quiz] [--pace S] [--present]``."""
    parser = command_parser("collviz replay", "Replay a recorded trace.")
    parser.add_argument("trace", type=Path, help="a .cvz file written with --record")
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
    return replay_trace(args.trace, headless=args.headless, json_output=args.json, quiz=args.quiz, viewer=viewer)
