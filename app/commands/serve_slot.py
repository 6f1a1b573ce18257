"""``collviz serve-slot FOLDER MAX SCENARIO [VIEWER OPTIONS]``: one browser tab's live run (in
step mode, with the viewer options ``collviz serve`` was given: ``--present``, ``--quiz``,
``--pace S``), started by ``collviz serve --live`` when one of its MAX slots is free (a tab beyond
them is told so)."""

from __future__ import annotations

import argparse
import fcntl
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from collviz.runtime.errors import UsageError

from .options import OneLineParser, command_parser, path_argument
from .playing import run_scenario
from .scenario_args import run_parser

__all__ = ["build_parser", "main"]


def build_parser() -> OneLineParser:
    """``collviz serve-slot FOLDER MAX SCENARIO [VIEWER OPTIONS]`` (started by ``collviz serve``, not by hand)."""
    parser = command_parser("collviz serve-slot", "One browser tab's live run (started by collviz serve --live).")
    parser.add_argument("folder", type=path_argument, help="the server's slot folder")
    parser.add_argument("max", type=int, help="live runs the server allows at once")
    parser.add_argument("scenario", help="the scenario each tab runs")
    parser.add_argument("viewer", nargs=argparse.REMAINDER, help="the viewer's options, as collviz serve was given them")
    return parser


def main(argv: Sequence[str]) -> int:
    """Run the scenario in step mode if a slot is free; otherwise say so in the tab."""
    if len(argv) < 3 or not argv[1].isdigit():
        raise UsageError("usage: collviz serve-slot FOLDER MAX SCENARIO [VIEWER OPTIONS] (started by collviz serve)")
    args = build_parser().parse_args(argv)
    slot = _take_slot(args.folder, args.max)
    if slot is None:
        from collviz.app.notice import show_notice

        return show_notice(f"This class already has {args.max} live runs going, the most this server allows. "
                           f"Close another tab, or ask for the replay of {args.scenario}.")
    with slot:
        return run_scenario(args.scenario, run_parser(args.scenario).parse_args(["--step", *args.viewer]))


def _take_slot(folder: Path, limit: int) -> IO[bytes] | None:
    """An open, exclusively locked slot file (held until closed), or None when all are taken."""
    for index in range(limit):
        handle = open(folder / f"live-slot-{index}.lock", "ab")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            handle.close()
    return None
