"""A folder of line files that grow while a job runs, read as they grow: only whole lines, each
once (``collviz replay --follow``, :mod:`collviz.runtime.live.inspector_reader`).

Each file is read from the offset the last reading reached; a last line without its newline yet
(the writer is mid-line) is kept and completed by the next reading. A file that appears is read
from its start; one that shrinks (replaced under the same name) is read again from its start. A
reading takes at most ``budget`` bytes in all (a share per file, at least :data:`MIN_SHARE`), so
one reading of a huge folder stays short: what is left (a line longer than a share included) is
read by the next ones.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["GrowingFiles", "MIN_SHARE"]

MIN_SHARE = 16 << 10
"""The least one file is read by a reading (a budget spread over more files than it covers)."""


@dataclass
class _Place:
    """How far one file was read, and the start of a line whose end has not been written yet."""

    offset: int = 0
    cut: bytes = b""


@dataclass
class GrowingFiles:
    """The files of ``folder`` whose names match ``pattern``, read a little more at each :meth:`read`."""

    folder: Path
    pattern: str = "*.log"
    budget: int = 4 << 20
    """The most bytes one reading takes, over every file."""
    _places: dict[Path, _Place] = field(default_factory=dict)

    def read(self) -> list[tuple[Path, list[str]]]:
        """The whole lines written since the last reading, per file (files in name order; none
        listed that gave no line). Raises OSError where the folder cannot be listed."""
        paths = sorted(p for p in self.folder.glob(self.pattern) if p.is_file())
        share = max(MIN_SHARE, self.budget // max(1, len(paths)))
        found: list[tuple[Path, list[str]]] = []
        for path in paths:
            lines = self._more(path, self._places.setdefault(path, _Place()), share)
            if lines:
                found.append((path, lines))
        return found

    @property
    def cut_lines(self) -> list[Path]:
        """The files whose last line is still waiting for its end."""
        return [path for path, place in self._places.items() if place.cut]

    def _more(self, path: Path, place: _Place, share: int) -> list[str]:
        try:
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size < place.offset:  # replaced by a shorter file: read it from its start
                    place.offset, place.cut = 0, b""
                handle.seek(place.offset)
                data = handle.read(share)
        except OSError:
            return []  # gone, or not readable yet: tried again at the next reading
        place.offset += len(data)
        data = place.cut + data
        whole, newline, place.cut = data.rpartition(b"\n")
        return whole.decode("utf-8", "replace").split("\n") if newline else []
