"""Scenarios as validated data: one TOML file each, loaded into frozen dataclasses.

A scenario says which collective runs, on how many ranks by default, with which inputs (the worked
examples of the teaching notes, one per world size) and what the narration says in each phase.
Everything is checked when the file is loaded, so a worker never starts on a scenario that cannot
run: the file's TOML is decoded into a typed document (:mod:`.documents`, whose JSON Schema editors
read), then checked by its kind (:mod:`.kinds`). Every problem raises :class:`ScenarioError`, a
one-line :class:`UsageError` that names the file, the key (``example[1].inputs``: arrays of tables
count from 0) and what is wrong.

Only the *inputs* live here. Results are never written down: they come from the real run.
"""

from __future__ import annotations

import difflib
import importlib.resources
from pathlib import Path

from ..errors import UsageError
from .decoding import decode_document, read_toml
from .documents import KINDS, ScenarioDocument
from .kinds import scenario_from
from .schema import (
    COLLECTIVES,
    DTYPES,
    FOLLOWUP_KINDS,
    NARRATION_LIMIT,
    ONE_SOURCE,
    PHASE_KEYS,
    PLACEHOLDERS,
    REDUCE_OPS,
    REDUCING,
    ROOTED,
    SPLITTING,
    Example,
    Followup,
    Scenario,
    ScenarioError,
)

MAX_SCENARIO_BYTES = 1 << 20
"""A scenario file larger than this is refused unread (the shipped ones are a few KiB)."""

__all__ = [
    "COLLECTIVES",
    "ROOTED",
    "REDUCING",
    "REDUCE_OPS",
    "DTYPES",
    "ONE_SOURCE",
    "SPLITTING",
    "PHASE_KEYS",
    "PLACEHOLDERS",
    "KINDS",
    "FOLLOWUP_KINDS",
    "NARRATION_LIMIT",
    "ScenarioError",
    "Example",
    "Followup",
    "Scenario",
    "load_scenario",
    "builtin_scenario_dir",
    "list_scenarios",
    "find_scenario",
]

# ----------------------------------------------------------------------------------- loading


def _display(path: Path) -> str:
    """The path as messages show it: relative to the working directory when inside it."""
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def load_scenario(path: Path | str) -> Scenario:
    """Read and validate one scenario file; every problem raises :class:`ScenarioError`."""
    path = Path(path)
    file = _display(path)
    document: ScenarioDocument = decode_document(read_toml(path, file, MAX_SCENARIO_BYTES, "scenario file"),
                                                 ScenarioDocument, file)
    if document.name != path.stem:
        raise ScenarioError(file, f"{document.name!r} must equal the file name without .toml ({path.stem!r})",
                            key="name")
    return scenario_from(document, path, file)


def builtin_scenario_dir() -> Path:
    """The folder of the scenarios shipped inside the package (works from an installed wheel)."""
    return Path(str(importlib.resources.files("collviz.scenarios")))


def list_scenarios(directory: Path | None = None) -> list[Scenario]:
    """Every scenario in ``directory`` (default: the builtin ones), sorted by name.

    A broken file raises its ScenarioError: a scenario that cannot load is never skipped quietly.
    """
    folder = builtin_scenario_dir() if directory is None else Path(directory)
    return sorted((load_scenario(p) for p in folder.glob("*.toml")), key=lambda s: s.name)


def find_scenario(name_or_path: str) -> Scenario:
    """A builtin scenario by name, or the scenario file at a path (``*.toml``, or with a ``/``).

    An unknown name raises UsageError listing the known names, with a suggestion when one is close.
    """
    if name_or_path.endswith(".toml") or "/" in name_or_path or "\\" in name_or_path:
        return load_scenario(name_or_path)
    path = builtin_scenario_dir() / f"{name_or_path}.toml"
    if path.is_file():
        return load_scenario(path)
    known = sorted(p.stem for p in builtin_scenario_dir().glob("*.toml"))
    close = difflib.get_close_matches(name_or_path, known, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise UsageError(
        f"unknown scenario '{name_or_path}'{hint}; run 'collviz list' to see them "
        f"(known: {', '.join(known)})"
    )
