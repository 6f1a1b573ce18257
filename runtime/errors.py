"""Errors that mean "the user asked for something that cannot be done": exit status 2, one line."""

from __future__ import annotations

__all__ = ["UsageError"]


class UsageError(Exception):
    """Bad input from the user (arguments, scenario file, trace file).

    The command line prints ``collviz: error: <message>`` and exits with status 2; the message is
    one line that says what is wrong and, where it helps, what to do.
    """
