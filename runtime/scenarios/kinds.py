"""The kinds of scenario and how each is read from its TOML table: ``collective`` (one
collective on worked examples), ``desync`` (a rank that misbehaves), and the training kinds.

Adding a kind is one reader function and one entry in :data:`READERS`."""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from math import prod
from pathlib import Path
from types import MappingProxyType

from .schema import (
    COLLECTIVES,
    DTYPES,
    FOLLOWUP_KINDS,
    NARRATION_LIMIT,
    ONE_SOURCE,
    PHASE_KEYS,
    PLACEHOLDER_NEEDS,
    PLACEHOLDERS,
    REDUCE_OPS,
    REDUCING,
    ROOTED,
    SPLITTING,
    Example,
    Followup,
    Scenario,
    shape_of,
)
from .tables import REQUIRED, Table, array, check_dtype, flat, is_list, is_number, is_str, shape_text
from .training.kinds import TRAINING_KINDS, Setting, SettingValue

__all__ = ["COMMON_KEYS", "Common", "READERS", "KINDS", "FAULTS", "DESYNC_PHASE_KEYS"]

# ----------------------------------------------------------------------------- collective kind


COMMON_KEYS = ("name", "description", "kind", "default_gpus")
_COLLECTIVE_KEYS = ("collective", "root", "reduce_op", "dtype", "buffer_name", "example",
                    "followup", "narration")  # fmt: skip
_EXAMPLE_KEYS = ("gpus", "source", "reduce_op", "inputs", "names")
_FOLLOWUP_KEYS = ("kind", "rank", "name", "right_name", "right", "note_source", "note_result")


@dataclass(frozen=True)
class Common:
    """Keys every kind of scenario has, already validated."""

    name: str
    path: Path
    description: str
    kind: str
    default_gpus: int


@dataclass(frozen=True)
class _Settings:
    """What the inputs of a collective scenario are checked against."""

    collective: str
    root: int
    dtype: str


def _read_collective(top: Table, common: Common) -> Scenario:
    """The ``kind = "collective"`` part of a scenario: one collective on worked examples."""
    collective = top.choice("collective", COLLECTIVES)
    root = _read_root(top, collective)
    reduce_op = _read_reduce_op(top, collective, default="sum")
    settings = _Settings(collective, root, top.choice("dtype", DTYPES, "float32"))
    examples = tuple(_read_example(t, settings) for t in top.tables("example"))
    _check_examples(top, examples, common.default_gpus)
    followup = _read_followup(top, collective, common.default_gpus)
    if followup is not None:
        default = next(e for e in examples if e.gpus == common.default_gpus)
        problem = followup.check(default.shape, default.gpus)
        if problem:
            raise top.error("followup.right", f"{problem} (in the {default.gpus}-rank example)")
    keys = tuple(k for k in PHASE_KEYS if k != "followup" or followup is not None)
    return Scenario(
        **vars(common),
        collective=collective,
        root=root,
        reduce_op=reduce_op,
        dtype=settings.dtype,
        buffer_name=top.line("buffer_name"),
        examples=examples,
        followup=followup,
        narration=_read_narration(top, keys, collective),
    )


def _read_root(top: Table, collective: str) -> int:
    """``root``: 0 unless set; only rooted collectives take one."""
    if "root" in top.data and collective not in ROOTED:
        raise top.error("root", f"{collective} takes no root (only {_names(ROOTED)} do)")
    return top.integer("root", 0, 0)


def _read_reduce_op(table: Table, collective: str, default: str | None) -> str | None:
    """``reduce_op`` of a table: only reducing collectives take one."""
    if collective not in REDUCING:
        if "reduce_op" in table.data:
            only = f"only {_names(REDUCING)} do"
            raise table.error("reduce_op", f"{collective} takes no reduce op ({only})")
        return None
    return table.choice("reduce_op", REDUCE_OPS, default)


def _names(collectives: frozenset[str]) -> str:
    """Collective names in COLLECTIVES order, comma-separated."""
    return ", ".join(c for c in COLLECTIVES if c in collectives)


