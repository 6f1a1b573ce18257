"""One rank of a user's script: the script runs as ``__main__`` under the light observer.

The worker has already set torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, …)
and leaves the process group to the script, so its own ``init_process_group()`` works unchanged.
"""

from __future__ import annotations

import os
import runpy
import sys
from dataclasses import dataclass
from typing import Any, TextIO, Union

from ..context import RankContext
from ..wire.protocol import NOT_RECORDED_OPTION
from .observer import NOT_CAPTURED, ScriptObserver
from .script import UserScript

__all__ = ["ScriptExit", "ScriptProgram", "run_as_main"]


class ScriptExit(RuntimeError):
    """The script called ``sys.exit`` with a failing status."""


class _LastLine:
    """``sys.stderr`` as the script sees it: everything written goes through to ``stream``, and
    the last non-blank line is kept (what a script says as it exits: argparse's usage error)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.last = ""

    def write(self, text: str) -> int:
        """Write ``text`` through, remembering its last non-blank line."""
        said = [line for line in text.splitlines() if line.strip()]
        if said:
            self.last = said[-1].strip()
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def run_as_main(script: UserScript) -> None:
    """Run ``script`` as ``python SCRIPT ARGS…`` would: as ``__main__``, with ``sys.argv`` its name
    and arguments and its folder first on ``sys.path``. ``sys.exit(0)`` returns; another status
    raises :class:`ScriptExit`, whose message ends with the last line the script wrote to stderr
    (its own usage error, say), so that it reaches the terminal and not only the rank's log."""
    argv, path, stderr = sys.argv[:], sys.path[:], sys.stderr
    sys.argv = [str(script.path), *script.args]
    sys.path.insert(0, str(script.path.parent))
    sys.stderr = said = _LastLine(stderr)
    try:
        runpy.run_path(str(script.path), run_name="__main__")
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            last = f": {said.last}" if said.last else ""
            raise ScriptExit(f"{script.name} exited with status {exit_.code}{last}") from None
    finally:
        sys.argv, sys.path[:], sys.stderr = argv, path, stderr


@dataclass(frozen=True)
class ScriptProgram:
    """The program every rank of a script run runs (a :class:`~..scenarios.program.ScenarioProgram`
    whose process group the script joins itself)."""

    script: UserScript

    @property
    def phase_count(self) -> int:
        """Unknown before the script runs: its steps are seen as they happen."""
        return 0

    @property
    def source(self) -> str:
        """The script and its arguments, and what is not captured."""
        return f"your script {self.script.command} ({NOT_CAPTURED})"

    def narration_values(self, world_size: int) -> dict[str, object]:
        """No placeholders: a script's steps are narrated by the observer."""
        return {}

    def run_options(self) -> dict[str, Union[str, int, float, bool]]:
        """The script and its arguments, and what the run does not capture, as recorded in RunStart."""
        return {"script": str(self.script.path), "args": " ".join(self.script.args), NOT_RECORDED_OPTION: NOT_CAPTURED}

    def run(self, ctx: RankContext) -> None:
        """Run the script on this rank under the observer; the rank's last step is its phase."""
        os.environ.setdefault("TORCH_NCCL_ENABLE_TIMING", "1")  # NCCL's own per-call GPU times (read, never waited for)
        observer = ScriptObserver(ctx.emitter)
        try:
            with observer:
                run_as_main(self.script)
        except BaseException as exc:
            observer.hide_wait(exc)
            raise
        finally:
            ctx.phase_index = observer.phase_index
