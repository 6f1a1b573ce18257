"""Scenario data: the names collectives and dtypes go by, the validated dataclasses, and
:class:`ScenarioError`. Nothing here reads files (see :mod:`.loading`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..errors import UsageError

__all__ = ["COLLECTIVES", "ROOTED", "REDUCING", "ONE_SOURCE", "SPLITTING", "REDUCE_OPS", "DTYPES", "INT_RANGES", "PHASE_KEYS", "PLACEHOLDERS", "FOLLOWUP_KINDS", "NARRATION_LIMIT", "PLACEHOLDER_NEEDS", "ScenarioError", "shape_of", "Example", "Followup", "Scenario"]

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

INT_RANGES = {
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

PLACEHOLDER_NEEDS = {"op": REDUCING, "root": ROOTED}
"""Placeholders that only some collectives can fill."""



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
        super().__init__(_one_line(f"{file}: {where}{problem}"))
        self.file = file
        self.key = key
        self.line = line
        self.problem = problem

    def __reduce__(self) -> tuple:
        """Pickle by the constructor's arguments, so the error can cross process boundaries."""
        return (_scenario_error, (self.file, self.problem, self.key, self.line))


def _one_line(text: str) -> str:
    """``text`` with control characters escaped (a key or a placeholder can hold a newline)."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def _scenario_error(file: str, problem: str, key: str | None, line: int | None) -> ScenarioError:
    """Rebuild a pickled ScenarioError."""
    return ScenarioError(file, problem, key=key, line=line)


def shape_of(value: tuple) -> tuple[int, ...]:
    """Shape of a validated 1-D or 2-D nested tuple."""
    return (len(value), len(value[0])) if isinstance(value[0], tuple) else (len(value),)


# --------------------------------------------------------------------------------- data classes


@dataclass(frozen=True)
class Example:
    """One worked example from the notes, for one world size: what each rank holds beforehand.

    ``inputs`` has one entry per rank: a rectangular nested tuple of numbers (1-D or 2-D), or
    ``()`` for "this rank has no data" (the non-root ranks of broadcast and scatter).
    ``reduce_op`` overrides the scenario's default op when set; ``names`` names the elements of a
    rank's input (``A``, ``B``… for the parameters whose gradients they are), in order.
    """

    gpus: int
    source: str
    inputs: tuple[tuple, ...]
    reduce_op: str | None = None
    names: tuple[str, ...] | None = None

    def rank_input(self, rank: int) -> tuple:
        """What ``rank`` holds before the collective (``()`` when it holds no data)."""
        return self.inputs[rank]

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape every rank holding data shares (for scatter: the root's whole buffer)."""
        return next(shape_of(value) for value in self.inputs if value)


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
    note_source: str | None = None
    """The teaching note that prints this result, when ``note_result`` gives what it prints."""
    note_result: tuple[tuple, ...] | None = None
    """The result as the note prints it, shown beside torch's and compared (the note may be wrong)."""

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

