"""What a script may call so that collviz shows it better: ``collviz.step`` and ``collviz.watch``.

::

    import collviz

    collviz.watch(model, optimizer)          # memory per step: parameters, gradients, optimizer state
    for index in range(steps):
        with collviz.step(f"train step {index}"):
            ...

``collviz.step(name)`` begins a step at once (ending the one before, if any); used as a context
manager it also ends it. Each step is one step in the viewer. Both are no-ops when the script is
not run by collviz (plain ``python``, ``torchrun``): a lookup and a return, no torch import.

The runtime attaches its observer (:mod:`collviz.runtime.userjob.observer`) around the script;
this module imports nothing, so ``import collviz`` stays free.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["Recorder", "StepMark", "attach", "detach", "step", "watch"]


class Recorder(Protocol):
    """What receives the marks while collviz runs the script (its observer)."""

    def begin_step(self, name: str) -> int:
        """Begin step ``name`` (ending the open one); returns its number."""

    def end_step(self, number: int) -> None:
        """End step ``number`` if it is still the open one."""

    def watch(self, objects: tuple[Any, ...]) -> None:
        """Account the memory of these modules and optimizers at each step's end."""


_recorder: Recorder | None = None


def attach(recorder: Recorder) -> None:
    """Send the script's marks to ``recorder`` (collviz's runtime does, around the script)."""
    global _recorder
    _recorder = recorder


def detach() -> None:
    """Make the marks no-ops again."""
    global _recorder
    _recorder = None


class StepMark:
    """A step that began when this was made; leaving it as a context manager ends it."""

    __slots__ = ("_number",)

    def __init__(self, number: int | None) -> None:
        self._number = number

    def __enter__(self) -> StepMark:
        return self

    def __exit__(self, *exc_info: object) -> None:
        recorder = _recorder
        if recorder is not None and self._number is not None:
            recorder.end_step(self._number)


def step(name: str) -> StepMark:
    """Begin training step ``name`` now (one step in collviz's viewer); ``with`` ends it too."""
    recorder = _recorder
    return StepMark(recorder.begin_step(str(name)) if recorder is not None else None)


def watch(*objects: Any) -> None:
    """Account these modules' parameters and gradients, and these optimizers' state, in the
    memory collviz shows at the end of each step."""
    recorder = _recorder
    if recorder is not None:
        recorder.watch(objects)
