"""Progress on a terminal: one line redrawn in place, nothing at all when the stream is not a terminal.

Headless commands (a bench sweep, ``compare``, a headless replay of a large trace, a scenario's
phases) report through :class:`ProgressLine`; the viewer shows the same fractions in Textual's
``ProgressBar``. Redraws are limited to :data:`REDRAW_SECONDS` apart, except the last one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["ProgressLine", "StagedProgress", "bar_text", "REDRAW_SECONDS", "BAR_WIDTH"]

REDRAW_SECONDS = 0.1
"""Shortest interval between two redraws of the line (the final one is always drawn)."""

BAR_WIDTH = 24
"""Cells of the bar itself."""


def bar_text(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """``[######------] 50%`` for ``done`` of ``total`` (an empty bar when ``total`` is 0)."""
    fraction = min(1.0, done / total) if total > 0 else 0.0
    filled = round(fraction * width)
    return f"[{'#' * filled}{'-' * (width - filled)}] {fraction:4.0%}"


class ProgressLine:
    """``collviz: LABEL [####----]  42% done/total DETAIL``, rewritten in place on a terminal.

    ``count_text`` formats the counts (bytes, for instance). Silent when ``stream`` is not a terminal (a log file or a pipe gets only the final report).
    :meth:`close` ends the line so later output starts on a fresh one.
    """

    def __init__(self, stream: TextIO, label: str, total: int,
                 count_text: Callable[[int], str] = "{:,}".format) -> None:
        self.stream = stream
        self.count_text = count_text
        self.label = label
        self.total = total
        self.enabled = stream.isatty()
        self._last_draw = 0.0
        self._width = 0
        self._drawn = False

    def update(self, done: int, detail: str = "", total: int | None = None) -> None:
        """Show ``done`` of the total (optionally a new ``total``) and a short ``detail``."""
        if total is not None:
            self.total = total
        if not self.enabled:
            return
        now = time.monotonic()
        if done < self.total and now - self._last_draw < REDRAW_SECONDS:
            return
        self._last_draw = now
        line = f"collviz: {self.label} {bar_text(done, self.total)} {self.count_text(done)}/{self.count_text(self.total)} {detail}".rstrip()
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self.stream.write(f"\r{line}{' ' * pad}")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """Finish the line (a newline after the last redraw); safe to call twice."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


class StagedProgress:
    """Work told as ``(stage, done, total)`` (an import's files, then its steps): one
    :class:`ProgressLine` per stage, the previous one finished when the stage changes."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._stage = ""
        self._line: ProgressLine | None = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        """``done`` of ``total`` in ``stage``."""
        if self._line is None or stage != self._stage:
            self.close()
            self._stage, self._line = stage, ProgressLine(self.stream, stage, total)
        self._line.update(done, total=total)

    def close(self) -> None:
        """Finish the current stage's line (safe to call twice)."""
        if self._line is not None:
            self._line.close()