def _read_example(table: Table, settings: _Settings) -> Example:
    """One ``[[example]]``: its inputs checked against the collective, the root and the dtype."""
    table.only(_EXAMPLE_KEYS)
    gpus = table.integer("gpus", 1)
    source = table.line("source")
    reduce_op = _read_reduce_op(table, settings.collective, default=None)
    if settings.collective in ROOTED and settings.root >= gpus:
        raise table.error("gpus", f"{gpus} ranks have no rank {settings.root} to be the root")
    raw = table.value("inputs", is_list, "a list with one entry per rank", REQUIRED)
    if len(raw) != gpus:
        raise table.error("inputs", f"{len(raw)} entries for gpus = {gpus} (one per rank)")
    try:
        inputs = tuple(array(value, f"rank {rank}") for rank, value in enumerate(raw))
        for rank, values in enumerate(inputs):
            check_dtype(values, settings.dtype, f"rank {rank}")
        _check_placement(inputs, settings)
    except ValueError as problem:
        raise table.error("inputs", str(problem)) from None
    names = table.value("names", is_list, "a list of short strings, one per element of a rank's input", None)
    if names is not None:
        elements = prod(shape_of(next(value for value in inputs if value)))
        if len(names) != elements or not all(isinstance(n, str) and 0 < len(n) <= 8 for n in names):
            raise table.error("names", f"expected {elements} names of 1 to 8 characters, one per element of a rank's input")
        names = tuple(names)
    return Example(gpus, source, inputs, reduce_op, names)


def _check_placement(inputs: tuple[tuple, ...], settings: _Settings) -> None:
    """Which ranks hold data, with equal shapes, split evenly where the collective splits."""
    for rank, values in enumerate(inputs):
        holds = settings.collective not in ONE_SOURCE or rank == settings.root
        if holds and not values:
            raise ValueError(f"rank {rank} has no data; {settings.collective} needs data there")
        if values and not holds:
            raise ValueError(
                f"rank {rank} holds data, but only the root (rank {settings.root}) holds data "
                f"before {settings.collective}; write [] for the other ranks"
            )
    shapes = {rank: shape_of(values) for rank, values in enumerate(inputs) if values}
    usual = Counter(shapes.values()).most_common(1)[0][0]
    for rank, shape in shapes.items():
        if shape != usual:
            raise ValueError(
                f"rank {rank} has {shape_text(shape)}, the other ranks {shape_text(usual)} "
                "(inputs must have equal shapes)"
            )
    count = len(flat(inputs[next(iter(shapes))]))
    if settings.collective in SPLITTING and count % len(inputs):
        raise ValueError(
            f"{count} elements per rank do not split evenly into {len(inputs)} parts "
            f"({settings.collective} gives every rank an equal part)"
        )


def _check_examples(top: Table, examples: tuple[Example, ...], default_gpus: int) -> None:
    """One example per world size, and one for the default world size."""
    seen: dict[int, int] = {}
    for i, example in enumerate(examples):
        if example.gpus in seen:
            twin = f"example[{seen[example.gpus]}]"
            raise top.error(f"example[{i}].gpus", f"{example.gpus} is also the gpus of {twin}")
        seen[example.gpus] = i
    if default_gpus not in seen:
        raise top.error("default_gpus", f"no [[example]] has gpus = {default_gpus}")


def _read_followup(top: Table, collective: str, default_gpus: int) -> Followup | None:
    """The optional ``[followup]``: a computation on the gathered result of an all_gather."""
    table = top.table("followup", None)
    if table is None:
        return None
    if collective != "all_gather":
        raise top.error("followup", f"only all_gather takes a followup, not {collective}")
    table.only(_FOLLOWUP_KEYS)
    kind = table.choice("kind", FOLLOWUP_KINDS)
    rank = table.integer("rank", 0)
    if rank >= default_gpus:
        raise table.error("rank", f"{rank} is not a rank among default_gpus = {default_gpus}")
    name, right_name = table.line("name"), table.line("right_name")
    raw = table.value("right", is_list, "a 2-D list of numbers", REQUIRED)
    try:
        right = array(raw, "it")
    except ValueError as problem:
        raise table.error("right", str(problem)) from None
    if not right or len(shape_of(right)) != 2:
        raise table.error("right", "expected a non-empty 2-D list of numbers, e.g. [[1, 2]]")
    note_source = table.line("note_source", None)
    raw_note = table.value("note_result", is_list, "a 2-D list of numbers (the result the note prints)", None)
    note = None
    if raw_note is not None:
        if note_source is None:
            raise table.error("note_result", "needs note_source, the note that prints it")
        try:
            note = array(raw_note, "it")
        except ValueError as problem:
            raise table.error("note_result", str(problem)) from None
    return Followup(kind, rank, name, right_name, right, note_source, note)


def _read_narration(top: Table, keys: tuple[str, ...], collective: str) -> Mapping[str, str]:
    """``[narration]``: exactly ``keys``, each a short text using only known placeholders."""
    table = top.table("narration")
    table.only(keys)
    texts = {key: table.value(key, is_str, "a string", REQUIRED) for key in keys}
    for key, text in texts.items():
        problem = _narration_problem(text, collective)
        if problem:
            raise table.error(key, problem)
    return MappingProxyType(texts)


