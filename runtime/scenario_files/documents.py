"""Scenario and lesson files as typed documents: msgspec Structs that say which keys each kind of
file has, of which type and range, with a description of each key.

:func:`.decoding.decode_document` turns a file's TOML into one of these, or into a one-line
:class:`~.schema.ScenarioError` naming the key; :mod:`.kinds` then checks what a type cannot say
(inputs against the collective, narration placeholders) and builds the :class:`~.schema.Scenario`.
The JSON Schema editors use for completion comes from the same types (:func:`scenario_json_schema`,
:func:`lesson_json_schema`), shipped beside the scenarios as :data:`SCHEMA_FILES` (a test keeps the
files equal to what the types emit).

A string's ``Meta(extra=...)`` may carry ``problem`` (what a value breaking its pattern or length
is told) and any type's ``expected`` (how the type is named in "expected ..., got ..."): the
decoder's messages read them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, Union

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from .schema import COLLECTIVES, DTYPES, FOLLOWUP_KINDS, NARRATION_LIMIT, REDUCE_OPS, ROOTED
from .training_kinds import TRAINING_KINDS, TrainingKind

__all__ = [
    "FAULTS",
    "DESYNC_PHASE_KEYS",
    "ExampleDocument",
    "FollowupDocument",
    "CollectiveNarration",
    "CollectiveDocument",
    "DesyncNarration",
    "DesyncDocument",
    "TRAINING_DOCUMENTS",
    "SCENARIO_DOCUMENTS",
    "ScenarioDocument",
    "KINDS",
    "LessonItemDocument",
    "LessonDocument",
    "SCHEMA_FILES",
    "scenario_json_schema",
    "lesson_json_schema",
    "schema_text",
]

FAULTS = ("swap", "skip", "raise")
"""How the odd rank of a desync scenario misbehaves: call another collective, none, or raise."""

DESYNC_PHASE_KEYS = ("setup", "agree", "desync")
"""Narration keys of a desync scenario, in phase order."""

_END = r"(?![\s\S])"
"""The end of the text, in Python's ``re`` and in ECMAScript alike (``$`` in Python also matches
before a final newline)."""

OneLine = Annotated[str, Meta(pattern=rf"^[^\n]*\S[^\n]*{_END}", extra={"problem": "must be one non-empty line"})]
Name = Annotated[str, Meta(pattern=rf"^[a-z0-9]+(-[a-z0-9]+)*{_END}", description="the file name without .toml",
                           extra={"problem": "{value!r} is not kebab-case (lower-case words joined by '-')"})]
NarrationText = Annotated[str, Meta(pattern=r"\S", max_length=NARRATION_LIMIT, extra={"problem": "is empty"},
                                    description="what the screen says during this phase; {placeholders} are filled in")]
_NUMBER = {"type": "number"}
RankInputs = Annotated[list[Any], Meta(
    description="one entry per rank: a list of numbers (1-D) or of equal rows (2-D); [] for a rank that holds no data",
    extra_json_schema={"items": {"type": "array", "items": {"anyOf": [_NUMBER, {"type": "array", "items": _NUMBER}]}}},
    extra={"expected": "a list with one entry per rank"},
)]
Matrix = Annotated[list[Any], Meta(extra_json_schema={"items": {"type": "array", "items": _NUMBER}, "minItems": 1},
                                   extra={"expected": "a 2-D list of numbers"})]
Gpus = Annotated[int, Meta(ge=1)]
Rank = Annotated[int, Meta(ge=0)]
_UNROOTED = tuple(c for c in COLLECTIVES if c not in ROOTED)


def _choice(values: tuple[str, ...]) -> Any:
    """One of ``values``, named in messages in their own order (a schema lists them sorted)."""
    return Annotated[Literal[values], Meta(extra={"expected": f"one of {', '.join(values)}"})]


if TYPE_CHECKING:  # the choices are built at run time from .schema's tuples; a checker knows they are strings
    CollectiveName: TypeAlias = str
    UnrootedName: TypeAlias = str
    ReduceOp: TypeAlias = str
    Dtype: TypeAlias = str
    FollowupKind: TypeAlias = str
    Fault: TypeAlias = str
else:
    CollectiveName = _choice(COLLECTIVES)
    UnrootedName = _choice(_UNROOTED)
    ReduceOp = _choice(REDUCE_OPS)
    Dtype = _choice(DTYPES)
    FollowupKind = _choice(FOLLOWUP_KINDS)
    Fault = _choice(FAULTS)


class _File(Struct, kw_only=True, forbid_unknown_fields=True):
    """Keys every scenario file has."""

    name: Name
    description: Annotated[OneLine, Meta(description="one line for 'collviz list'")]
    default_gpus: Annotated[Gpus, Meta(description="ranks when --gpus is not given")]


# ------------------------------------------------------------------------------ collective kind


class ExampleDocument(Struct, forbid_unknown_fields=True):
    """One worked example ([[example]]): what each rank holds before the collective, for one world size."""

    gpus: Annotated[Gpus, Meta(description="the world size this example is for")]
    source: Annotated[OneLine, Meta(description="where the example comes from")]
    inputs: RankInputs
    reduce_op: Annotated[ReduceOp, Meta(description="this example's reduce op (default: the scenario's)")] | UnsetType = UNSET
    names: Annotated[list[Annotated[str, Meta(min_length=1, max_length=8)]],
                     Meta(description="a short name per element of a rank's input (the parameters A, B…)")] | UnsetType = UNSET


class FollowupDocument(Struct, forbid_unknown_fields=True):
    """A computation one rank does on an all_gather's result ([followup]): ``gathered @ right.T``."""

    kind: FollowupKind
    rank: Annotated[Rank, Meta(description="the rank that computes it (below default_gpus)")]
    name: Annotated[OneLine, Meta(description="the result's name")]
    right_name: Annotated[OneLine, Meta(description="the right operand's name")]
    right: Matrix
    note_source: Annotated[OneLine, Meta(description="the teaching note that prints the result")] | UnsetType = UNSET
    note_result: Annotated[Matrix, Meta(description="the result as that note prints it (compared with torch's)")] | UnsetType = UNSET


