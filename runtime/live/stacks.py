"""Where a rank's Python is, from its stack: the text ``faulthandler`` writes (a worker server's
``dump_traceback`` answer: one block per thread, ``Thread 0x… (most recent call first):`` then
``  File "PATH", line N in NAME`` lines, innermost first), or the threads a stack reader read
(``py-spy dump``, :mod:`.py_spy`).

The line to show is the user's own frame: the innermost frame of the user's code (not torch's,
a library's, the interpreter's or a native one) in the thread running the script (the one whose
outermost frame is ``<module>``; else the first thread with user code), with the innermost frame
of all when that is somewhere else (``job.py:16 in main, inside all_reduce (distributed_c10d.py:3252)``).

:func:`place_of` also says which collective call the thread is inside, if any: the outermost
frame of torch's collectives API (``torch/distributed/distributed_c10d.py``, or the functional
collectives' ``_functional_collectives.py``), the function the user's code called.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..sources.flight_recorder import is_user_code

__all__ = ["COLLECTIVE_FILES", "Frame", "Place", "place_of", "user_stack_line"]

_FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+) in (?P<name>.+)$')
_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-fA-F]+")

COLLECTIVE_FILES = ("torch/distributed/distributed_c10d.py", "torch/distributed/_functional_collectives.py")
"""The files of torch's collectives API: a thread with a frame in one is inside a collective call."""


@dataclass(frozen=True)
class Frame:
    """One frame of a thread's stack (``native``: a C or C++ frame, its file a library's name)."""

    file: str
    line: int
    name: str
    native: bool = False

    @property
    def users(self) -> bool:
        """Whether the frame is in the user's code."""
        return not self.native and is_user_code(self.file)

    @property
    def collective(self) -> bool:
        """Whether the frame is in torch's collectives API."""
        return not self.native and self.file.replace("\\", "/").endswith(COLLECTIVE_FILES)

    def __str__(self) -> str:
        if self.native:
            return f"{self.name} ({Path(self.file).name})"
        return f"{Path(self.file).name}:{self.line} in {self.name}"


@dataclass(frozen=True)
class Place:
    """Where one thread is: its user's own frame (None: no user code), the innermost frame of all,
    and the collective call it is inside (the API function called; None: outside any)."""

    own: Frame | None
    innermost: Frame | None
    collective: Frame | None

    @property
    def line(self) -> str:
        """The user's frame, with the innermost frame where that is elsewhere (see the module)."""
        if self.own is None:
            return ""
        inner = self.innermost
        if inner is None or inner is self.own:
            return str(self.own)
        where = f"{Path(inner.file).name}" if inner.native else f"{Path(inner.file).name}:{inner.line}"
        return f"{self.own}, inside {inner.name} ({where})"


def _threads(text: str) -> list[list[Frame]]:
    """Each thread's frames, innermost first, in the order the text gives the threads."""
    threads: list[list[Frame]] = []
    for line in text.splitlines():
        if _THREAD.match(line):
            threads.append([])
            continue
        match = _FRAME.match(line)
        if match and threads:
            threads[-1].append(Frame(match["file"], int(match["line"]), match["name"]))
    return threads


_PLUMBING = ("libc.so", "libpthread", "libstdc++", "ld-linux", "libgcc")
"""Native libraries whose frames say only that a thread waits (a condition variable, a futex)."""


def place_of(threads: Sequence[Sequence[Frame]]) -> Place:
    """Where the thread running the script is (see the module); its innermost native frame worth
    naming (not libc's or the C++ runtime's) stands for the innermost where the stack has native frames."""
    users = [frames for frames in threads if any(frame.users for frame in frames)]
    if not users:
        return Place(None, None, None)
    main = next((frames for frames in users if frames[-1].name == "<module>"), users[0])
    own = next(frame for frame in main if frame.users)
    mine = main[:main.index(own)]  # the frames it called, innermost first
    collective = next((frame for frame in reversed(mine) if frame.collective), None)
    innermost = next((frame for frame in mine if not (frame.native and Path(frame.file).name.startswith(_PLUMBING))), own)
    return Place(own, innermost, collective)


def user_stack_line(text: str) -> str:
    """The user's frame of the thread running the script in a ``dump_traceback`` text (see the
    module's text); empty when no thread is in the user's code."""
    return place_of(_threads(text)).line