def _narration_problem(text: str, collective: str, known: frozenset[str] = PLACEHOLDERS) -> str | None:
    """What is wrong with one narration text (placeholders from ``known``), or None."""
    if not text.strip():
        return "is empty"
    if len(text) > NARRATION_LIMIT:
        return f"{len(text)} characters; keep it to {NARRATION_LIMIT}"
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as problem:
        return f"{problem} (write {{{{ or }}}} for a literal brace)"
    for name in names:
        if name not in known:
            return f"unknown placeholder {{{name}}} (known: {', '.join(sorted(known))})"
        if known is PLACEHOLDERS and collective not in PLACEHOLDER_NEEDS.get(name, COLLECTIVES):
            return f"placeholder {{{name}}} has no value for {collective}"
    return None


# --------------------------------------------------------------------------------- desync kind

FAULTS = ("swap", "skip", "raise")
"""How the odd rank of a desync scenario misbehaves: call another collective, none, or raise."""

_DESYNC_KEYS = ("collective", "odd_rank", "fault", "swap_with", "timeout", "narration")
DESYNC_PHASE_KEYS = ("setup", "agree", "desync")


def _read_desync(top: Table, common: Common) -> Scenario:
    """The ``kind = "desync"`` part: every rank runs ``collective`` once together, then
    ``odd_rank`` calls ``swap_with`` instead (fault "swap"), nothing (fault "skip"), or raises an
    exception (fault "raise": what a crashing rank looks like)."""
    collective = top.choice("collective", tuple(c for c in COLLECTIVES if c not in ROOTED))
    fault = top.choice("fault", FAULTS)
    odd_rank = top.integer("odd_rank", 0)
    if odd_rank >= common.default_gpus:
        raise top.error("odd_rank", f"{odd_rank} is not a rank of the default {common.default_gpus}-rank run")
    swap_with = None
    if fault == "swap":
        swap_with = top.choice("swap_with", tuple(c for c in COLLECTIVES if c not in ROOTED and c != collective))
    elif "swap_with" in top.data:
        raise top.error("swap_with", "only fault = \"swap\" takes it")
    timeout = top.integer("timeout", 1, default=None)  # the hang report's default --timeout, in seconds
    return Scenario(
        **vars(common), collective=collective, root=0, reduce_op="sum" if collective in REDUCING else None,
        dtype="float32", buffer_name="x", examples=(), followup=None,
        narration=_read_narration(top, DESYNC_PHASE_KEYS, collective),
        settings=MappingProxyType({"fault": fault, "odd_rank": odd_rank, "swap_with": swap_with,
                                   **({} if timeout is None else {"timeout": timeout})}),
    )


# ------------------------------------------------------------------------------ training kinds


def _read_training(top: Table, common: Common) -> Scenario:
    """A training kind (runtime.training.kinds): optional ``[settings]``, narration of every phase."""
    kind = TRAINING_KINDS[common.kind]
    settings = dict(kind.defaults())
    table = top.table("settings", None)
    if table is not None:
        table.only(tuple(settings))
        for setting in kind.settings:
            settings[setting.name] = _read_setting(table, setting)
    narration = top.table("narration")
    narration.only(kind.phase_keys)
    texts = {key: narration.value(key, is_str, "a string", REQUIRED) for key in kind.phase_keys}
    for key, text in texts.items():
        problem = _narration_problem(text, "", kind.placeholders)
        if problem:
            raise narration.error(key, problem)
    return Scenario(
        **vars(common), collective="", root=0, reduce_op=None, dtype="float32", buffer_name="",
        examples=(), followup=None, narration=MappingProxyType(texts), settings=MappingProxyType(settings),
    )


def _read_setting(table: Table, setting: Setting) -> SettingValue:
    """One setting: an integer, or a number for float settings, at least its minimum."""
    if setting.type is int:
        return table.integer(setting.name, setting.minimum, setting.default)
    number = table.value(setting.name, is_number, "a number", setting.default)
    if number < setting.minimum:
        raise table.error(setting.name, f"{number} is less than {setting.minimum}")
    return float(number)


READERS: dict[str, tuple[tuple[str, ...], Callable[[Table, Common], Scenario]]] = {
    "collective": (_COLLECTIVE_KEYS, _read_collective),
    "desync": (_DESYNC_KEYS, _read_desync),
    **{name: (("settings", "narration"), _read_training) for name in TRAINING_KINDS},
}
"""Scenario kinds: the top-level keys each one adds, and the reader that builds its Scenario.

Adding a kind is one reader function and one entry here."""

KINDS = tuple(READERS)
"""Values ``kind`` may take."""