class CollectiveNarration(Struct, forbid_unknown_fields=True):
    """What the screen says in each phase of a collective scenario."""

    setup: NarrationText
    collective: NarrationText
    release: NarrationText
    followup: Annotated[NarrationText, Meta(description="only with a [followup] table")] | UnsetType = UNSET


class CollectiveDocument(_File, tag_field="kind", tag="collective", kw_only=True, forbid_unknown_fields=True):
    """One torch.distributed collective on worked examples."""

    collective: CollectiveName
    root: Annotated[Rank, Meta(description="the root rank (broadcast, reduce, gather, scatter only; default 0)")] | UnsetType = UNSET
    reduce_op: Annotated[ReduceOp, Meta(description="reduce, all_reduce, reduce_scatter only (default sum)")] | UnsetType = UNSET
    dtype: Dtype = "float32"
    buffer_name: Annotated[OneLine, Meta(description="what the buffer is called on screen")]
    example: Annotated[list[ExampleDocument], Meta(min_length=1)]
    followup: FollowupDocument | UnsetType = UNSET
    narration: CollectiveNarration


# --------------------------------------------------------------------------------- desync kind


class DesyncNarration(Struct, forbid_unknown_fields=True):
    """What the screen says in each phase of a desync scenario."""

    setup: NarrationText
    agree: NarrationText
    desync: NarrationText


class DesyncDocument(_File, tag_field="kind", tag="desync", kw_only=True, forbid_unknown_fields=True):
    """Every rank runs a collective once together, then one rank misbehaves."""

    collective: UnrootedName
    odd_rank: Annotated[Rank, Meta(description="the rank that misbehaves")]
    fault: Annotated[Fault, Meta(description="call swap_with instead, skip the call, or raise")]
    swap_with: Annotated[UnrootedName, Meta(description="what the odd rank calls (fault = \"swap\" only)")] | UnsetType = UNSET
    timeout: Annotated[int, Meta(ge=1, description="the hang report's default --timeout, in seconds (default 30)")] \
        | UnsetType = UNSET
    narration: DesyncNarration


# ------------------------------------------------------------------------------ training kinds


def _camel(name: str) -> str:
    """``fsdp-tp`` → ``FsdpTp``."""
    return "".join(word.capitalize() for word in name.split("-"))


