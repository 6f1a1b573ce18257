"""Where a rank's Python is, from its worker server's ``dump_traceback`` answer: the text
``faulthandler`` writes, one block per thread (``Thread 0x… (most recent call first):`` then
``  File "PATH", line N in NAME`` lines, innermost first).

The line to show is the user's own frame: the innermost frame of the user's code (not torch's,
a library's or the interpreter's) in the thread running the script (the one whose outermost
frame is ``<module>``; else the first thread with user code), with the innermost frame of all
when that is somewhere else (``job.py:16 in main, inside all_reduce (distributed_c10d.py:3252)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..sources.flight_recorder import is_user_code

__all__ = ["Frame", "user_stack_line"]

_FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+) in (?P<name>.+)$')
_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-fA-F]+")


@dataclass(frozen=True)
class Frame:
    """One frame of a thread's stack."""

    file: str
    line: int
    name: str

    @property
    def users(self) -> bool:
        """Whether the frame is in the user's code."""
        return is_user_code(self.file)

    def __str__(self) -> str:
        return f"{Path(self.file).name}:{self.line} in {self.name}"


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


def user_stack_line(text: str) -> str:
    """The user's frame of the thread running the script in a ``dump_traceback`` text (see the
    module's text); empty when no thread is in the user's code."""
    threads = [frames for frames in _threads(text) if any(frame.users for frame in frames)]
    if not threads:
        return ""
    main = next((frames for frames in threads if frames[-1].name == "<module>"), threads[0])
    own = next(frame for frame in main if frame.users)
    innermost = main[0]
    if innermost is own:
        return str(own)
    return f"{own}, inside {innermost.name} ({Path(innermost.file).name}:{innermost.line})"
