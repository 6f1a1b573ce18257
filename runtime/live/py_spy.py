"""A process's Python stacks read from outside, as the field reads them: ``py-spy dump --pid PID
--json`` (py-spy, a declared dependency: it reads the process's memory, and by default
``--nonblocking``, never pausing it; ``--native`` adds C and C++ frames, for which py-spy must
pause the process for the moment of the read).

Each dump is bounded by a deadline. A process collviz may not read is a :class:`PtraceDenied`
(one line naming the fix); any other failure is the error's first line, as py-spy says it (a
non-blocking read, racing the interpreter, is tried again first).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..errors import UsageError
from .stacks import Frame

__all__ = ["PTRACE_FIX", "PtraceDenied", "StackError", "dump_threads", "py_spy_path"]

PTRACE_FIX = ("collviz reads a rank's stack through ptrace: run it as the job's user or as root with "
              "/proc/sys/kernel/yama/ptrace_scope at 0 or 1 (2 needs the CAP_SYS_PTRACE capability), and in a "
              "container give it the SYS_PTRACE capability (docker run --cap-add SYS_PTRACE, or the pod's "
              "securityContext.capabilities.add)")
"""What lets collviz read a process's memory, said where it may not."""


_ATTEMPTS = 3
"""Reads of a running process's stack, non-blocking, before its failure is said: a read made while
the interpreter changes its frames can fail, and the next one succeed."""


class StackError(Exception):
    """A process's stack could not be read (the reason in one line)."""


class PtraceDenied(StackError):
    """The system refused collviz the right to read the process (ptrace)."""


def py_spy_path() -> str:
    """py-spy's executable: beside this interpreter's (the environment collviz is installed in),
    else on PATH; a one-line UsageError where there is none."""
    beside = Path(sys.executable).parent / "py-spy"
    if os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("py-spy")
    if found is None:
        raise UsageError("attach --pid reads stacks with py-spy, which is not installed here (pip install py-spy)")
    return found


def _frame(frame: dict) -> Frame:
    """One frame of py-spy's JSON (a native one has its library as ``module``)."""
    return Frame(str(frame.get("filename") or frame.get("short_filename") or "?"), int(frame.get("line") or 0),
                 str(frame.get("name") or "?"), native=frame.get("module") is not None)


def dump_threads(pid: int, native: bool = False, timeout_s: float = 5.0, py_spy: str | None = None) -> list[list[Frame]]:
    """Each Python thread's frames in process ``pid``, innermost first (``native``: with C and
    C++ frames, pausing the process for the read); :class:`PtraceDenied` or :class:`StackError`
    when they cannot be read within ``timeout_s``."""
    command = [py_spy or py_spy_path(), "dump", "--pid", str(pid), "--json"] + (["--native"] if native else ["--nonblocking"])
    deadline = time.monotonic() + timeout_s
    for attempt in range(_ATTEMPTS):
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=max(0.1, deadline - time.monotonic()),
                                  stdin=subprocess.DEVNULL, env={**os.environ, "RUST_BACKTRACE": "0"})
        except subprocess.TimeoutExpired:
            raise StackError(f"py-spy did not read its stack within {timeout_s:g} s") from None
        if done.returncode == 0:
            break
        said = (done.stderr + "\n" + done.stdout).strip()
        if "permission denied" in said.lower():
            raise PtraceDenied(PTRACE_FIX)
        if attempt + 1 == _ATTEMPTS or native or not Path(f"/proc/{pid}").exists():
            first = next((line.removeprefix("Error: ") for line in said.splitlines() if line.strip()), "")
            raise StackError(f"py-spy could not read its stack: {first or f'exit status {done.returncode}'}")
    try:
        threads = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise StackError("py-spy's answer is not JSON") from None
    return [[_frame(frame) for frame in thread.get("frames", [])] for thread in threads if isinstance(thread, dict)]