def _training_document(kind: TrainingKind) -> type[Struct]:
    """The document type of one training kind: optional [settings], narration of every phase."""
    settings = msgspec.defstruct(
        f"{_camel(kind.name)}Settings",
        [(s.name, Annotated[s.type, Meta(ge=s.minimum, description=s.meaning)], s.default) for s in kind.settings],
        forbid_unknown_fields=True,
    )
    settings.__doc__ = f"Settings of a {kind.name} scenario, each optional."
    narration = msgspec.defstruct(f"{_camel(kind.name)}Narration", [(key, NarrationText) for key in kind.phase_keys],
                                  forbid_unknown_fields=True)
    narration.__doc__ = (f"What the screen says in each phase of a {kind.name} scenario; placeholders: "
                         f"{', '.join('{' + p + '}' for p in sorted(kind.placeholders))}.")
    document = msgspec.defstruct(
        f"{_camel(kind.name)}Document",
        [("settings", settings, msgspec.field(default_factory=settings)), ("narration", narration)],
        bases=(_File,), tag_field="kind", tag=kind.name, kw_only=True, forbid_unknown_fields=True,
    )
    document.__doc__ = f"A {kind.name} training scenario."
    return document


TRAINING_DOCUMENTS: dict[str, type[Struct]] = {name: _training_document(kind) for name, kind in TRAINING_KINDS.items()}
"""Training kind → its document type."""

SCENARIO_DOCUMENTS: tuple[type[Struct], ...] = (CollectiveDocument, DesyncDocument, *TRAINING_DOCUMENTS.values())
"""Every kind of scenario file, the tag ``kind`` telling them apart."""

if TYPE_CHECKING:  # the union is built at run time; a checker knows what every member has: _File's keys
    ScenarioDocument: TypeAlias = _File
else:
    ScenarioDocument = Union[SCENARIO_DOCUMENTS]
    """Any scenario file, decoded."""

KINDS: tuple[str, ...] = tuple(str(document.__struct_config__.tag) for document in SCENARIO_DOCUMENTS)
"""Values ``kind`` may take."""


# ------------------------------------------------------------------------------------- lessons


class LessonItemDocument(Struct, forbid_unknown_fields=True):
    """One step of a lesson ([[item]]): a scenario, or a compare of two."""

    scenario: Annotated[str, Meta(description="a scenario name (or give compare)")] | UnsetType = UNSET
    compare: Annotated[list[str], Meta(min_length=2, max_length=2, description="two scenarios to compare",
                                       extra={"expected": "two scenario names"})] | UnsetType = UNSET
    args: Annotated[list[str], Meta(description="the scenario's own command-line options")] = msgspec.field(default_factory=list)
    notes: Annotated[dict[str, str], Meta(description="narration key → the teacher's note")] = msgspec.field(default_factory=dict)
    title: OneLine | UnsetType = UNSET


class LessonDocument(Struct, forbid_unknown_fields=True):
    """A lesson: scenarios in order, with a teacher's notes each."""

    name: Annotated[OneLine, Meta(description="the file name without .toml")]
    title: OneLine
    description: OneLine
    item: Annotated[list[LessonItemDocument], Meta(min_length=1)]


# ---------------------------------------------------------------------------------- JSON Schema


def _json_schema(document: Any, title: str, description: str) -> dict:
    """The JSON Schema (draft 2020-12) of ``document``."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title, "description": description,
            **msgspec.json.schema(document)}


def scenario_json_schema() -> dict:
    """The JSON Schema of a scenario file (what ``collviz schema`` prints and editors read)."""
    return _json_schema(ScenarioDocument, "collviz scenario",
                        "A collviz scenario file (TOML): which collective or training step runs, on how many ranks, "
                        "with which inputs, and what the screen says in each phase.")


def lesson_json_schema() -> dict:
    """The JSON Schema of a lesson file."""
    return _json_schema(LessonDocument, "collviz lesson",
                        "A collviz lesson file (TOML): scenarios in order, with a teacher's notes each.")


SCHEMA_FILES = {"collviz-scenario.schema.json": scenario_json_schema, "collviz-lesson.schema.json": lesson_json_schema}
"""Files shipped in the scenarios folder (relative paths) → the function whose schema they hold."""


def schema_text(schema: dict) -> str:
    """A schema as its shipped file holds it (indented JSON, one final newline)."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
