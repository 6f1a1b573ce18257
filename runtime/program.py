"""What a scenario runs on every rank: the interface each kind of scenario implements.

A *program* is built once in the launcher from a scenario file and the command line, validated
there (bad input fails before any process starts), then handed to every forked worker, whose
:meth:`ScenarioProgram.run` opens the phases and emits the events. Collectives are one kind
(:mod:`runtime.collectives`); training scenarios are others. To add a kind, implement this
protocol and register its builder in :data:`BUILDERS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, Union

from .context import RankContext
from .errors import UsageError
from .scenario import Scenario

__all__ = ["ScenarioProgram", "RunOptions", "BUILDERS", "build_program"]


class ScenarioProgram(Protocol):
    """One scenario, resolved for one run; identical on every rank."""

    @property
    def phase_count(self) -> int:
        """How many phases every rank opens."""

    @property
    def source(self) -> str:
        """Where the inputs come from, in one line (a worked example, or how they are generated)."""

    def narration_values(self, world_size: int) -> dict[str, object]:
        """Values for the scenario's narration placeholders."""

    def run_options(self) -> dict[str, Union[str, int, float, bool]]:
        """The resolved options, as recorded in RunStart."""

    def run(self, ctx: RankContext) -> None:
        """Run this rank's part: every phase, every event."""


@dataclass(frozen=True)
class RunOptions:
    """Command-line overrides a program builder may use; ``None`` means "not given"."""

    reduce_op: str | None = None
    dtype: str | None = None
    size_bytes: int | None = None
    root: int | None = None
    iters: int = 1
    prefetch: bool | None = None
    """FSDP only: prefetch the next unit's all-gather (forward and backward)."""
    reshard_after_forward: bool | None = None
    """FSDP only: free gathered parameters after each unit's forward."""


Builder = Callable[[Scenario, int, RunOptions], ScenarioProgram]


def _build_collective(scenario: Scenario, world_size: int, options: RunOptions) -> ScenarioProgram:
    from .collectives import resolve_spec

    _refuse_training_options(scenario, options)
    return resolve_spec(
        scenario, world_size, reduce_op=options.reduce_op, dtype=options.dtype,
        size_bytes=options.size_bytes, root=options.root, iters=options.iters,
    )


def _build_desync(scenario: Scenario, world_size: int, options: RunOptions) -> ScenarioProgram:
    from .desync import build_desync

    return build_desync(scenario, world_size, options)


def _refuse_training_options(scenario: Scenario, options: RunOptions) -> None:
    """Options only the FSDP scenario takes are a UsageError elsewhere."""
    for flag, value in (("--prefetch/--no-prefetch", options.prefetch),
                        ("--reshard-after-forward/--no-reshard-after-forward", options.reshard_after_forward)):
        if value is not None:
            raise UsageError(f"{flag} does not apply to {scenario.name} (only to fsdp scenarios)")


def _training_builder(module: str) -> Builder:
    """The ``build`` function of ``runtime.training.<module>``, imported when first used."""

    def build(scenario: Scenario, world_size: int, options: RunOptions) -> ScenarioProgram:
        from importlib import import_module

        return import_module(f"{__package__}.training.{module}").build(scenario, world_size, options)

    build.__doc__ = f"Build a {module} training program (runtime.training.{module})."
    return build


BUILDERS: dict[str, Builder] = {
    "collective": _build_collective,
    "desync": _build_desync,
    "ring": _training_builder("ring"),
    "ddp": _training_builder("ddp"),
    "fsdp": _training_builder("fsdp"),
    "tp": _training_builder("tp"),
}
"""Scenario kind → the function that resolves it into a program."""


def build_program(scenario: Scenario, world_size: int, options: RunOptions) -> ScenarioProgram:
    """Resolve ``scenario`` for ``world_size`` ranks; UsageError names what does not fit."""
    builder = BUILDERS.get(scenario.kind)
    if builder is None:
        raise UsageError(f"scenario {scenario.name}: kind {scenario.kind!r} cannot run in this collviz")
    return builder(scenario, world_size, options)
