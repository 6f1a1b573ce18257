"""What a scenario runs on every rank: the interface each kind of scenario implements.

A *program* is built once in the launcher from a scenario file and the command line, validated
there (bad input fails before any process starts), then handed to every forked worker, whose
:meth:`ScenarioProgram.run` opens the phases and emits the events. Collectives are one kind
(:mod:`.collectives`); training scenarios are others. To add a kind, implement this protocol and
register its builder in :data:`.registry.BUILDERS`. This module imports no program, so every
program may import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Union

from ..context import RankContext
from ..errors import UsageError
from ..scenario_files.schema import Scenario

__all__ = ["ScenarioProgram", "RunOptions", "refuse_training_options"]


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
    algo: str | None = None
    """Collectives only: run hop by hop with this algorithm (``library``: the backend's own call)."""
    top_k: int | None = None
    """MoE only: experts per token."""
    capacity_factor: float | None = None
    """MoE only: token slots per expert, as a multiple of an even share."""
    schedule: str | None = None
    """Pipeline only: ``gpipe`` or ``1f1b``."""
    microbatches: int | None = None
    """Pipeline only: microbatches the batch is cut into."""


def refuse_training_options(scenario: Scenario, options: RunOptions) -> None:
    """Options only training scenarios take are a UsageError for a collective."""
    for flag, value, owner in (("--prefetch/--no-prefetch", options.prefetch, "fsdp"),
                               ("--reshard-after-forward/--no-reshard-after-forward", options.reshard_after_forward, "fsdp"),
                               ("--top-k", options.top_k, "moe"), ("--capacity-factor", options.capacity_factor, "moe"),
                               ("--schedule", options.schedule, "pp"), ("--microbatches", options.microbatches, "pp")):
        if value is not None:
            raise UsageError(f"{flag} does not apply to {scenario.name} (only to {owner} scenarios)")
