"""Each pane's fields: what one pane of the viewer draws, taken from the view at the cursor.

A pane is handed its own small frozen record (``HeaderFields.of(view)``…), never the whole
:class:`~.view.ViewState`, so what it shows is what its type says (the rank panels get their
:class:`~.view.RankView`, the heatmap the ranks, the bench plot its :class:`~.bench.BenchView`).
A new pane is one widget plus one record here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collviz.runtime.wire.protocol import (
    IMPORT_RUN_PREFIX,
    NOT_RECORDED_OPTION,
    STACKS_SCENARIO,
    UNTIMED_OPTION,
    AnyEvent,
    Check,
    Collective,
    RunStart,
    Span,
    Transfer,
)

from .cost import CallCost
from .transfer_ends import step_call
from .view import MemoryTrack, RunState, ViewState

__all__ = ["HeaderFields", "NarrationFields", "CostFields", "TransferFields", "PipelineFields", "MemoryFields",
           "EventTailFields", "not_recorded", "NO_SAMPLES"]


NO_SAMPLES = "no memory samples yet"
"""What the memory pane says before any sample, where it has nothing more to say."""


def not_recorded(run: RunStart | None) -> str:
    """Why ``run`` holds no transfers, memory or other records of data (an imported artifact, a
    user's script, an attached job), or empty where it records them."""
    return str(run.options.get(NOT_RECORDED_OPTION, "")) if run is not None else ""


@dataclass(frozen=True)
class HeaderFields:
    """The header's: the run (None before it starts), the cursor (0: before step 1), the step
    (0-based) of ``step_count`` and its phase's name, and the run's state there."""

    run: RunStart | None
    cursor: int
    step: int
    step_count: int
    phase_name: str
    state: RunState

    @classmethod
    def of(cls, view: ViewState) -> HeaderFields:
        """The header's fields of ``view``."""
        return cls(view.run, view.cursor, view.step, view.step_count, view.phase_name, view.state)


@dataclass(frozen=True)
class NarrationFields:
    """The narration pane's: whether the run has started, the phase's name and narration, the
    run's state (a failure's whole reason) and the step's checks."""

    started: bool
    phase_name: str
    narration: str
    state: RunState
    checks: tuple[Check, ...]

    @classmethod
    def of(cls, view: ViewState) -> NarrationFields:
        """The narration pane's fields of ``view``."""
        return cls(view.run is not None, view.phase_name, view.narration, view.state, view.checks)


@dataclass(frozen=True)
class CostFields:
    """The cost pane's: the step's latest calls' costs (``call_count`` in all); where there are
    none, each rank's latest call in the step (``(rank, call)``: a call not ended says which ranks
    are inside it; not gathered where the step has costs, which the pane shows instead); why the
    run's calls carry no time, where they do not."""

    costs: tuple[CallCost, ...]
    call_count: int
    step: int
    latest_calls: tuple[tuple[int, Collective | None], ...]
    untimed: str
    worded_by_group: bool = False
    """Whether a call's group is its own words, with no call number (a job read from stacks)."""

    @classmethod
    def of(cls, view: ViewState) -> CostFields:
        """The cost pane's fields of ``view``."""
        untimed = str(view.run.options.get(UNTIMED_OPTION, "")) if view.run is not None else ""
        latest = () if view.costs else tuple((r.rank, r.collective) for r in view.ranks)
        return cls(view.costs, view.call_count, view.step, latest, untimed,
                   view.run is not None and view.run.scenario == STACKS_SCENARIO)


@dataclass(frozen=True)
class TransferFields:
    """The transfers pane's: the step's transfers listed (``count`` in all, put in order among the
    first ``sorted_among`` to arrive), the step's call they belong to (its ranges name the
    senders'), and why the run records none, where it does not."""

    transfers: tuple[Transfer, ...]
    count: int
    sorted_among: int
    call: Collective | None
    not_recorded: str

    @classmethod
    def of(cls, view: ViewState) -> TransferFields:
        """The transfers pane's fields of ``view``."""
        call = step_call([rank.collective for rank in view.ranks], view.step) if view.transfers else None
        return cls(view.transfers, view.transfer_count, view.transfers_sorted_among, call, not_recorded(view.run))


@dataclass(frozen=True)
class PipelineFields:
    """The pipeline pane's: the spans shown, those left out (stepped piece by piece), the ranks."""

    spans: tuple[Span, ...]
    hidden: int
    world_size: int

    @classmethod
    def of(cls, view: ViewState) -> PipelineFields:
        """The pipeline pane's fields of ``view``."""
        return cls(view.spans, view.spans_hidden, len(view.ranks))


@dataclass(frozen=True)
class MemoryFields:
    """The memory pane's: each rank's memory track and device (by rank), every phase's name, and
    what it says before any sample (``no_samples``)."""

    tracks: tuple[MemoryTrack, ...]
    devices: tuple[str, ...]
    phase_names: dict[int, str] = field(compare=False)
    no_samples: str = NO_SAMPLES

    @classmethod
    def of(cls, view: ViewState) -> MemoryFields:
        """The memory pane's fields of ``view``."""
        return cls(tuple(r.memory for r in view.ranks), tuple(r.device for r in view.ranks), view.phase_names,
                   _no_samples(view.run))


def _no_samples(run: RunStart | None) -> str:
    """What the memory pane says before any rank has a sample: where a script's come from, that an
    imported artifact or an attached job's Flight Recorder (or its stacks) holds none."""
    options = run.options if run is not None else {}
    if "script" in options:
        return "no memory samples yet: collviz.watch(model, optimizer) adds them at each step's end"
    if run is not None and NOT_RECORDED_OPTION in options:  # an import, or (its run not one) an attached job
        source = ("the imported artifact holds" if run.run.startswith(IMPORT_RUN_PREFIX) else
                  "the attached job's stacks hold" if run.scenario == STACKS_SCENARIO else
                  "the attached job's Flight Recorder holds")
        return f"memory not recorded: {source} none"
    return NO_SAMPLES


@dataclass(frozen=True)
class EventTailFields:
    """The event log pane's: the events just before the cursor, the cursor and the log's length."""

    tail: tuple[AnyEvent, ...]
    cursor: int
    length: int

    @classmethod
    def of(cls, view: ViewState) -> EventTailFields:
        """The event log pane's fields of ``view``."""
        return cls(view.tail, view.cursor, view.length)
