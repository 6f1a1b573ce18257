"""Scenario kind → the function that resolves a scenario file and the command line into a program.

The one place that knows every kind of program; the programs themselves import only
:mod:`.program` (their interface), never this module.
"""

from __future__ import annotations

from collections.abc import Callable

from ..compat import DDP_BUCKET_CAP_MB_LIST, PIPELINE_FIRST_STEP, TorchAPI, TorchBug
from ..errors import UsageError
from ..scenario_files.schema import Scenario
from .program import RunOptions, ScenarioProgram, refuse_training_options

__all__ = ["BUILDERS", "NEEDS", "build_program", "torch_refusal"]

Builder = Callable[[Scenario, int, RunOptions], ScenarioProgram]


def _build_collective(scenario: Scenario, world_size: int, options: RunOptions) -> ScenarioProgram:
    from .collectives import resolve_spec

    refuse_training_options(scenario, options)
    spec = resolve_spec(
        scenario, world_size, reduce_op=options.reduce_op, dtype=options.dtype,
        size_bytes=options.size_bytes, root=options.root, iters=options.iters,
    )
    if options.algo in (None, "library"):
        return spec
    from .algorithms.program import build_algorithm

    return build_algorithm(spec, options.algo, world_size)


def _build_desync(scenario: Scenario, world_size: int, options: RunOptions) -> ScenarioProgram:
    from .desync import build_desync

    return build_desync(scenario, world_size, options)


def _training_builder(module: str) -> Builder:
    """The ``build`` function of ``.training.<module>``, imported when first used."""

    def build(scenario: Scenario, world_size: int, options: RunOptions) -> ScenarioProgram:
        from importlib import import_module

        return import_module(f"{__package__}.training.{module}").build(scenario, world_size, options)

    build.__doc__ = f"Build a {module} training program (collviz.runtime.programs.training.{module})."
    return build


BUILDERS: dict[str, Builder] = {
    "collective": _build_collective,
    "desync": _build_desync,
    "ring": _training_builder("ring"),
    "ddp": _training_builder("ddp"),
    "fsdp": _training_builder("fsdp"),
    "hsdp": _training_builder("fsdp"),
    "fsdp-tp": _training_builder("fsdp"),
    "tp": _training_builder("tp"),
    "moe": _training_builder("moe"),
    "pp": _training_builder("pp"),
}
"""Scenario kind → the function that resolves it into a program."""


NEEDS: dict[str, tuple[TorchAPI | TorchBug, ...]] = {
    "ddp": (DDP_BUCKET_CAP_MB_LIST,),  # per-bucket caps from DDP's first step
    "pp": (PIPELINE_FIRST_STEP,),  # 2.9's pipelining aborts its first step on gloo
}
"""Scenario kind → the version-sensitive torch APIs it cannot run without and torch's bugs it cannot
run with (:mod:`..compat`)."""


def torch_refusal(scenario: Scenario) -> str | None:
    """One line saying why this torch cannot run ``scenario`` (``scenario ddp needs torch ≥ 2.11
    (this is 2.8.0+cu128)``, or the torch bug it meets), or None where it can."""
    for need in NEEDS.get(scenario.kind, ()):
        if (refusal := need.refusal(f"scenario {scenario.name}")) is not None:
            return refusal
    return None


def build_program(scenario: Scenario, world_size: int, options: RunOptions) -> ScenarioProgram:
    """Resolve ``scenario`` for ``world_size`` ranks; UsageError names what does not fit, this
    torch included (:func:`torch_refusal`)."""
    builder = BUILDERS.get(scenario.kind)
    if builder is None:
        raise UsageError(f"scenario {scenario.name}: kind {scenario.kind!r} cannot run in this collviz")
    if (refusal := torch_refusal(scenario)) is not None:
        raise UsageError(refusal)
    return builder(scenario, world_size, options)
