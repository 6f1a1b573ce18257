"""Lessons: an ordered list of scenarios (or a memory comparison) with a teacher's notes each.

A lesson lives in ``scenarios/lessons/NAME.toml`` and is validated like a scenario file, with the
same one-line errors naming the file and the key::

    name = "collectives"
    title = "The collectives, one by one"
    description = "…"

    [[item]]
    scenario = "broadcast"          # or: compare = ["ddp", "fsdp"]
    args = ["--gpus", "4"]          # the scenario's own command-line options
    notes = { setup = "Ask first: which ranks will hold the root's buffer?" }

``notes`` are keyed by the scenario's narration keys (see :mod:`.notes`); ``args`` are checked
by the command line when the item runs.
"""

from __future__ import annotations

import importlib.resources
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..wire.files import read_regular_file
from .loading import find_scenario
from .notes import with_notes
from .schema import ScenarioError
from .tables import Table, is_list, is_str

__all__ = ["LessonItem", "Lesson", "load_lesson", "find_lesson", "list_lessons", "lessons_dir"]

MAX_LESSON_BYTES = 1 << 20
"""A lesson file larger than this is refused unread."""


@dataclass(frozen=True)
class LessonItem:
    """One step of a lesson: a scenario run with ``args`` and ``notes``, or a ``compare`` of two."""

    title: str
    scenario: str | None = None
    compare: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    notes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Lesson:
    """A validated lesson file."""

    name: str
    title: str
    description: str
    items: tuple[LessonItem, ...]


def lessons_dir() -> Path:
    """The folder of the lessons shipped inside the package."""
    return Path(str(importlib.resources.files("collviz.scenarios"))) / "lessons"


def load_lesson(path: Path) -> Lesson:
    """Read and validate one lesson file: every scenario exists, every note names a phase key."""
    file = path.name
    try:
        data = tomllib.loads(read_regular_file(path, MAX_LESSON_BYTES, "lesson file").decode("utf-8"))
    except FileNotFoundError:
        raise ScenarioError(file, "no such file") from None
    except (tomllib.TOMLDecodeError, RecursionError, UnicodeDecodeError) as exc:
        raise ScenarioError(file, f"invalid TOML ({exc})") from None
    top = Table(file, data)
    top.only(["name", "title", "description", "item"])
    name = top.line("name")
    if name != path.stem:
        raise top.error("name", f"{name!r} must equal the file name without .toml ({path.stem!r})")
    items = tuple(_item(table) for table in top.tables("item"))
    if not items:
        raise top.error("item", "a lesson needs at least one [[item]]")
    return Lesson(name, top.line("title"), top.line("description"), items)


def _item(table: Table) -> LessonItem:
    table.only(["scenario", "compare", "args", "notes", "title"])
    scenario = table.value("scenario", is_str, "a scenario name", None)
    compare = table.value("compare", lambda v: is_list(v) and len(v) == 2 and all(map(is_str, v)),
                          "two scenario names", None)
    if (scenario is None) == (compare is None):
        raise table.error("scenario", "give either scenario = NAME or compare = [A, B]")
    args = table.value("args", lambda v: is_list(v) and all(map(is_str, v)), "a list of strings", [])
    notes_table = table.table("notes", None)
    notes = dict(notes_table.data) if notes_table is not None else {}
    if not all(isinstance(v, str) for v in notes.values()):
        raise table.error("notes", "every note must be a string")
    try:
        for name in [scenario] if scenario else compare:
            checked = find_scenario(name)
            if scenario:
                with_notes(checked, notes, table.file)
    except UsageError as exc:
        raise table.error("scenario" if scenario else "compare", str(exc)) from None
    title = table.line("title", scenario or f"compare {' and '.join(compare)}")
    return LessonItem(title, scenario, tuple(compare or ()), tuple(args), notes)


def list_lessons() -> list[Lesson]:
    """Every shipped lesson, by name; a broken one raises its error rather than being skipped."""
    return sorted((load_lesson(p) for p in lessons_dir().glob("*.toml")), key=lambda lesson: lesson.name)


def find_lesson(name: str) -> Lesson:
    """A shipped lesson by name, or the lesson file at a path."""
    if name.endswith(".toml") or "/" in name:
        return load_lesson(Path(name))
    path = lessons_dir() / f"{name}.toml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in lessons_dir().glob("*.toml")))
        raise UsageError(f"unknown lesson '{name}'; run 'collviz lesson --list' to see them (known: {known})")
    return load_lesson(path)
