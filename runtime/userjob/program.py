"""One rank of a user's script: the script runs as ``__main__``, read from torch's Flight Recorder
(the default: the worker wraps the rank in :func:`~.recorder.recorded_rank`) or under the light
observer (``--observe``).

The worker has already set torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, …)
and leaves the process group to the script, so its own ``init_process_group()`` works unchanged.
"""

from __future__ import annotations

import os
import runpy
import sys
from dataclasses import dataclass
from typing import Union

from ..context import RankContext
from ..errors import ProgramExit
from ..wire.protocol import NOT_RECORDED_OPTION, UNTIMED_OPTION
from .observer import NOT_CAPTURED, ScriptObserver
from .script import UserScript

__all__ = ["NOT_IN_RECORDER", "UNTIMED_IN_RECORDER", "ScriptExit", "ScriptProgram", "run_as_main"]

NOT_IN_RECORDER = ("read from each rank's own Flight Recorder: every call's op, group, sizes and order; no values, "
                   "provenance or transfers (--observe adds per-call times and memory)")
"""What a script's run read from Flight Recorder shows and does not (its RunStart says it)."""

UNTIMED_IN_RECORDER = "Flight Recorder times calls only on NCCL with TORCH_NCCL_ENABLE_TIMING=1; --observe times them"
"""Why the calls of a script's run read from Flight Recorder have no duration (its RunStart says it)."""


class ScriptExit(ProgramExit):
    """The script called ``sys.exit`` with a failing status."""


def run_as_main(script: UserScript) -> None:
    """Run ``script`` as ``python SCRIPT ARGS…`` (or ``python -m MODULE ARGS…``) would: as
    ``__main__``, with ``sys.argv`` its path and arguments and its folder (the current one, for a
    module) first on ``sys.path``. ``sys.exit(0)`` returns; another status
    raises :class:`ScriptExit`."""
    argv, path = sys.argv[:], sys.path[:]
    sys.argv = [str(script.path), *script.args]
    sys.path.insert(0, os.getcwd() if script.module else str(script.path.parent))
    try:
        if script.module:
            runpy.run_module(script.module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(str(script.path), run_name="__main__")
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            raise ScriptExit(f"{script.name} exited with status {exit_.code}") from None
    finally:
        sys.argv, sys.path[:] = argv, path


@dataclass(frozen=True)
class ScriptProgram:
    """The program every rank of a script run runs (a :class:`~..programs.program.ScenarioProgram`
    whose process group the script joins itself): under the light observer when ``observe``, else
    as it is (its calls are read from Flight Recorder: :mod:`.recorder`)."""

    script: UserScript
    observe: bool = True

    @property
    def phase_count(self) -> int:
        """Unknown before the script runs: its steps are seen as they happen."""
        return 0

    @property
    def source(self) -> str:
        """The script and its arguments, and what is not captured."""
        return f"your script {self.script.command} ({NOT_CAPTURED if self.observe else NOT_IN_RECORDER})"

    def narration_values(self, world_size: int) -> dict[str, object]:
        """No placeholders: a script's steps are narrated by the observer."""
        return {}

    def run_options(self) -> dict[str, Union[str, int, float, bool]]:
        """The script and its arguments, and what the run does not capture, as recorded in RunStart."""
        options: dict[str, Union[str, int, float, bool]] = {"script": str(self.script.path),
                                                             "args": " ".join(self.script.args)}
        if self.observe:
            return {**options, NOT_RECORDED_OPTION: NOT_CAPTURED}
        return {**options, NOT_RECORDED_OPTION: NOT_IN_RECORDER, UNTIMED_OPTION: UNTIMED_IN_RECORDER}

    def run(self, ctx: RankContext) -> None:
        """Run the script on this rank: under the observer (the rank's last step is its phase) when
        ``observe``, else as it is."""
        if not self.observe:
            run_as_main(self.script)
            return
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
