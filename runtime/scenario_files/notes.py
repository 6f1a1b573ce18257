"""A teacher's own notes, added to a scenario's narration phase by phase.

``collviz SCENARIO --notes FILE`` (and a lesson's ``notes``) take notes keyed by scenario name and
narration key (the phases' ``key``: ``setup``, ``collective``, … — ``collviz SCENARIO --help``
lists a scenario's keys). Two formats:

TOML::

    [all-gather]
    setup = "Ask: how much of W_query does each rank hold?"

Markdown (``.md``): a ``##`` heading per scenario, a ``###`` heading per phase key, the note below::

    ## all-gather
    ### setup
    Ask: how much of W_query does each rank hold?

A phase key holds for every phase of that kind (FSDP's ``forward_all_gather`` opens once per
unit); ``UNIT.KEY`` (``block0.forward_all_gather``, ``embed.…``, ``head.…``) holds for one unit's
phase only, after the key's own note. A note for a scenario, unit or phase key that does not
exist is a one-line error naming it, with the keys that do; notes are appended to that phase's
narration, marked as the teacher's.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path

from ..errors import UsageError
from ..wire.files import read_regular_file
from ..wire.protocol import NOTE_MARK
from .schema import Scenario

__all__ = ["MAX_NOTES_BYTES", "load_notes", "parse_notes", "with_notes", "note_units"]

MAX_NOTES_BYTES = 1 << 20
"""A notes file larger than this is refused unread."""

Notes = dict[str, dict[str, str]]
"""scenario name → narration key → note."""


def load_notes(path: Path) -> Notes:
    """The notes of ``path`` (``.md`` read as Markdown, anything else as TOML); UsageError names
    the file and the problem."""
    try:
        text = read_regular_file(path, MAX_NOTES_BYTES, "--notes").decode("utf-8")
    except FileNotFoundError:
        raise UsageError(f"--notes {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--notes {path}: cannot be read ({exc})") from None
    return parse_notes(text, str(path), markdown=path.suffix.lower() in (".md", ".markdown"))


def parse_notes(text: str, file: str, *, markdown: bool) -> Notes:
    """Notes from ``text`` (``file`` names it in errors)."""
    return _from_markdown(text, file) if markdown else _from_toml(text, file)


def _from_toml(text: str, file: str) -> Notes:
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise UsageError(f"{file}: invalid TOML ({exc})") from None
    notes: Notes = {}
    for scenario, table in data.items():
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise UsageError(f"{file}: [{scenario}] must be a table of phase key = \"note\" strings")
        notes[scenario] = {key: value.strip() for key, value in table.items()}
    return notes


_HEADING = re.compile(r"^(#{2,3})\s+(.+?)\s*#*\s*$")


def _from_markdown(text: str, file: str) -> Notes:
    notes: Notes = {}
    scenario: str | None = None
    key: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        heading = _HEADING.match(line)
        if heading and len(heading[1]) == 2:
            scenario, key = heading[2], None
            notes.setdefault(scenario, {})
        elif heading:
            if scenario is None:
                raise UsageError(f"{file}: line {number}: phase '{heading[2]}' comes before any '## scenario' heading")
            key = heading[2]
            notes[scenario][key] = ""
        elif key is not None and scenario is not None:
            notes[scenario][key] = f"{notes[scenario][key]}\n{line}".strip()
    return notes


def note_units(scenario: Scenario) -> list[str]:
    """The units of the scenario's model that notes may address one by one (``UNIT.KEY``): FSDP's
    units (``embed``, ``block0`` …, ``head``) for the fully sharded kinds; none for the others."""
    if scenario.kind not in ("fsdp", "hsdp", "fsdp-tp"):
        return []
    return ["embed", *(f"block{i}" for i in range(int(scenario.settings["blocks"]))), "head"]


def _with_note(text: str, note: str) -> str:
    """``text`` with ``note`` appended as the teacher's (braces in a note are literal)."""
    if not note:
        return text
    return f"{text}\n\n{NOTE_MARK}{note.replace('{', '{{').replace('}', '}}')}"


def with_notes(scenario: Scenario, notes: Mapping[str, str], file: str) -> Scenario:
    """``scenario`` with each note appended to the narration of its phase key (or of one unit's
    phase, ``UNIT.KEY``). A key the scenario has no narration or unit for is a UsageError naming
    it and the keys there are."""
    units = note_units(scenario)
    for key in notes:
        unit, _, base = key.rpartition(".")
        if base not in scenario.narration or (unit and unit not in units):
            per_unit = f"; per unit: UNIT.KEY with UNIT one of {', '.join(units)}" if units else ""
            raise UsageError(f"{file}: {scenario.name} has no phase '{key}' "
                             f"(its phases: {', '.join(scenario.narration)}{per_unit})")
    narration = dict(scenario.narration)
    for key, note in notes.items():
        if "." not in key:
            narration[key] = _with_note(narration[key], note)
    for key, note in notes.items():
        if "." in key:
            narration[key] = _with_note(narration.get(key, narration[key.rpartition(".")[2]]), note)
    return dataclasses.replace(scenario, narration=narration)
