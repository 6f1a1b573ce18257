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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from msgspec import UNSET

from ..errors import UsageError
from .decoding import decode_document, read_toml
from .documents import LessonDocument, LessonItemDocument
from .loading import find_scenario
from .notes import with_notes
from .schema import ScenarioError

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
    document: LessonDocument = decode_document(read_toml(path, file, MAX_LESSON_BYTES, "lesson file"), LessonDocument, file)
    if document.name != path.stem:
        raise ScenarioError(file, f"{document.name!r} must equal the file name without .toml ({path.stem!r})",
                            key="name")
    items = tuple(_item(item, f"item[{i}].", file) for i, item in enumerate(document.item))
    return Lesson(document.name, document.title, document.description, items)


def _item(item: LessonItemDocument, prefix: str, file: str) -> LessonItem:
    """One ``[[item]]``: exactly one of scenario and compare, naming scenarios that load."""
    scenario = None if item.scenario is UNSET else item.scenario
    compare = () if item.compare is UNSET else tuple(item.compare)
    if (scenario is None) == (not compare):
        raise ScenarioError(file, "give either scenario = NAME or compare = [A, B]", key=f"{prefix}scenario")
    try:
        for name in [scenario] if scenario else compare:
            checked = find_scenario(name)
            if scenario:
                with_notes(checked, item.notes, file)
    except UsageError as exc:
        raise ScenarioError(file, str(exc), key=f"{prefix}{'scenario' if scenario else 'compare'}") from None
    title = (scenario or f"compare {' and '.join(compare)}") if item.title is UNSET else item.title
    return LessonItem(title, scenario, compare, tuple(item.args), item.notes)


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
