"""Scenarios as validated data: one TOML file each, loaded into frozen dataclasses.

A scenario says which collective runs, on how many ranks by default, with which inputs (the worked
examples of the teaching notes, one per world size) and what the narration says in each phase.
Everything is checked when the file is loaded, so a worker never starts on a scenario that cannot
run: every problem raises :class:`ScenarioError`, a one-line :class:`UsageError` that names the
file, the key (``example[1].inputs``: arrays of tables count from 0) and what is wrong.

Only the *inputs* live here. Results are never written down: they come from the real run.
"""

from __future__ import annotations

import difflib
import importlib.resources
import re
import tomllib
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..wire.files import read_regular_file
from .kinds import COMMON_KEYS, KINDS, READERS, Common
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
from .tables import Table

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

_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
_TOML_WHERE = re.compile(r"^(?P<msg>.*) \(at line (?P<line>\d+), column (?P<col>\d+)\)$", re.S)


# ----------------------------------------------------------------------------------- loading


def _display(path: Path) -> str:
    """The path as messages show it: relative to the working directory when inside it."""
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _parse(path: Path, file: str) -> dict[str, Any]:
    """The file's TOML, or a ScenarioError for a missing, unreadable or malformed file."""
    try:
        return tomllib.loads(read_regular_file(path, MAX_SCENARIO_BYTES, "scenario file").decode("utf-8"))
    except RecursionError:
        raise ScenarioError(file, "invalid TOML (nested too deeply)") from None
    except FileNotFoundError:
        raise ScenarioError(file, "no such file") from None
    except (OSError, UnicodeDecodeError) as problem:
        raise ScenarioError(file, f"cannot be read ({problem})") from None
    except tomllib.TOMLDecodeError as problem:
        where = _TOML_WHERE.match(str(problem))
        if where is None:
            raise ScenarioError(file, f"invalid TOML ({problem})") from None
        detail = f"{where['msg']}, column {where['col']}"
        raise ScenarioError(file, f"invalid TOML ({detail})", line=int(where["line"])) from None


def load_scenario(path: Path | str) -> Scenario:
    """Read and validate one scenario file; every problem raises :class:`ScenarioError`."""
    path = Path(path)
    file = _display(path)
    top = Table(file, _parse(path, file))
    kind = top.choice("kind", KINDS)
    kind_keys, read = READERS[kind]
    top.only(COMMON_KEYS + kind_keys)
    name = top.line("name")
    if name != path.stem:
        raise top.error("name", f"{name!r} must equal the file name without .toml ({path.stem!r})")
    if not _NAME.fullmatch(name):
        raise top.error("name", f"{name!r} is not kebab-case (lower-case words joined by '-')")
    common = Common(name, path, top.line("description"), kind, top.integer("default_gpus", 1))
    return read(top, common)


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
