"""The kinds of scenario and what each checks beyond its document's types: ``collective`` (one
collective on worked examples), ``desync`` (a rank that misbehaves), and the training kinds.

A decoded document (:mod:`.documents`) already has every key of the right type and range; the
reader of its kind checks what types cannot say (inputs against the collective, root and dtype;
narration placeholders) and builds the :class:`~.schema.Scenario`. Adding a kind is one document
type and one reader in :data:`READERS`.
"""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from math import prod
from pathlib import Path
from types import MappingProxyType
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from .arrays import array, check_dtype, flat, shape_text
from .documents import (
    TRAINING_DOCUMENTS,
    CollectiveDocument,
    DesyncDocument,
    ExampleDocument,
    ScenarioDocument,
)
from .schema import (
    COLLECTIVES,
    ONE_SOURCE,
    PHASE_KEYS,
    PLACEHOLDER_NEEDS,
    PLACEHOLDERS,
    REDUCING,
    ROOTED,
    SPLITTING,
    Example,
    Followup,
    Scenario,
    ScenarioError,
    shape_of,
)
from .training_kinds import TRAINING_KINDS

__all__ = ["READERS", "scenario_from"]


@dataclass(frozen=True)
class _File:
    """The file being read: how messages name it, and the keys every scenario has."""

    name: str
    common: dict[str, Any]

    def error(self, key: str, problem: str) -> ScenarioError:
        """A ScenarioError about ``key`` of this file."""
        return ScenarioError(self.name, problem, key=key)


def scenario_from(document: ScenarioDocument, path: Path, file: str) -> Scenario:
    """The Scenario of a decoded file at ``path`` (``file`` names it in messages)."""
    common = {"name": document.name, "path": path, "description": document.description,
              "kind": type(document).__struct_config__.tag, "default_gpus": document.default_gpus}
    return READERS[type(document)](document, _File(file, common))


# ----------------------------------------------------------------------------- collective kind


def _read_collective(document: CollectiveDocument, file: _File) -> Scenario:
    """The ``kind = "collective"`` part of a scenario: one collective on worked examples."""
    collective = document.collective
    if document.root is not UNSET and collective not in ROOTED:
        raise file.error("root", f"{collective} takes no root (only {_names(ROOTED)} do)")
    root = 0 if document.root is UNSET else document.root
    _refuse_reduce_op(document.reduce_op, collective, file, "reduce_op")
    examples = tuple(_read_example(e, f"example[{i}].", collective, root, document.dtype, file)
                     for i, e in enumerate(document.example))
    _check_examples(examples, document.default_gpus, file)
    followup = _read_followup(document, examples, file)
    narration = msgspec.structs.asdict(document.narration)
    if followup is None and narration["followup"] is not UNSET:
        raise file.error("narration.followup", "unknown key: only a scenario with a [followup] table narrates one")
    if followup is not None and narration["followup"] is UNSET:
        raise file.error("narration.followup", "missing (required: a string, the narration of the followup phase)")
    keys = tuple(k for k in PHASE_KEYS if k != "followup" or followup is not None)
    reduce_op = None if collective not in REDUCING else "sum" if document.reduce_op is UNSET else document.reduce_op
    return Scenario(
        **file.common, collective=collective, root=root, reduce_op=reduce_op, dtype=document.dtype,
        buffer_name=document.buffer_name, examples=examples, followup=followup,
        narration=_narration({key: narration[key] for key in keys}, PLACEHOLDERS, collective, file),
    )


def _refuse_reduce_op(reduce_op: str | UnsetType, collective: str, file: _File, key: str) -> None:
    """A reduce op given to a collective that takes none is refused."""
    if reduce_op is not UNSET and collective not in REDUCING:
        raise file.error(key, f"{collective} takes no reduce op (only {_names(REDUCING)} do)")


def _names(collectives: frozenset[str]) -> str:
    """Collective names in COLLECTIVES order, comma-separated."""
    return ", ".join(c for c in COLLECTIVES if c in collectives)


def _read_example(document: ExampleDocument, prefix: str, collective: str, root: int, dtype: str,
                  file: _File) -> Example:
    """One ``[[example]]``: its inputs checked against the collective, the root and the dtype."""
    gpus = document.gpus
    _refuse_reduce_op(document.reduce_op, collective, file, f"{prefix}reduce_op")
    if collective in ROOTED and root >= gpus:
        raise file.error(f"{prefix}gpus", f"{gpus} ranks have no rank {root} to be the root")
    if len(document.inputs) != gpus:
        raise file.error(f"{prefix}inputs", f"{len(document.inputs)} entries for gpus = {gpus} (one per rank)")
    try:
        inputs = tuple(array(value, f"rank {rank}") for rank, value in enumerate(document.inputs))
        for rank, values in enumerate(inputs):
            check_dtype(values, dtype, f"rank {rank}")
        _check_placement(inputs, collective, root)
    except ValueError as problem:
        raise file.error(f"{prefix}inputs", str(problem)) from None
    names = None
    if document.names is not UNSET:
        elements = prod(shape_of(next(value for value in inputs if value)))
        if len(document.names) != elements:
            raise file.error(f"{prefix}names", f"expected one name per element of a rank's input ({elements}), "
                                               f"got {len(document.names)}")
        names = tuple(document.names)
    reduce_op = None if document.reduce_op is UNSET else document.reduce_op
    return Example(gpus, document.source, inputs, reduce_op, names)


