"""``collviz lesson``: play a lesson — an ordered list of scenarios with a teacher's notes.

In the viewer every item runs in step mode (space advances every rank one phase; the item's notes
are part of the narration; the header says which item plays); q (or n) leaves an item for the
next one, p goes back, Q or Ctrl-C ends the lesson. ``--present`` opens every item in the
projector layout (P switches it, and the next item keeps what P chose).
``--headless`` prints each item's summary in turn. A ``compare`` item prints its memory table.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from collviz.runtime.errors import UsageError
from collviz.runtime.scenario_files.lessons import LessonItem

from .options import OneLineParser, command_parser, make_output_folder, path_argument
from .playing import replay_trace, run_scenario
from .scenario_args import run_parser

if TYPE_CHECKING:
    from collviz.app.viewer_options import ViewerOptions

__all__ = ["build_parser", "main", "item_trace"]

EPILOG = """\
examples:
  collviz lesson --list                 the shipped lessons
  collviz lesson collectives            the seven collectives of the guide, then all-to-all
  collviz lesson fsdp --headless        all-gather → reduce-scatter → ring all-reduce → DDP → FSDP → memory
  collviz lesson my-class.toml          a lesson file of your own (see scenarios/lessons/*.toml)
  collviz lesson fsdp --record traces/  record every item once (headless) ...
  collviz lesson fsdp --traces traces/  ... then replay them, with no workers started
"""


def build_parser() -> OneLineParser:
    """``collviz lesson --list | NAME [--headless] [--present] [--record DIR | --traces DIR]``."""
    parser = command_parser("collviz lesson", "Play a lesson: scenarios in order, with notes.", EPILOG)
    parser.add_argument("lesson", nargs="?", metavar="NAME", help="a shipped lesson's name, or a lesson file")
    parser.add_argument("--list", action="store_true", help="list the shipped lessons and exit")
    parser.add_argument("--headless", action="store_true", help="print each item's summary instead of the viewer")
    parser.add_argument("--record", type=path_argument, metavar="DIR",
                        help="run every item headless, keeping its trace in DIR (NN-SCENARIO.cvz, DIR made if "
                             "missing), for --traces")
    parser.add_argument("--traces", type=path_argument, metavar="DIR",
                        help="replay each item from DIR's recorded traces instead of starting workers")
    parser.add_argument("--present", action="store_true",
                        help="the projector layout from the first item (P switches it; the next item keeps it)")
    return parser


def main(argv: Sequence[str]) -> int:
    """List the lessons, or play one; the exit status of the last item played."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.record is not None:
        make_output_folder(args.record, "--record")
    for folder in (args.record, args.traces):
        if folder is not None and not folder.is_dir():
            raise UsageError(f"{folder}: not a folder")
    from collviz.app.viewer_options import LessonPlace, ViewerOptions
    from collviz.runtime.scenario_files.lessons import find_lesson, list_lessons

    if args.list:
        lessons = list_lessons()
        width = max(len(lesson.name) for lesson in lessons)
        for lesson in lessons:
            print(f"{lesson.name:<{width}}  {lesson.title} ({len(lesson.items)} items): {lesson.description}")
        return 0
    if args.lesson is None:
        raise UsageError("give a lesson to play, or --list (see: collviz lesson --help)")
    lesson = find_lesson(args.lesson)
    status = 0
    number, direction, present = 1, 1, args.present
    while 1 <= number <= len(lesson.items):
        item = lesson.items[number - 1]
        print(f"collviz lesson {lesson.name} — {number}/{len(lesson.items)}: {item.title}", flush=True,
              file=sys.stdout if args.headless or args.record else sys.stderr)
        if (skipped := _why_skipped(item, recording=args.record is not None, replaying=args.traces is not None)):
            print(f"collviz: {skipped}", file=sys.stderr)
            number += direction
            if number < 1:  # skipped back past the first item: on from there
                number, direction = 2, 1
            continue
        trace = item_trace(args.record or args.traces, number, item)
        viewer = ViewerOptions(present=present, lesson=LessonPlace(lesson.name, number, len(lesson.items), item.title))
        status = _play(item, args.headless or args.record is not None, lesson.name, trace,
                       recording=args.record is not None, viewer=viewer)
        present = viewer.present  # P pressed in this item holds for the next
        if viewer.navigation == "end":
            print(f"collviz: lesson {lesson.name} ended at item {number}/{len(lesson.items)} (Q)", file=sys.stderr)
            return status
        if status >= 128 and viewer.navigation is None:
            return status  # Ctrl-C: the lesson ends here
        direction = -1 if viewer.navigation == "previous" else 1  # n, q or the end: on; p: back
        number = max(number + direction, 1)
    return status


def _why_skipped(item: LessonItem, *, recording: bool, replaying: bool) -> str | None:
    """Why ``item`` is skipped (a comparison while recording or replaying; a scenario this torch
    cannot run, unless replayed), or None where it plays."""
    if item.compare and (recording or replaying):
        return (f"a comparison runs both scenarios live, so it is skipped with --record/--traces "
                f"(run: collviz compare {' '.join(item.compare)})")
    if replaying:
        return None
    from collviz.runtime.scenario_files.loading import find_scenario
    from collviz.runtime.programs.registry import torch_refusal

    for name in item.compare or (item.scenario,):
        if name is not None and (refusal := torch_refusal(find_scenario(name))) is not None:
            return f"{refusal}: item skipped"
    return None


def item_trace(folder: Path | None, number: int, item: LessonItem) -> Path | None:
    """Where item ``number``'s trace is kept in ``folder`` (None without a folder)."""
    return None if folder is None else folder / f"{number:02d}-{item.scenario}.cvz"


def _play(item: LessonItem, headless: bool, lesson: str, trace: Path | None, recording: bool,
          viewer: ViewerOptions) -> int:
    """Run one item: a scenario (step mode in the viewer; recorded to, or replayed from, ``trace``)
    or a memory comparison; ``viewer`` records whether the user chose the next or previous item."""
    if item.compare or item.scenario is None:  # compare items are skipped when recording or replaying
        return subprocess.call([sys.executable, "-m", "collviz", "compare", *item.compare, *item.args])
    if trace is not None and not recording:
        return replay_trace(trace, headless=headless, viewer=viewer)
    mode = ["--headless"] if headless else ["--step"]
    record = ["--record", str(trace), "--force"] if recording and trace is not None else []
    scenario = item.scenario
    args = run_parser(scenario).parse_args([*item.args, *mode, *record])
    return run_scenario(scenario, args, notes=item.notes, notes_from=f"lesson {lesson}", viewer=viewer)
