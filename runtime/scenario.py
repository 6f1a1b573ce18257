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
import string
import tomllib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .errors import UsageError
from .training.kinds import TRAINING_KINDS, Setting, SettingValue

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

COLLECTIVES = (
    "broadcast",
    "reduce",
    "all_reduce",
    "gather",
    "all_gather",
    "scatter",
    "reduce_scatter",
    "all_to_all",
)
"""Every collective a ``kind = "collective"`` scenario can run, by torch.distributed's name."""

ROOTED = frozenset({"broadcast", "reduce", "gather", "scatter"})
"""Collectives that take a root (``src`` or ``dst``)."""

REDUCING = frozenset({"reduce", "all_reduce", "reduce_scatter"})
"""Collectives that take a reduce op."""

ONE_SOURCE = frozenset({"broadcast", "scatter"})
"""Collectives where only the root holds data before the call; the other ranks hold ``()``."""

SPLITTING = frozenset({"scatter", "reduce_scatter", "all_to_all"})
"""Collectives that cut each input into one equal part per rank."""

REDUCE_OPS = ("sum", "avg", "max", "min", "product")
"""Reduce ops, by the lower-case name of ``torch.distributed.ReduceOp``."""

DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "int8")
"""Tensor dtypes a scenario may ask for, by the name of the ``torch`` attribute."""

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "uint8": (0, 2**8 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
"""Integer dtypes and the values they hold; inputs for them must be integers in range."""

PHASE_KEYS = ("setup", "collective", "followup", "release")
"""Narration keys of a collective scenario, in phase order ("followup" only with a followup)."""

PLACEHOLDERS = frozenset({"world_size", "op", "root", "dtype", "count", "bytes"})
"""``{names}`` the runtime fills in narration: ``count`` and ``bytes`` are per rank."""

FOLLOWUP_KINDS = ("matmul",)
"""Computations a :class:`Followup` can do on a collective's result."""

NARRATION_LIMIT = 400
"""Most characters one narration text may have: it shares the screen with the view."""

_PLACEHOLDER_NEEDS = {"op": REDUCING, "root": ROOTED}
"""Placeholders that only some collectives can fill."""

_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
_TOML_WHERE = re.compile(r"^(?P<msg>.*) \(at line (?P<line>\d+), column (?P<col>\d+)\)$", re.S)
_REQUIRED: Any = object()


class ScenarioError(UsageError):
    """A scenario file that cannot be used; the message names the file, the key and the problem.

    ``key`` is the dotted key (``example[1].inputs``) or None for problems with the file as a
    whole; ``line`` is set for TOML syntax errors.
    """

    def __init__(self, file: str, problem: str, *, key: str | None = None, line: int | None = None):
        where = ""
        if key is not None:
            where = f"key '{key}': "
        elif line is not None:
            where = f"line {line}: "
        super().__init__(f"{file}: {where}{problem}")
        self.file = file
        self.key = key
        self.line = line
        self.problem = problem

    def __reduce__(self) -> tuple:
        """Pickle by the constructor's arguments, so the error can cross process boundaries."""
        return (_scenario_error, (self.file, self.problem, self.key, self.line))


def _scenario_error(file: str, problem: str, key: str | None, line: int | None) -> ScenarioError:
    """Rebuild a pickled ScenarioError."""
    return ScenarioError(file, problem, key=key, line=line)


# --------------------------------------------------------------------------------- data classes


@dataclass(frozen=True)
class Example:
    """One worked example from the notes, for one world size: what each rank holds beforehand.

    ``inputs`` has one entry per rank: a rectangular nested tuple of numbers (1-D or 2-D), or
    ``()`` for "this rank has no data" (the non-root ranks of broadcast and scatter).
    ``reduce_op`` overrides the scenario's default op when set.
    """

    gpus: int
    source: str
    inputs: tuple[tuple, ...]
    reduce_op: str | None = None

    def rank_input(self, rank: int) -> tuple:
        """What ``rank`` holds before the collective (``()`` when it holds no data)."""
        return self.inputs[rank]

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape every rank holding data shares (for scatter: the root's whole buffer)."""
        return next(_shape(value) for value in self.inputs if value)


@dataclass(frozen=True)
class Followup:
    """A computation one rank does on a collective's result (all-gather only, for now).

    ``kind = "matmul"``: ``result = gathered @ transpose(right)``, where ``gathered`` is the
    collective's output reshaped to 2-D (world size × rows of one rank's input, columns).
    """

    kind: str
    rank: int
    name: str
    right_name: str
    right: tuple[tuple, ...]

    def check(self, input_shape: Sequence[int], gpus: int) -> str | None:
        """Why this followup cannot run on ``gpus`` ranks holding ``input_shape`` each, or None."""
        if self.rank >= gpus:
            return f"rank {self.rank} does not exist among {gpus} ranks"
        columns, right_columns = input_shape[-1], len(self.right[0])
        if columns != right_columns:
            return (
                f"the gathered buffer has {columns} columns but {self.right_name} has "
                f"{right_columns}; {self.kind} needs them equal"
            )
        return None


@dataclass(frozen=True)
class Scenario:
    """A validated scenario: what runs, on how many ranks, with which inputs and narration."""

    name: str
    path: Path
    description: str
    kind: str
    collective: str
    default_gpus: int
    root: int
    reduce_op: str | None
    dtype: str
    buffer_name: str
    examples: tuple[Example, ...]
    followup: Followup | None
    narration: Mapping[str, str]
    settings: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """Settings particular to the scenario's kind (e.g. which rank misbehaves in ``desync``)."""

    def example_for(self, gpus: int) -> Example | None:
        """The worked example for ``gpus`` ranks, or None when the notes have none."""
        return next((example for example in self.examples if example.gpus == gpus), None)

    def op_for(self, example: Example) -> str | None:
        """The reduce op ``example`` runs with: its own when set, else the scenario's default."""
        return example.reduce_op or self.reduce_op

    def followup_for(self, example: Example) -> Followup | None:
        """The followup when it can run on ``example``'s shapes (see :meth:`Followup.check`)."""
        if self.followup is None or self.followup.check(example.shape, example.gpus) is not None:
            return None
        return self.followup


# ------------------------------------------------------------------------------- reading tables


def _describe(value: Any) -> str:
    """How a TOML value is named in an error: its type and, when short, the value."""
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__} ({value})"


def _is_str(value: Any) -> bool:
    """True for TOML strings."""
    return isinstance(value, str)


def _is_list(value: Any) -> bool:
    """True for TOML arrays."""
    return isinstance(value, list)


def _is_int(value: Any) -> bool:
    """True for TOML integers; booleans are not integers."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    """True for TOML integers and floats; booleans are not numbers."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Table:
    """One TOML table being read: typed getters that name the full key in every error."""

    def __init__(self, file: str, data: Mapping[str, Any], prefix: str = ""):
        self.file = file
        self.data = data
        self.prefix = prefix

    def error(self, key: str, problem: str) -> ScenarioError:
        """A ScenarioError about ``key`` of this table."""
        return ScenarioError(self.file, problem, key=f"{self.prefix}{key}")

    def only(self, known: Sequence[str]) -> None:
        """Refuse keys not in ``known``: most often a typo, so suggest the closest known key."""
        for key in self.data:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f"known: {', '.join(known)}"
                if close:
                    hint = f"probably a typo for '{close[0]}'"
                raise self.error(key, f"unknown key ({hint})")

    def value(self, key: str, check: Callable[[Any], bool], expected: str, default: Any) -> Any:
        """The value of ``key`` when ``check`` accepts it; ``default`` when absent."""
        if key not in self.data:
            if default is _REQUIRED:
                raise self.error(key, f"missing (required: {expected})")
            return default
        found = self.data[key]
        if not check(found):
            raise self.error(key, f"expected {expected}, got {_describe(found)}")
        return found

    def line(self, key: str, default: Any = _REQUIRED) -> str:
        """A non-empty one-line string."""
        text = self.value(key, _is_str, "a string", default)
        if text is not default and (not text.strip() or "\n" in text):
            raise self.error(key, "must be one non-empty line")
        return text

    def integer(self, key: str, minimum: int, default: Any = _REQUIRED) -> int:
        """An integer of at least ``minimum``."""
        number = self.value(key, _is_int, "an integer", default)
        if number is not default and number < minimum:
            raise self.error(key, f"{number} is less than {minimum}")
        return number

    def choice(self, key: str, choices: Sequence[str], default: Any = _REQUIRED) -> str:
        """One of ``choices``."""
        expected = f"one of {', '.join(choices)}"
        word = self.value(key, _is_str, expected, default)
        if word is not default and word not in choices:
            raise self.error(key, f"{word!r} is not {expected}")
        return word

    def table(self, key: str, default: Any = _REQUIRED) -> _Table | None:
        """A sub-table, read with its dotted key as prefix."""
        data = self.value(key, lambda v: isinstance(v, dict), "a table", default)
        return None if data is default else _Table(self.file, data, f"{self.prefix}{key}.")

    def tables(self, key: str) -> list[_Table]:
        """A non-empty array of tables (``[[key]]``), each read as ``key[i].``."""
        items = self.value(
            key,
            lambda v: isinstance(v, list) and bool(v) and all(isinstance(i, dict) for i in v),
            f"at least one [[{key}]] table",
            _REQUIRED,
        )
        return [_Table(self.file, t, f"{self.prefix}{key}[{i}].") for i, t in enumerate(items)]


# ------------------------------------------------------------------------------ arrays of numbers


def _shape(value: tuple) -> tuple[int, ...]:
    """Shape of a validated 1-D or 2-D nested tuple."""
    return (len(value), len(value[0])) if isinstance(value[0], tuple) else (len(value),)


def _shape_text(shape: tuple[int, ...]) -> str:
    """``(3,)`` → ``3 elements``; ``(1, 4)`` → ``shape 1x4``."""
    if len(shape) == 1:
        return f"{shape[0]} element{'s' if shape[0] != 1 else ''}"
    return f"shape {shape[0]}x{shape[1]}"


def _row(values: list, what: str) -> tuple:
    """A list of numbers as a tuple; ValueError naming the first non-number."""
    for value in values:
        if not _is_number(value):
            raise ValueError(f"{what} holds {_describe(value)}, not a number")
    return tuple(values)


def _array(value: Any, what: str) -> tuple:
    """A TOML list as a 1-D or 2-D rectangular nested tuple (``()`` when empty).

    Raises ValueError with the problem, naming ``what`` ("rank 2", "followup.right").
    """
    if not isinstance(value, list):
        raise ValueError(f"{what} is {_describe(value)}; expected a list of numbers, e.g. [1, 2]")
    if not value or not isinstance(value[0], list):
        return _row(value, what)
    if not all(isinstance(row, list) for row in value):
        raise ValueError(f"{what} mixes lists and numbers")
    if any(isinstance(item, list) for row in value for item in row):
        raise ValueError(f"{what} has more than 2 dimensions")
    rows = tuple(_row(row, f"{what}, row {i},") for i, row in enumerate(value))
    widths = sorted({len(row) for row in rows})
    if len(widths) > 1 or widths[0] == 0:
        raise ValueError(f"{what} is ragged: its rows have {', '.join(map(str, widths))} elements")
    return rows


def _check_dtype(values: tuple, dtype: str, what: str) -> None:
    """Refuse values the dtype cannot hold exactly (fractions or out-of-range integers)."""
    if dtype not in _INT_RANGES:
        return
    low, high = _INT_RANGES[dtype]
    for value in _flat(values):
        if not isinstance(value, int):
            raise ValueError(f"{what} holds {value}, which is not an integer (dtype {dtype})")
        if not low <= value <= high:
            raise ValueError(f"{what} holds {value}, outside {dtype}'s range {low}..{high}")


def _flat(values: tuple) -> tuple:
    """The numbers of a 1-D or 2-D nested tuple, row by row."""
    if values and isinstance(values[0], tuple):
        return tuple(x for row in values for x in row)
    return values


# ----------------------------------------------------------------------------- collective kind


_COMMON_KEYS = ("name", "description", "kind", "default_gpus")
_COLLECTIVE_KEYS = ("collective", "root", "reduce_op", "dtype", "buffer_name", "example",
                    "followup", "narration")  # fmt: skip
_EXAMPLE_KEYS = ("gpus", "source", "reduce_op", "inputs")
_FOLLOWUP_KEYS = ("kind", "rank", "name", "right_name", "right")


@dataclass(frozen=True)
class _Common:
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


def _read_collective(top: _Table, common: _Common) -> Scenario:
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


def _read_root(top: _Table, collective: str) -> int:
    """``root``: 0 unless set; only rooted collectives take one."""
    if "root" in top.data and collective not in ROOTED:
        raise top.error("root", f"{collective} takes no root (only {_names(ROOTED)} do)")
    return top.integer("root", 0, 0)


def _read_reduce_op(table: _Table, collective: str, default: str | None) -> str | None:
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


def _read_example(table: _Table, settings: _Settings) -> Example:
    """One ``[[example]]``: its inputs checked against the collective, the root and the dtype."""
    table.only(_EXAMPLE_KEYS)
    gpus = table.integer("gpus", 1)
    source = table.line("source")
    reduce_op = _read_reduce_op(table, settings.collective, default=None)
    if settings.collective in ROOTED and settings.root >= gpus:
        raise table.error("gpus", f"{gpus} ranks have no rank {settings.root} to be the root")
    raw = table.value("inputs", _is_list, "a list with one entry per rank", _REQUIRED)
    if len(raw) != gpus:
        raise table.error("inputs", f"{len(raw)} entries for gpus = {gpus} (one per rank)")
    try:
        inputs = tuple(_array(value, f"rank {rank}") for rank, value in enumerate(raw))
        for rank, values in enumerate(inputs):
            _check_dtype(values, settings.dtype, f"rank {rank}")
        _check_placement(inputs, settings)
    except ValueError as problem:
        raise table.error("inputs", str(problem)) from None
    return Example(gpus, source, inputs, reduce_op)


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
    shapes = {rank: _shape(values) for rank, values in enumerate(inputs) if values}
    usual = Counter(shapes.values()).most_common(1)[0][0]
    for rank, shape in shapes.items():
        if shape != usual:
            raise ValueError(
                f"rank {rank} has {_shape_text(shape)}, the other ranks {_shape_text(usual)} "
                "(inputs must have equal shapes)"
            )
    count = len(_flat(inputs[next(iter(shapes))]))
    if settings.collective in SPLITTING and count % len(inputs):
        raise ValueError(
            f"{count} elements per rank do not split evenly into {len(inputs)} parts "
            f"({settings.collective} gives every rank an equal part)"
        )


def _check_examples(top: _Table, examples: tuple[Example, ...], default_gpus: int) -> None:
    """One example per world size, and one for the default world size."""
    seen: dict[int, int] = {}
    for i, example in enumerate(examples):
        if example.gpus in seen:
            twin = f"example[{seen[example.gpus]}]"
            raise top.error(f"example[{i}].gpus", f"{example.gpus} is also the gpus of {twin}")
        seen[example.gpus] = i
    if default_gpus not in seen:
        raise top.error("default_gpus", f"no [[example]] has gpus = {default_gpus}")


def _read_followup(top: _Table, collective: str, default_gpus: int) -> Followup | None:
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
    raw = table.value("right", _is_list, "a 2-D list of numbers", _REQUIRED)
    try:
        right = _array(raw, "it")
    except ValueError as problem:
        raise table.error("right", str(problem)) from None
    if not right or len(_shape(right)) != 2:
        raise table.error("right", "expected a non-empty 2-D list of numbers, e.g. [[1, 2]]")
    return Followup(kind, rank, name, right_name, right)


def _read_narration(top: _Table, keys: tuple[str, ...], collective: str) -> Mapping[str, str]:
    """``[narration]``: exactly ``keys``, each a short text using only known placeholders."""
    table = top.table("narration")
    table.only(keys)
    texts = {key: table.value(key, _is_str, "a string", _REQUIRED) for key in keys}
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
        if known is PLACEHOLDERS and collective not in _PLACEHOLDER_NEEDS.get(name, COLLECTIVES):
            return f"placeholder {{{name}}} has no value for {collective}"
    return None


# --------------------------------------------------------------------------------- desync kind

FAULTS = ("swap", "skip", "raise")
"""How the odd rank of a desync scenario misbehaves: call another collective, none, or raise."""

_DESYNC_KEYS = ("collective", "odd_rank", "fault", "swap_with", "narration")
DESYNC_PHASE_KEYS = ("setup", "agree", "desync")


def _read_desync(top: _Table, common: _Common) -> Scenario:
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
    return Scenario(
        **vars(common), collective=collective, root=0, reduce_op="sum" if collective in REDUCING else None,
        dtype="float32", buffer_name="x", examples=(), followup=None,
        narration=_read_narration(top, DESYNC_PHASE_KEYS, collective),
        settings=MappingProxyType({"fault": fault, "odd_rank": odd_rank, "swap_with": swap_with}),
    )


# ------------------------------------------------------------------------------ training kinds


def _read_training(top: _Table, common: _Common) -> Scenario:
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
    texts = {key: narration.value(key, _is_str, "a string", _REQUIRED) for key in kind.phase_keys}
    for key, text in texts.items():
        problem = _narration_problem(text, "", kind.placeholders)
        if problem:
            raise narration.error(key, problem)
    return Scenario(
        **vars(common), collective="", root=0, reduce_op=None, dtype="float32", buffer_name="",
        examples=(), followup=None, narration=MappingProxyType(texts), settings=MappingProxyType(settings),
    )


def _read_setting(table: _Table, setting: Setting) -> SettingValue:
    """One setting: an integer, or a number for float settings, at least its minimum."""
    if setting.type is int:
        return table.integer(setting.name, setting.minimum, setting.default)
    number = table.value(setting.name, _is_number, "a number", setting.default)
    if number < setting.minimum:
        raise table.error(setting.name, f"{number} is less than {setting.minimum}")
    return float(number)


_KINDS: dict[str, tuple[tuple[str, ...], Callable[[_Table, _Common], Scenario]]] = {
    "collective": (_COLLECTIVE_KEYS, _read_collective),
    "desync": (_DESYNC_KEYS, _read_desync),
    **{name: (("settings", "narration"), _read_training) for name in TRAINING_KINDS},
}
"""Scenario kinds: the top-level keys each one adds, and the reader that builds its Scenario.

Adding a kind is one reader function and one entry here."""

KINDS = tuple(_KINDS)
"""Values ``kind`` may take."""


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
        return tomllib.loads(path.read_text(encoding="utf-8"))
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
    top = _Table(file, _parse(path, file))
    kind = top.choice("kind", KINDS)
    kind_keys, read = _KINDS[kind]
    top.only(_COMMON_KEYS + kind_keys)
    name = top.line("name")
    if name != path.stem:
        raise top.error("name", f"{name!r} must equal the file name without .toml ({path.stem!r})")
    if not _NAME.fullmatch(name):
        raise top.error("name", f"{name!r} is not kebab-case (lower-case words joined by '-')")
    common = _Common(name, path, top.line("description"), kind, top.integer("default_gpus", 1))
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
