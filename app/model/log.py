"""The append-only event log and the indexes that make any cursor cheap to view.

Absorbing an event is O(1) amortised: it is appended to :attr:`EventLog.events` and to the few
per-rank, per-name or per-phase series it belongs to. Every series keeps parallel lists of the
event's log index and its phase, both non-decreasing, so :func:`collviz.app.model.view.view_at`
answers "the latest X at or before cursor c, in phase <= s" with two bisections.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable
from dataclasses import dataclass, field

from collviz.runtime.wire.protocol import (
    AnyEvent,
    Buffer,
    Check,
    Collective,
    CudaMemory,
    Freed,
    Gate,
    Go,
    Memory,
    Mismatch,
    NvmlMemory,
    Phase,
    ProcessExit,
    RankEnd,
    RankStart,
    RunEnd,
    RunStart,
    Span,
    Stall,
    Transfer,
)

__all__ = ["Series", "MemorySeries", "RankIndex", "PhaseIndex", "EventLog", "EXIT_INTERRUPTED"]

EXIT_INTERRUPTED = 130
"""Exit status of a run that was interrupted, or left before it ended."""


@dataclass
class Series:
    """Events of one kind in log order: their log indexes, phases and the events themselves."""

    index: list[int] = field(default_factory=list)
    phase: list[int] = field(default_factory=list)
    events: list[AnyEvent] = field(default_factory=list)

    def add(self, index: int, phase: int, event: AnyEvent) -> None:
        """Append one event (indexes and phases must not decrease)."""
        self.index.append(index)
        self.phase.append(phase)
        self.events.append(event)

    def count_upto(self, cursor: int) -> int:
        """How many events lie before ``cursor`` (log indexes ``< cursor``)."""
        return bisect_left(self.index, cursor)


@dataclass
class MemorySeries:
    """One rank's memory samples: log index, phase, live bytes, the running peak, live bytes by
    category, and the device figures each sample carried (``None`` where the run had no CUDA
    allocator or NVML)."""

    index: list[int] = field(default_factory=list)
    phase: list[int] = field(default_factory=list)
    live: list[int] = field(default_factory=list)
    peak: list[int] = field(default_factory=list)
    categories: list[dict[str, int]] = field(default_factory=list)
    cuda: list[CudaMemory | None] = field(default_factory=list)
    nvml: list[NvmlMemory | None] = field(default_factory=list)

    def add(self, index: int, event: Memory) -> None:
        """Append one sample; ``peak`` keeps the running maximum of reported peaks."""
        self.index.append(index)
        self.phase.append(event.phase)
        self.live.append(event.live_bytes)
        top = max(event.peak_bytes, event.live_bytes)
        self.peak.append(max(self.peak[-1], top) if self.peak else top)
        self.categories.append(event.by_category)
        self.cuda.append(event.cuda)
        self.nvml.append(event.nvml)


@dataclass
class RankIndex:
    """Everything the log knows about one rank, indexed by log position."""

    rank: int
    start: tuple[int, RankStart] | None = None
    end: tuple[int, RankEnd] | None = None
    exit: tuple[int, ProcessExit] | None = None
    buffers: dict[str, Series] = field(default_factory=dict)
    memory: MemorySeries = field(default_factory=MemorySeries)
    phases: Series = field(default_factory=Series)
    gates: Series = field(default_factory=Series)
    collectives: Series = field(default_factory=Series)


@dataclass
class PhaseIndex:
    """One phase across ranks: its name and narration, and the transfers, checks, collective ends
    and pipeline spans (every rank's) in it."""

    number: int
    name: str = ""
    narration: str = ""
    begin: int = -1
    transfers: Series = field(default_factory=Series)
    checks: Series = field(default_factory=Series)
    collectives: Series = field(default_factory=Series)
    spans: Series = field(default_factory=Series)
    """Every rank's pipeline spans (forward or backward of one microbatch) in this phase."""
    call_firsts: list[int] = field(default_factory=list)
    """Log index of each collective call's first end event (any rank), in order."""
    call_keys: list[tuple[str, int]] = field(default_factory=list)
    """(group, call number) of each call, parallel to :attr:`call_firsts`."""
    _seen_calls: set[tuple[str, int]] = field(default_factory=set)


class EventLog:
    """Every event of one run in arrival order, with indexes for cheap views at any cursor.

    A cursor ``c`` means "the first ``c`` events have happened" (``0 <= c <= len(log)``).
    ``step_ends[i]`` is the cursor at which every rank that ended phase ``i`` (and every earlier
    phase) has done so: the step boundaries that ←/→ move between.
    """

    def __init__(self, events: Iterable[AnyEvent] = ()) -> None:
        self.events: list[AnyEvent] = []
        self.run_start: RunStart | None = None
        self.run_end: tuple[int, RunEnd] | None = None
        self.ranks: dict[int, RankIndex] = {}
        self.phases: dict[int, PhaseIndex] = {}
        self.step_ends: list[int] = []
        self.failures: list[tuple[int, RankEnd | ProcessExit]] = []
        self.gos: Series = Series()
        self.stalls: list[tuple[int, Stall]] = []
        self.mismatches: list[tuple[int, Mismatch]] = []
        self.span_phases: list[int] = []
        """Phases that have pipeline spans, in order."""
        self.max_rank = -1
        self._handlers = {
            RunStart: self._run_start,
            RunEnd: self._run_end,
            RankStart: self._rank_start,
            RankEnd: self._rank_end,
            ProcessExit: self._process_exit,
            Phase: self._phase,
            Gate: self._gate,
            Go: self._go,
            Buffer: self._buffer,
            Freed: self._buffer,
            Memory: self._memory,
            Transfer: self._transfer,
            Span: self._span,
            Check: self._check,
            Collective: self._collective,
            Stall: self._stall,
            Mismatch: self._mismatch,
        }
        self.extend(events)

    def __len__(self) -> int:
        return len(self.events)

    @property
    def world_size(self) -> int:
        """Ranks in the run: from ``RunStart``, else the highest rank seen plus one."""
        if self.run_start is not None:
            return self.run_start.world_size
        return self.max_rank + 1

    @property
    def phase_count(self) -> int:
        """Phases in the run: from ``RunStart``, else the phases seen so far."""
        declared = self.run_start.phase_count if self.run_start is not None else 0
        return max(declared, len(self.phases))

    def extend(self, events: Iterable[AnyEvent]) -> None:
        """Absorb events in order (O(1) amortised each)."""
        handlers = self._handlers
        log = self.events
        for event in events:
            index = len(log)
            log.append(event)
            handler = handlers.get(type(event))
            if handler is not None:
                handler(index, event)

    def append(self, event: AnyEvent) -> None:
        """Absorb one event."""
        self.extend((event,))

    def rank(self, rank: int) -> RankIndex:
        """The index of ``rank``, created on first use."""
        found = self.ranks.get(rank)
        if found is None:
            found = self.ranks[rank] = RankIndex(rank)
            self.max_rank = max(self.max_rank, rank)
        return found

    def phase(self, number: int) -> PhaseIndex:
        """The index of phase ``number``, created on first use."""
        found = self.phases.get(number)
        if found is None:
            found = self.phases[number] = PhaseIndex(number)
        return found

    def ended_on_every_rank(self, phase: int) -> bool:
        """Whether every rank of the run has ended ``phase`` (a rank that ended its run counts)."""
        for rank in range(self.world_size):
            found = self.ranks.get(rank)
            if found is None:
                return False
            if found.end is not None:
                continue
            last = found.phases.events[-1] if found.phases.events else None
            if last is None or last.index < phase or (last.index == phase and last.edge != "end"):
                return False
        return self.world_size > 0

    def exit_code(self) -> int:
        """The run's exit status: 0 it ended ok, 1 it failed, 130 interrupted or not ended yet."""
        if self.run_end is None:
            return EXIT_INTERRUPTED
        return {"ok": 0, "failed": 1}.get(self.run_end[1].status, EXIT_INTERRUPTED)

    def boundaries(self) -> list[int]:
        """Sorted distinct cursors the step keys stop at: 0, each step end, the end of the log."""
        return sorted({0, len(self.events), *self.step_ends})

    # -- handlers, one per event type ----------------------------------------------------------

    def _run_start(self, index: int, event: RunStart) -> None:
        if self.run_start is None:
            self.run_start = event

    def _run_end(self, index: int, event: RunEnd) -> None:
        self.run_end = (index, event)

    def _rank_start(self, index: int, event: RankStart) -> None:
        self.rank(event.rank).start = (index, event)

    def _rank_end(self, index: int, event: RankEnd) -> None:
        self.rank(event.rank).end = (index, event)
        if event.status != "ok":
            self.failures.append((index, event))

    def _process_exit(self, index: int, event: ProcessExit) -> None:
        self.rank(event.target).exit = (index, event)
        if event.signal or event.exit_code:
            self.failures.append((index, event))

    def _phase(self, index: int, event: Phase) -> None:
        self.rank(event.rank).phases.add(index, event.index, event)
        phase = self.phase(event.index)
        if event.edge == "begin":
            if phase.begin < 0:
                phase.begin = index
                phase.name = event.name
                phase.narration = event.narration
            return
        ends = self.step_ends
        while len(ends) <= event.index:
            ends.append(ends[-1] if ends else 0)
        for number in range(event.index, len(ends)):
            if ends[number] <= index:
                ends[number] = index + 1

    def _gate(self, index: int, event: Gate) -> None:
        self.rank(event.rank).gates.add(index, event.index, event)

    def _go(self, index: int, event: Go) -> None:
        self.gos.add(index, event.index, event)

    def _buffer(self, index: int, event: Buffer | Freed) -> None:
        """A buffer's series holds its Buffer events and the Freed events that end its life."""
        buffers = self.rank(event.rank).buffers
        series = buffers.get(event.name)
        if series is None:
            series = buffers[event.name] = Series()
        series.add(index, event.phase, event)

    def _memory(self, index: int, event: Memory) -> None:
        self.rank(event.rank).memory.add(index, event)

    def _transfer(self, index: int, event: Transfer) -> None:
        self.phase(event.phase).transfers.add(index, event.phase, event)

    def _span(self, index: int, event: Span) -> None:
        spans = self.phase(event.phase).spans
        if not spans.events:
            insort(self.span_phases, event.phase)
        spans.add(index, event.phase, event)

    def _check(self, index: int, event: Check) -> None:
        self.phase(event.phase).checks.add(index, event.phase, event)

    def _stall(self, index: int, event: Stall) -> None:
        self.stalls.append((index, event))

    def _mismatch(self, index: int, event: Mismatch) -> None:
        self.mismatches.append((index, event))

    def _collective(self, index: int, event: Collective) -> None:
        self.rank(event.rank).collectives.add(index, event.phase, event)
        if event.edge == "end" and event.phase >= 0:
            phase = self.phase(event.phase)
            phase.collectives.add(index, event.phase, event)
            key = (event.group, event.group_seq)
            if key not in phase._seen_calls:
                phase._seen_calls.add(key)
                phase.call_firsts.append(index)
                phase.call_keys.append(key)
