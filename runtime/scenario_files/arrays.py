"""Arrays of numbers from a scenario file: 1-D or 2-D, rectangular, exactly representable in their
dtype. Each problem is a ValueError the caller puts under the key it read ("rank 2 is ragged: …")."""

from __future__ import annotations

from typing import Any

from .decoding import describe_value
from .schema import INT_RANGES

__all__ = ["is_number", "shape_text", "row_of", "array", "check_dtype", "flat"]


def is_number(value: Any) -> bool:
    """True for TOML integers and floats; booleans are not numbers."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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

