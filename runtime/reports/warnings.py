"""A command's warnings, said once in two places that agree: each on stderr as one line
``collviz: warning: TEXT``, and, where the command prints a ``--json`` document, in its
``warnings`` list as ``TEXT`` (the line without the prefix; an empty list where nothing was said).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TextIO

__all__ = ["WARNING_PREFIX", "say_warnings", "with_warnings"]

WARNING_PREFIX = "collviz: warning: "
"""What begins each warning's line on stderr."""


def say_warnings(warnings: Iterable[str], err: TextIO) -> list[str]:
    """Say each of ``warnings`` on ``err``, one line each after :data:`WARNING_PREFIX`; their texts,
    in order, for a document's ``warnings`` (:func:`with_warnings`)."""
    said = list(warnings)
    for warning in said:
        print(f"{WARNING_PREFIX}{warning}", file=err, flush=True)
    return said


def with_warnings(document: dict, warnings: Iterable[str]) -> dict:
    """``document`` with its ``warnings`` list added last (every other key as it was)."""
    return {**document, "warnings": list(warnings)}
