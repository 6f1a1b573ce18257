"""Reading TOML tables with messages that name the file, the key and the problem: typed
values, rectangular arrays of numbers, dtype ranges."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .schema import INT_RANGES, ScenarioError

__all__ = ["REQUIRED", "describe_value", "is_str", "is_list", "is_int", "is_number", "Table", "shape_text", "row_of", "array", "check_dtype", "flat"]

# ------------------------------------------------------------------------------- reading tables


REQUIRED: Any = object()
"""Default meaning "this key must be present"."""


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
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__} ({value})"


def is_str(value: Any) -> bool:
    """True for TOML strings."""
    return isinstance(value, str)


def is_list(value: Any) -> bool:
    """True for TOML arrays."""
    return isinstance(value, list)


def is_int(value: Any) -> bool:
    """True for TOML integers; booleans are not integers."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """True for TOML integers and floats; booleans are not numbers."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Table:
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
            if default is REQUIRED:
                raise self.error(key, f"missing (required: {expected})")
            return default
        found = self.data[key]
        if not check(found):
            raise self.error(key, f"expected {expected}, got {describe_value(found)}")
        return found

    def line(self, key: str, default: Any = REQUIRED) -> str:
        """A non-empty one-line string."""
        text = self.value(key, is_str, "a string", default)
        if text is not default and (not text.strip() or "\n" in text):
            raise self.error(key, "must be one non-empty line")
        return text

    def integer(self, key: str, minimum: int, default: Any = REQUIRED) -> int:
        """An integer of at least ``minimum``."""
        number = self.value(key, is_int, "an integer", default)
        if number is not default and number < minimum:
            raise self.error(key, f"{number} is less than {minimum}")
        return number

    def choice(self, key: str, choices: Sequence[str], default: Any = REQUIRED) -> str:
        """One of ``choices``."""
        expected = f"one of {', '.join(choices)}"
        word = self.value(key, is_str, expected, default)
        if word is not default and word not in choices:
            raise self.error(key, f"{word!r} is not {expected}")
        return word

    def table(self, key: str, default: Any = REQUIRED) -> Table | None:
        """A sub-table, read with its dotted key as prefix."""
        data = self.value(key, lambda v: isinstance(v, dict), "a table", default)
        return None if data is default else Table(self.file, data, f"{self.prefix}{key}.")

    def tables(self, key: str) -> list[Table]:
        """A non-empty array of tables (``[[key]]``), each read as ``key[i].``."""
        items = self.value(
            key,
            lambda v: isinstance(v, list) and bool(v) and all(isinstance(i, dict) for i in v),
            f"at least one [[{key}]] table",
            REQUIRED,
        )
        return [Table(self.file, t, f"{self.prefix}{key}[{i}].") for i, t in enumerate(items)]


# ------------------------------------------------------------------------------ arrays of numbers


def shape_text(shape: tuple[int, ...]) -> str:
    """``(3,)`` → ``3 elements``; ``(1, 4)`` → ``shape 1x4``."""
    if len(shape) == 1:
        return f"{shape[0]} element{'s' if shape[0] != 1 else ''}"
    return f"shape {shape[0]}x{shape[1]}"


def row_of(values: list, what: str) -> tuple:
    """A list of numbers as a tuple; ValueError naming the first non-number."""
    for value in values:
        if not is_number(value):
            raise ValueError(f"{what} holds {describe_value(value)}, not a number")
    return tuple(values)


def array(value: Any, what: str) -> tuple:
    """A TOML list as a 1-D or 2-D rectangular nested tuple (``()`` when empty).

    Raises ValueError with the problem, naming ``what`` ("rank 2", "followup.right").
    """
    if not isinstance(value, list):
        raise ValueError(f"{what} is {describe_value(value)}; expected a list of numbers, e.g. [1, 2]")
    if not value or not isinstance(value[0], list):
        return row_of(value, what)
    if not all(isinstance(row, list) for row in value):
        raise ValueError(f"{what} mixes lists and numbers")
    if any(isinstance(item, list) for row in value for item in row):
        raise ValueError(f"{what} has more than 2 dimensions")
    rows = tuple(row_of(row, f"{what}, row {i},") for i, row in enumerate(value))
    widths = sorted({len(row) for row in rows})
    if len(widths) > 1 or widths[0] == 0:
        raise ValueError(f"{what} is ragged: its rows have {', '.join(map(str, widths))} elements")
    return rows


def check_dtype(values: tuple, dtype: str, what: str) -> None:
    """Refuse values the dtype cannot hold exactly (fractions or out-of-range integers)."""
    if dtype not in INT_RANGES:
        return
    low, high = INT_RANGES[dtype]
    for value in flat(values):
        if not isinstance(value, int):
            raise ValueError(f"{what} holds {value}, which is not an integer (dtype {dtype})")
        if not low <= value <= high:
            raise ValueError(f"{what} holds {value}, outside {dtype}'s range {low}..{high}")


def flat(values: tuple) -> tuple:
    """The numbers of a 1-D or 2-D nested tuple, row by row."""
    if values and isinstance(values[0], tuple):
        return tuple(x for row in values for x in row)
    return values