def _check_placement(inputs: tuple[tuple, ...], collective: str, root: int) -> None:
    """Which ranks hold data, with equal shapes, split evenly where the collective splits."""
    for rank, values in enumerate(inputs):
        holds = collective not in ONE_SOURCE or rank == root
        if holds and not values:
            raise ValueError(f"rank {rank} has no data; {collective} needs data there")
        if values and not holds:
            raise ValueError(
                f"rank {rank} holds data, but only the root (rank {root}) holds data "
                f"before {collective}; write [] for the other ranks"
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
    if collective in SPLITTING and count % len(inputs):
        raise ValueError(
            f"{count} elements per rank do not split evenly into {len(inputs)} parts "
            f"({collective} gives every rank an equal part)"
        )


def _check_examples(examples: tuple[Example, ...], default_gpus: int, file: _File) -> None:
    """One example per world size, and one for the default world size."""
    seen: dict[int, int] = {}
    for i, example in enumerate(examples):
        if example.gpus in seen:
            twin = f"example[{seen[example.gpus]}]"
            raise file.error(f"example[{i}].gpus", f"{example.gpus} is also the gpus of {twin}")
        seen[example.gpus] = i
    if default_gpus not in seen:
        raise file.error("default_gpus", f"no [[example]] has gpus = {default_gpus}")


def _read_followup(document: CollectiveDocument, examples: tuple[Example, ...], file: _File) -> Followup | None:
    """The optional ``[followup]``: a computation on the gathered result of an all_gather, checked
    against the example of the default world size."""
    table = document.followup
    if isinstance(table, UnsetType):
        return None
    if document.collective != "all_gather":
        raise file.error("followup", f"only all_gather takes a followup, not {document.collective}")
    if table.rank >= document.default_gpus:
        raise file.error("followup.rank", f"{table.rank} is not a rank among default_gpus = {document.default_gpus}")
    right = _matrix(table.right, "followup.right", file)
    if table.note_result is not UNSET and table.note_source is UNSET:
        raise file.error("followup.note_result", "needs note_source, the note that prints it")
    note = None if table.note_result is UNSET else _matrix(table.note_result, "followup.note_result", file)
    followup = Followup(table.kind, table.rank, table.name, table.right_name, right,
                        None if table.note_source is UNSET else table.note_source, note)
    default = next(e for e in examples if e.gpus == document.default_gpus)
    problem = followup.check(default.shape, default.gpus)
    if problem:
        raise file.error("followup.right", f"{problem} (in the {default.gpus}-rank example)")
    return followup


def _matrix(raw: list, key: str, file: _File) -> tuple[tuple, ...]:
    """A non-empty 2-D list of numbers."""
    try:
        matrix = array(raw, "it")
    except ValueError as problem:
        raise file.error(key, str(problem)) from None
    if not matrix or len(shape_of(matrix)) != 2:
        raise file.error(key, "expected a non-empty 2-D list of numbers, e.g. [[1, 2]]")
    return matrix


def _narration(texts: dict[str, str], known: frozenset[str], collective: str, file: _File) -> Mapping[str, str]:
    """The narration texts, each using only ``known`` placeholders (that ``collective`` can fill)."""
    for key, text in texts.items():
        problem = _placeholder_problem(text, known, collective)
        if problem:
            raise file.error(f"narration.{key}", problem)
    return MappingProxyType(texts)


def _placeholder_problem(text: str, known: frozenset[str], collective: str) -> str | None:
    """What is wrong with the placeholders of one narration text, or None."""
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


def _read_desync(document: DesyncDocument, file: _File) -> Scenario:
    """The ``kind = "desync"`` part: every rank runs ``collective`` once together, then
    ``odd_rank`` calls ``swap_with`` instead (fault "swap"), nothing (fault "skip"), or raises an
    exception (fault "raise": what a crashing rank looks like)."""
    collective, fault, odd_rank = document.collective, document.fault, document.odd_rank
    if odd_rank >= document.default_gpus:
        raise file.error("odd_rank", f"{odd_rank} is not a rank of the default {document.default_gpus}-rank run")
    swap_with = None if document.swap_with is UNSET else document.swap_with
    if fault == "swap" and swap_with in (None, collective):
        got = "nothing" if swap_with is None else f"{swap_with}, the collective itself"
        raise file.error("swap_with", f"fault = \"swap\" needs another collective to call instead (got {got})")
    if fault != "swap" and swap_with is not None:
        raise file.error("swap_with", "only fault = \"swap\" takes it")
    return Scenario(
        **file.common, collective=collective, root=0, reduce_op="sum" if collective in REDUCING else None,
        dtype="float32", buffer_name="x", examples=(), followup=None,
        narration=_narration(msgspec.structs.asdict(document.narration), PLACEHOLDERS, collective, file),
        settings=MappingProxyType({"fault": fault, "odd_rank": odd_rank, "swap_with": swap_with,
                                   **({} if document.timeout is UNSET else {"timeout": document.timeout})}),
    )


# ------------------------------------------------------------------------------ training kinds


def _read_training(document: Any, file: _File) -> Scenario:
    """A training kind (:mod:`.training.kinds`): its settings, narration of every phase."""
    kind = TRAINING_KINDS[file.common["kind"]]
    return Scenario(
        **file.common, collective="", root=0, reduce_op=None, dtype="float32", buffer_name="",
        examples=(), followup=None,
        narration=_narration(msgspec.structs.asdict(document.narration), kind.placeholders, "", file),
        settings=MappingProxyType(msgspec.structs.asdict(document.settings)),
    )


READERS: dict[type, Callable[[Any, _File], Scenario]] = {
    CollectiveDocument: _read_collective,
    DesyncDocument: _read_desync,
    **{document: _read_training for document in TRAINING_DOCUMENTS.values()},
}
"""Document type → the reader that checks it and builds its Scenario."""
