"""``collviz compare``: DDP, FSDP, HSDP, FSDP × TP and a pipeline on the same model, run one after
the other (one session each).

:func:`same_model` checks the scenarios train the same model, :func:`plan_comparison` plans
their runs on the same ranks, :func:`compare_runs` runs them quietly and reduces each run's events to :class:`~.reports.compare.RunFigures` (saying where
each recording went, or why it stopped early), and
:func:`model_sizes` counts the parameters the report's theory column needs.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import NamedTuple, TextIO

from .errors import EXIT_RECORDING_INCOMPLETE, UsageError
from .plan import RunPlan, plan_run
from .reports.compare import ModelSizes, RunFigures, figures_of
from .reports.progress import ProgressLine
from .scenario_files.loading import Scenario, find_scenario
from .sessions.headless import collect, report_recording
from .sessions.local import LocalSession
from .wire.protocol import AnyEvent, Phase

__all__ = ["MODEL_KEYS", "COMPARABLE", "ComparedRun", "same_model", "plan_comparison", "compare_runs", "model_sizes"]

MODEL_KEYS = ("seed", "vocab", "d_model", "blocks", "seq", "lr")
"""Settings that must agree for two runs to be "the same model" (the batch may differ: a pipeline's
is the whole step's, a data-parallel one's each rank's; the report prints each run's)."""

COMPARABLE = ("ddp", "fsdp", "hsdp", "fsdp-tp", "pp")
"""Kinds of scenario ``collviz compare`` runs side by side (they train the same tiny GPT)."""


def same_model(names: list[str]) -> list[Scenario]:
    """The scenarios, checked to be two or more of :data:`COMPARABLE` training the same model."""
    scenarios = [find_scenario(name) for name in names]
    others = [s.name for s in scenarios if s.kind not in COMPARABLE]
    if others:
        raise UsageError(f"compare runs {', '.join(COMPARABLE)} scenarios, not {', '.join(others)}")
    models = {tuple(s.settings[k] for k in MODEL_KEYS) for s in scenarios}
    if len(models) > 1:
        raise UsageError(f"{', '.join(names)} train different models; their {', '.join(MODEL_KEYS)} must agree")
    return scenarios


def plan_comparison(scenarios: list[Scenario], world_size: int, backend: str, record_dir: Path | None,
                    timeout_s: float) -> list[RunPlan]:
    """One plan per scenario, all on the same ranks and backend (each recorded as
    ``record_dir/SCENARIO.cvz`` when a folder is given)."""
    return [plan_run(scenario, world_size, backend=backend, timeout_s=timeout_s,
                     record=None if record_dir is None else record_dir / f"{scenario.name}.cvz")
            for scenario in scenarios]


class ComparedRun(NamedTuple):
    """One run of a comparison."""

    figures: RunFigures
    events: list[AnyEvent]
    recorded: bool
    """False when its recording stopped early (a write error, said on ``err``); True otherwise."""


def compare_runs(plans: list[RunPlan], err: TextIO | None = None) -> list[ComparedRun]:
    """Run the planned scenarios one after the other; each one's figures and events.

    With ``err`` (a terminal), a progress bar over every run's phases is drawn there; where a plan
    records, ``err`` says where its trace went, or why it stopped early (as every run says it).
    """
    progress = ProgressLine(err or io.StringIO(), "compare", sum(plan.program.phase_count for plan in plans))
    figures, offset = [], 0
    try:
        for plan in plans:
            scenario, program = plan.scenario, plan.program
            session = LocalSession(plan)

            def on_event(event: AnyEvent, offset: int = offset, name: str = scenario.name) -> None:
                if isinstance(event, Phase) and event.edge == "begin" and event.rank == 0:
                    progress.update(offset + event.index + 1, f"{name}: {event.name}")

            events = collect(session, on_event)
            if plan.record is not None:
                progress.close()  # the line below says where the trace went
            recorded = report_recording(session, 0, err or io.StringIO()) != EXIT_RECORDING_INCOMPLETE
            figures.append(ComparedRun(figures_of(events, scenario.kind, int(scenario.settings.get("replicas", 1)),
                                                  int(scenario.settings.get("tp", 1))), events, recorded))
            offset += program.phase_count
    finally:
        progress.close()
    return figures


def model_sizes(scenario: Scenario, world_size: int) -> ModelSizes:
    """The parameter counts of the scenario's model that the report's theory needs (a pipeline's
    stage 0 as cut for ``world_size`` stages)."""
    from .programs.training.fsdp import units_of
    from .programs.training.model import make_gpt
    from .programs.training.pp import stage_pieces

    model = make_gpt(dict(scenario.settings))
    params = sum(p.numel() for p in model.parameters())
    unit = max(sum(p.numel() for p in m.parameters()) for _, m in units_of(model))
    split = sum(model.get_parameter(f"blocks.{i}.{name}").numel()
                for i in range(len(model.blocks)) for name in ("fc1.weight", "fc1.bias", "fc2.weight"))
    stages = min(world_size, len(model.blocks))
    per_stage = tuple(sum(p.numel() for piece in stage_pieces(len(model.blocks), stages, s)
                          for p in model.get_submodule(piece).parameters()) for s in range(stages))
    return ModelSizes(params, unit, split, per_stage)
