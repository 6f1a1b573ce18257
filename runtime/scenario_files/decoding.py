"""From a TOML file to a typed document, every problem one line naming the file and the key.

:func:`read_toml` parses (a syntax error names its line); :func:`decode_document` converts the
table with msgspec into one of :mod:`.documents`' Structs. msgspec says *where* a value does not
fit (``$.example[0].gpus``); the message is collviz's own, written from the document's type at that
place and the value the file holds there: ``key 'default_gpus': expected an integer, got a string
('2')``, ``key 'reduceop': unknown key (probably a typo for 'reduce_op')``.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import msgspec
from msgspec import inspect as types

from ..wire.files import read_regular_file
from .schema import ScenarioError

__all__ = ["read_toml", "decode_document", "describe_value"]

Document = TypeVar("Document")

_TOML_WHERE = re.compile(r"^(?P<msg>.*) \(at line (?P<line>\d+), column (?P<col>\d+)\)$", re.S)
_LOCATION = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_FIELD = re.compile(r"^Object (?P<what>missing required|contains unknown) field `(?P<name>[^`]*)`$")
_STEP = re.compile(r"\.(?P<name>[^.\[]+)|\[(?P<index>\d+)\]|(?P<any>\[\.\.\.\])")
_ABSENT = object()
"""The value at a place the file does not fill."""


def read_toml(path: Path, file: str, limit: int, what: str) -> dict[str, Any]:
    """The TOML of ``path`` (``file`` names it in messages, ``what`` in a size refusal), or a
    ScenarioError for a missing, unreadable or malformed file."""
    try:
        return tomllib.loads(read_regular_file(path, limit, what).decode("utf-8"))
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


def decode_document(data: dict[str, Any], document: type[Document] | Any, file: str) -> Document:
    """``data`` (a parsed TOML table) as ``document``; ScenarioError naming the key otherwise."""
    try:
        return msgspec.convert(data, document)
    except msgspec.ValidationError as error:
        raise _explain(str(error), data, document, file) from None


def describe_value(value: Any) -> str:
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
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__} ({value})"


# ------------------------------------------------------------------------------ the message


@dataclass
class _Place:
    """A place in the document: its type (Metadata unwrapped), what the file holds there, its key."""

    type: types.Type
    value: Any
    key: str = ""
    extra: dict = field(default_factory=dict)
    """``Meta(extra=...)`` of the place: ``expected`` and ``problem`` wordings."""


def _explain(message: str, data: dict, document: Any, file: str) -> ScenarioError:
    """collviz's one-line error for msgspec's ``message`` about ``data``."""
    location = _LOCATION.search(message)
    problem = message[: location.start()] if location else message
    place = _settle(_Place(types.type_info(document), data))
    for step in _STEP.finditer(location["path"] if location else ""):
        place = _settle(_next(place, step))
    about_field = _FIELD.match(problem)
    if about_field is None:
        return ScenarioError(file, _value_problem(place, problem), key=place.key or None)
    name = about_field["name"]
    if about_field["what"] == "contains unknown":
        known = _known_keys(place.type)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"probably a typo for '{close[0]}'" if close else f"known: {', '.join(known)}"
        return ScenarioError(file, f"unknown key ({hint})", key=_join(place.key, name))
    missing = _settle(_member(place, name))
    return ScenarioError(file, f"missing (required: {_expected(missing)})", key=missing.key)


def _settle(place: _Place) -> _Place:
    """``place`` with Metadata unwrapped (its extra kept) and a tagged union resolved by the tag
    the file gives (left a union when the tag is missing or unknown)."""
    kind, extra = place.type, dict(place.extra)
    while isinstance(kind, types.Metadata):
        extra.update(kind.extra or {})
        kind = kind.type
    if isinstance(kind, types.UnionType):
        tagged = {t.tag: t for t in kind.types if isinstance(t, types.StructType) and t.tag is not None}
        tag_field = next((t.tag_field for t in kind.types if isinstance(t, types.StructType)), None)
        tag = place.value.get(tag_field) if isinstance(place.value, dict) else None
        if isinstance(tag, str) and tag in tagged:
            kind = tagged[tag]
    return _Place(kind, place.value, place.key, extra)


def _next(place: _Place, step: re.Match) -> _Place:
    """The place one step (``.name``, ``[i]``, ``[...]``) below ``place``."""
    value, kind = place.value, place.type
    if step["name"] is not None:
        return _member(place, step["name"])
    if step["index"] is not None and isinstance(kind, types.ListType):
        index = int(step["index"])
        item = value[index] if isinstance(value, list) and index < len(value) else _ABSENT
        return _Place(kind.item_type, item, f"{place.key}[{index}]")
    if step["any"] is not None and isinstance(kind, types.DictType) and isinstance(value, dict):
        # msgspec does not say which entry: the first that is not of the values' type
        key, item = next(((k, v) for k, v in value.items() if not _fits(kind.value_type, v)), ("", _ABSENT))
        return _Place(kind.value_type, item, _join(place.key, key))
    return place


def _member(place: _Place, name: str) -> _Place:
    """The place of key ``name`` of a table (the tag of a tagged union among them)."""
    kind = place.type
    value = place.value.get(name, _ABSENT) if isinstance(place.value, dict) else _ABSENT
    key = _join(place.key, name)
    if isinstance(kind, types.StructType):
        if name == kind.tag_field:
            return _Place(types.LiteralType((kind.tag,)), value, key)
        member = next((f for f in kind.fields if f.encode_name == name), None)
        return _Place(member.type if member else types.AnyType(), value, key)
    if isinstance(kind, types.UnionType):
        tags = tuple(t.tag for t in kind.types if isinstance(t, types.StructType) and t.tag_field == name)
        if tags:
            return _Place(types.LiteralType(tags), value, key, {"expected": f"one of {', '.join(map(str, tags))}"})
    return _Place(types.AnyType(), value, key)


def _known_keys(kind: types.Type) -> list[str]:
    """The keys a table of type ``kind`` may have (its tag first)."""
    if not isinstance(kind, types.StructType):
        return []
    return ([kind.tag_field] if kind.tag_field else []) + [f.encode_name for f in kind.fields]


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


_WORDS = {types.IntType: "an integer", types.FloatType: "a number", types.StrType: "a string",
          types.BoolType: "a boolean", types.DictType: "a table", types.StructType: "a table"}
_PLURALS = {types.IntType: "integers", types.FloatType: "numbers", types.StrType: "strings"}


def _expected(place: _Place) -> str:
    """How the type at ``place`` is named: ``an integer``, ``one of sum, avg…``, ``at least one [[example]] table``."""
    kind = place.type
    if "expected" in place.extra:
        return place.extra["expected"]
    if isinstance(kind, types.LiteralType):
        return f"one of {', '.join(map(str, kind.values))}"
    if isinstance(kind, types.ListType):
        if isinstance(kind.item_type, types.StructType):
            return f"at least one [[{place.key.rsplit('.', 1)[-1]}]] table"
        plural = _PLURALS.get(type(kind.item_type))
        return f"a list of {plural}" if plural else "a list"
    return _WORDS.get(type(kind), "a value")


def _fits(kind: types.Type, value: Any) -> bool:
    """Whether ``value`` has the TOML type ``kind`` asks for (constraints aside)."""
    if isinstance(value, bool):
        return isinstance(kind, types.BoolType)
    checks: dict[type, type | tuple[type, ...]] = {types.IntType: int, types.FloatType: (int, float), types.StrType: str, types.ListType: list,
              types.DictType: dict, types.StructType: dict}
    wanted = checks.get(type(kind))
    return wanted is not None and isinstance(value, wanted)


def _value_problem(place: _Place, fallback: str) -> str:
    """What is wrong with the value at ``place`` (``fallback``, msgspec's words, if nothing is)."""
    kind, value, expected = place.type, place.value, _expected(place)
    if isinstance(kind, types.LiteralType):
        return f"{value!r} is not {expected}" if isinstance(value, str) else f"expected {expected}, got {describe_value(value)}"
    if not _fits(kind, value):
        return f"expected {expected}, got {describe_value(value)}"
    if isinstance(kind, (types.IntType, types.FloatType)) and kind.ge is not None and value < kind.ge:
        return f"{value} is less than {kind.ge}"
    if isinstance(kind, types.StrType):
        if kind.max_length is not None and len(value) > kind.max_length:
            return f"{len(value)} characters; keep it to {kind.max_length}"
        if not value and kind.min_length:
            return "is empty"
        if "problem" in place.extra:
            return place.extra["problem"].format(value=value)
    if isinstance(kind, types.ListType) and not (kind.min_length or 0) <= len(value) <= (kind.max_length or len(value)):
        return f"expected {expected}, got {describe_value(value)}"
    return fallback
