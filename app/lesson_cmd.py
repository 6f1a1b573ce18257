"""``collviz lesson``: play a lesson — an ordered list of scenarios with a teacher's notes.

In the viewer every item runs in step mode (space advances every rank one phase; the item's notes
are part of the narration); quitting an item (q) goes on to the next; Ctrl-C ends the lesson.
``--headless`` prints each item's summary in turn. A ``compare`` item prints its memory table.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from collviz.runtime.errors import UsageError

__all__ = ["cmd_lesson"]

EPILOG = """\
examples:
  collviz lesson --list                 the shipped lessons
  collviz lesson collectives            the seven collectives of the guide, then all-to-all
  collviz lesson fsdp --headless        all-gather → reduce-scatter → ring all-reduce → DDP → FSDP → memory
  collviz lesson my-class.toml          a lesson file of your own (see scenarios/lessons/*.toml)
"""


def cmd_lesson(argv: Sequence[str]) -> int:
    """List the lessons, or play one; the exit status of the last item played."""
    from collviz.app.cli import _Parser

    parser = _Parser(prog="collviz lesson", description="Play a lesson: scenarios in order, with notes.",
                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("lesson", nargs="?", metavar="NAME", help="a shipped lesson's name, or a lesson file")
    parser.add_argument("--list", action="store_true", help="list the shipped lessons and exit")
    parser.add_argument("--headless", action="store_true", help="print each item's summary instead of the viewer")
    args = parser.parse_args(argv)
    from collviz.runtime.scenarios.lessons import find_lesson, list_lessons

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
    for number, item in enumerate(lesson.items, 1):
        print(f"collviz lesson {lesson.name} — {number}/{len(lesson.items)}: {item.title}", flush=True,
              file=sys.stdout if args.headless else sys.stderr)
        status = _play(item, args.headless, lesson.name)
        if status >= 128:  # interrupted: the lesson ends here
            return status
    return status


def _play(item, headless: bool, lesson: str) -> int:
    """Run one item: a scenario (step mode in the viewer) or a memory comparison."""
    from collviz.app.cli import cmd_run

    if item.compare:
        from collviz.app.compare_cmd import cmd_compare

        return cmd_compare([*item.compare, *item.args])
    mode = ["--headless"] if headless else ["--step"]
    return cmd_run(item.scenario, [*item.args, *mode], notes=item.notes, notes_from=f"lesson {lesson}")
