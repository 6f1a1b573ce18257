"""The append-only event log and the indexes that make any cursor cheap to view.

Absorbing an event is O(1) amortised: it is appended to :attr:`EventLog.events` and to the few
per-rank, per-name or per-phase series it belongs to. Every series keeps parallel lists of the
event's log index and its phase, both non-decreasing, so :func:`collviz.app.model.view.view_at`
answers "the latest X at or before cursor c, in phase <= s" with two bisections.

A ``CallRanks`` event (one call's ranks as columns: a job read through relays) is one event of
the log, filed in the series of each rank it names as that rank's Phase and Collective events
would be, at its one position, with the rank's place in the event's columns
(:data:`~collviz.runtime.wire.call_ranks.Place`); a series reads it as that rank's event at that
place (:mod:`collviz.runtime.wire.call_ranks`), made when read in O(1), so the panes read Phase and
Collective events as ever.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from operator import attrgetter
from typing import Any, Callable, Generic, TypeVar, cast, overload

from collviz.runtime.wire.call_ranks import Place, begin_places, collective_at, end_places, phase_at
from collviz.runtime.wire.columns import transfer_keys
from collviz.runtime.wire.protocol import (
    AnyEvent,
    Buffer,
    CallRanks,
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

__all__ = ["Series", "MemorySeries", "RankIndex", "PhaseIndex", "EventLog", "EXIT_INTERRUPTED", "ENDED"]

EXIT_INTERRUPTED = 130
"""Exit status of a run that was interrupted, or left before it ended."""

ENDED = 1 << 62
"""The gate a rank whose run has ended counts as having arrived at: past every gate."""

_PHASE, _LIVE, _PEAK = attrgetter("phase"), attrgetter("live_bytes"), attrgetter("peak_bytes")
_CATEGORIES, _CUDA, _NVML = attrgetter("by_category"), attrgetter("cuda"), attrgetter("nvml")

E = TypeVar("E", bound=AnyEvent)
"""The kind of event a :class:`Series` holds."""


class Series(Generic[E]):
    """Events of one kind ``E`` in log order: their log positions (:attr:`index`) and phases, both
    non-decreasing. The events themselves stay in the log's store (its list, or a trace's
    :class:`~collviz.runtime.wire.stored.StoredEvents`) and :attr:`events` reads them from there."""

    __slots__ = ("index", "phase", "places", "_store", "_reads")

    def __init__(self, store: Sequence[AnyEvent] = (), reads: Reads | None = None) -> None:
        self.index = array("q")
        self.phase = array("q")
        self.places: array | None = None
        """Parallel to :attr:`index` once the series holds a ``CallRanks`` entry (None before):
        each such entry's :data:`~collviz.runtime.wire.call_ranks.Place` in its event's columns,
        0 for an event filed as itself (never read as a place)."""
        self._store = store
        self._reads = reads

    @property
    def holds_grouped(self) -> bool:
        """Whether a ``CallRanks`` event is among the series' (then read with ``reads`` at its place)."""
        return self.places is not None

    @property
    def events(self) -> Sequence[E]:
        """The series' events in order: a view that reads each from the store when indexed (the
        log files only events of kind ``E`` in a ``Series[E]``; a ``CallRanks`` is read as one)."""
        if self.places is not None and self._reads is not None:
            return cast("Sequence[E]", _Picked(self._store, self.index, self._reads, self.places))
        return cast("Sequence[E]", _Picked(self._store, self.index))

    def add(self, index: int, phase: int) -> None:
        """Append the event at log position ``index`` (positions and phases must not decrease)."""
        if self.places is not None:
            self.places.append(0)
        self.index.append(index)
        self.phase.append(phase)

    def add_grouped(self, index: int, phase: int, place: Place) -> None:
        """Append one rank's entry of the ``CallRanks`` event at log position ``index``, read at
        ``place`` in its columns."""
        self._grouped().append(place)
        self.index.append(index)
        self.phase.append(phase)

    def extend(self, index: array, phase: array, places: Iterable[Place] | None = None) -> None:
        """Append events by position and phase, in order (int64 arrays of equal length);
        ``places``: theirs where they are entries of ``CallRanks`` events (see :meth:`add_grouped`)."""
        if places is not None:
            self._grouped().extend(places)
        elif self.places is not None:
            self.places.extend(array("q", bytes(8 * len(index))))
        self.index.extend(index)
        self.phase.extend(phase)

    def _grouped(self) -> array:
        """:attr:`places`, made at the series' first ``CallRanks`` entry (each entry before it an
        event filed as itself)."""
        if self.places is None:
            self.places = array("q", bytes(8 * len(self.index)))
        return self.places

    def count_upto(self, cursor: int) -> int:
        """How many events lie before ``cursor`` (log indexes ``< cursor``)."""
        return bisect_left(self.index, cursor)


Reads = Callable[[CallRanks, Place], AnyEvent]
"""How a series reads a ``CallRanks`` it holds: the event, and the place of the series' entry in
its columns → the event the series holds there (:func:`~collviz.runtime.wire.call_ranks.phase_at`
in a rank's phases, :func:`~collviz.runtime.wire.call_ranks.collective_at` in its collectives and
in a step's collective ends)."""


class _Picked(Sequence[AnyEvent]):
    """The events of ``store`` at ``positions``, read when indexed (slices are lists); ``reads``:
    how a ``CallRanks`` among them is read at its entry's place among ``places`` (see :data:`Reads`)."""

    __slots__ = ("_store", "_positions", "_reads", "_places")

    def __init__(self, store: Sequence[AnyEvent], positions: Sequence[int], reads: Reads | None = None,
                 places: Sequence[Place] = ()) -> None:
        self._store = store
        self._positions = positions
        self._reads = reads
        self._places = places

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, at: int) -> AnyEvent: ...

    @overload
    def __getitem__(self, at: slice) -> list[AnyEvent]: ...

    def __getitem__(self, at: int | slice) -> AnyEvent | list[AnyEvent]:
        if isinstance(at, slice):
            if self._reads is not None:
                return list(map(self._read, range(*at.indices(len(self._positions)))))
            return list(map(self._store.__getitem__, self._positions[at]))
        if self._reads is not None:
            return self._read(at)
        return self._store[self._positions[at]]

    def __iter__(self) -> Iterator[AnyEvent]:
        if self._reads is not None:
            return map(self._read, range(len(self._positions)))
        return map(self._store.__getitem__, self._positions)

    def _read(self, at: int) -> AnyEvent:
        event = self._store[self._positions[at]]
        if type(event) is not CallRanks or self._reads is None:
            return event
        return self._reads(event, self._places[at])


@dataclass
class MemorySeries:
    """One rank's memory samples: log index, phase, live bytes, the running peak, live bytes by
    category, and the device figures each sample carried (``None`` where the run had no CUDA
    allocator or NVML)."""

    index: array = field(default_factory=lambda: array("q"))
    phase: array = field(default_factory=lambda: array("q"))
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

    def extend(self, index: array, events: Sequence[Memory]) -> None:
        """Append samples in order: ``events`` at log positions ``index`` (what :meth:`add`
        does for each, a column at a time)."""
        self.index.extend(index)
        self.phase.extend(array("q", map(_PHASE, events)))
        live = list(map(_LIVE, events))
        tops = map(max, map(_PEAK, events), live)
        peaks = accumulate(tops, max, initial=self.peak[-1]) if self.peak else accumulate(tops, max)
        if self.peak:
            next(peaks)  # the running peak so far, already held
        self.live.extend(live)
        self.peak.extend(peaks)
        self.categories.extend(map(_CATEGORIES, events))
        self.cuda.extend(map(_CUDA, events))
        self.nvml.extend(map(_NVML, events))


@dataclass
class RankIndex:
    """Everything the log knows about one rank, indexed by log position (its series read their
    events from ``store``, the log's)."""

    rank: int
    store: Sequence[AnyEvent] = field(default=(), repr=False, compare=False)
    start: tuple[int, RankStart] | None = None
    end: tuple[int, RankEnd] | None = None
    exit: tuple[int, ProcessExit] | None = None
    buffers: dict[str, Series[Buffer | Freed]] = field(default_factory=dict)
    memory: MemorySeries = field(default_factory=MemorySeries)
    phases: Series[Phase] = field(init=False)
    gates: Series[Gate] = field(init=False)
    collectives: Series[Collective] = field(init=False)

    def __post_init__(self) -> None:
        self.phases, self.gates = Series(self.store, phase_at), Series(self.store)
        self.collectives = Series(self.store, collective_at)

    def buffer(self, name: str) -> Series[Buffer | Freed]:
        """The series of buffer ``name`` (its Buffer and Freed events), created on first use."""
        found = self.buffers.get(name)
        if found is None:
            found = self.buffers[name] = Series(self.store)
        return found


@dataclass
class PhaseIndex:
    """One phase across ranks: its name and narration, and the transfers, checks, collective ends
    and pipeline spans (every rank's) in it."""

    number: int
    store: Sequence[AnyEvent] = field(default=(), repr=False, compare=False)
    name: str = ""
    narration: str = ""
    begin: int = -1
    transfers: Series[Transfer] = field(init=False)
    checks: Series[Check] = field(init=False)
    collectives: Series[Collective] = field(init=False)
    spans: Series[Span] = field(init=False)
    """Every rank's pipeline spans (forward or backward of one microbatch) in this phase."""
    call_firsts: list[int] = field(default_factory=list)
    """Log index of each collective call's first end event (any rank), in order."""
    call_keys: list[tuple[str, int]] = field(default_factory=list)
    """(group, call number) of each call, parallel to :attr:`call_firsts`."""
    transfer_dsts: array = field(default_factory=lambda: array("q"))
    transfer_orders: array = field(default_factory=lambda: array("q"))
    """Each transfer's destination and :func:`~collviz.runtime.wire.columns.transfer_order_key`
    (-1 where either is out of its range), parallel to :attr:`transfers`: the view orders a
    step's transfers without decoding them."""
    costs: tuple[int, int, tuple[Any, ...], int] | None = field(default=None, repr=False, compare=False)
    """The view's cache of the step's call costs: for how many collective ends and calls, the
    costs and the call count (see :func:`~.cost.costs_at`)."""
    sorted_transfers: tuple[int, tuple[Transfer, ...], int] | None = field(default=None, repr=False, compare=False)
    """The view's cache: how many transfers were last put in order, the first of them, and how
    many they were chosen from."""
    _seen_calls: set[tuple[str, int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        store = self.store
        self.transfers, self.checks = Series(store), Series(store)
        self.collectives, self.spans = Series(store, collective_at), Series(store)

    def add_call(self, index: int, key: tuple[str, int]) -> None:
        """Note collective call ``key`` (group, call number) if it is new: its first end is at ``index``."""
        if key not in self._seen_calls:
            self._seen_calls.add(key)
            self.call_firsts.append(index)
            self.call_keys.append(key)


class EventLog:
    """Every event of one run in arrival order, with indexes for cheap views at any cursor.

    A cursor ``c`` means "the first ``c`` events have happened" (``0 <= c <= len(log)``).
    ``step_ends[i]`` is the cursor at which every rank that ended phase ``i`` (and every earlier
    phase) has done so and, in a step-through run, waits at the next gate: the step boundaries
    that ←/→ move between.

    The events are held in a list that :meth:`extend` grows, or, for a trace opened whole, in the
    ``store`` given (a :class:`~collviz.runtime.wire.stored.StoredEvents` decodes them from the
    file when read); such a log is filled by :mod:`.trace_index` through :meth:`index_event` and
    the series' ``extend``, and does not grow.
    """

    def __init__(self, events: Iterable[AnyEvent] = (), *, store: Sequence[AnyEvent] | None = None) -> None:
        self.events: Sequence[AnyEvent] = store if store is not None else []
        self.run_start: RunStart | None = None
        self.run_end: tuple[int, RunEnd] | None = None
        self.ranks: dict[int, RankIndex] = {}
        self.phases: dict[int, PhaseIndex] = {}
        self.step_ends: list[int] = []
        self.failures: list[tuple[int, RankEnd | ProcessExit]] = []
        self.gos: Series[Go] = Series(self.events)
        self.stalls: list[tuple[int, Stall]] = []
        self.stalls_over: dict[int, int] = {}
        """Stall (its place in :attr:`stalls`) → the event after which every rank that waited in
        its call had completed it: the wait is over (a slow rank arrived; an attached job goes on)."""
        self._waiting_in: dict[tuple[str, int], tuple[int, set[int]]] = {}
        self.mismatches: list[tuple[int, Mismatch]] = []
        self.span_phases: list[int] = []
        """Phases that have pipeline spans, in order."""
        self.arrived: dict[int, int] = {}
        """Per rank, the highest gate it has waited at (:data:`ENDED` once its run has ended)."""
        self.gate_reached = -1
        """The gate every rank has arrived at (waited there, gone past it, or ended: then
        :data:`ENDED`); -1 before every rank has waited at one."""
        self.arrival_cursor = 0
        """The cursor at which every rank had last arrived together: just after the last rank
        came to :attr:`gate_reached` (0 before). A step-through run's followed frame lands
        here, so a step is shown once every rank has done it, not rank by rank."""
        self.max_rank = -1
        self._filed: int | None = None
        self._handlers: dict[type, Callable[[int, Any], None]] = {
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
            CallRanks: self._call_ranks,
        }
        if store is None:
            self.extend(events)
        elif events != ():
            raise ValueError("a log holds given events or a store's, not both")

    def __len__(self) -> int:
        return len(self.events)

    @property
    def filed(self) -> int:
        """How many events, from the first, the indexes hold: all of them, but while a stored
        trace's later parts are still being filed (:mod:`.trace_index`), and a view past them
        would lack their events."""
        return len(self.events) if self._filed is None else self._filed

    def mark_filed(self, count: int) -> None:
        """The indexes of a stored trace's log now hold its first ``count`` events."""
        self._filed = None if count >= len(self.events) else count

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
        if not isinstance(log, list):
            raise TypeError("the log of a stored trace does not grow")
        for event in events:
            index = len(log)
            log.append(event)
            handler = handlers.get(type(event))
            if handler is not None:
                handler(index, event)

    def index_event(self, index: int, event: AnyEvent) -> None:
        """File ``event``, which the store already holds at position ``index``, into the indexes
        (what :meth:`extend` does after appending it); events must come in log order."""
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(index, event)

    def append(self, event: AnyEvent) -> None:
        """Absorb one event."""
        self.extend((event,))

    def rank(self, rank: int) -> RankIndex:
        """The index of ``rank``, created on first use."""
        found = self.ranks.get(rank)
        if found is None:
            found = self.ranks[rank] = RankIndex(rank, self.events)
            self.max_rank = max(self.max_rank, rank)
        return found

    def phase(self, number: int) -> PhaseIndex:
        """The index of phase ``number``, created on first use."""
        found = self.phases.get(number)
        if found is None:
            found = self.phases[number] = PhaseIndex(number, self.events)
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
        self._arrive(event.rank, ENDED, index)
        if event.status != "ok":
            self.failures.append((index, event))

    def _process_exit(self, index: int, event: ProcessExit) -> None:
        self.rank(event.target).exit = (index, event)
        self._arrive(event.target, ENDED, index)
        if event.signal or event.exit_code:
            self.failures.append((index, event))

    def _phase(self, index: int, event: Phase) -> None:
        self.rank(event.rank).phases.add(index, event.index)
        phase = self.phase(event.index)
        if event.edge == "begin":
            if phase.begin < 0:
                phase.begin = index
                phase.name = event.name
                phase.narration = event.narration
            return
        self._end_step_after(event.index, index)

    def _end_step_after(self, phase: int, index: int) -> None:
        """Step ``phase``'s boundary (and every later one) comes after event ``index``."""
        ends = self.step_ends
        while len(ends) <= phase:
            ends.append(ends[-1] if ends else 0)
        for number in range(phase, len(ends)):
            if ends[number] <= index:
                ends[number] = index + 1

    def _gate(self, index: int, event: Gate) -> None:
        """A rank waits at gate k once it has ended step k−1: that step's frame waits for it too,
        so stepping through a step-through run lands where every rank has arrived at the gate."""
        self.rank(event.rank).gates.add(index, event.index)
        if event.edge == "wait":
            if event.index > 0:
                self._end_step_after(event.index - 1, index)
            self._arrive(event.rank, event.index, index)

    def _arrive(self, rank: int, gate: int, index: int) -> None:
        """``rank`` has come to ``gate`` (or ended) at event ``index``: once every rank has come
        to a later gate than :attr:`gate_reached`, the ranks have arrived together there."""
        if self.arrived.get(rank, -1) >= gate:
            return
        self.arrived[rank] = gate
        world = self.world_size
        if world <= 0 or len(self.arrived) < world:  # a trace may declare an impossible world
            return
        reached = min(self.arrived.get(number, -1) for number in range(world))
        if reached > self.gate_reached:
            self.gate_reached, self.arrival_cursor = reached, index + 1

    def next_gate(self, after: int) -> int:
        """The gate to release after gate ``after``: the lowest later one a rank waits at (a
        gate's number is its phase's, and a phase without a gate has no one waiting at it),
        or ``after + 1`` while no rank waits past ``after``."""
        waited = [gate for gate in self.arrived.values() if after < gate < ENDED]
        return min(waited, default=after + 1)

    def _go(self, index: int, event: Go) -> None:
        self.gos.add(index, event.index)

    def _buffer(self, index: int, event: Buffer | Freed) -> None:
        """A buffer's series holds its Buffer events and the Freed events that end its life."""
        self.rank(event.rank).buffer(event.name).add(index, event.phase)

    def _memory(self, index: int, event: Memory) -> None:
        self.rank(event.rank).memory.add(index, event)

    def _transfer(self, index: int, event: Transfer) -> None:
        """The commonest event of a flood (63 of every 67 at 64 ranks): filed with as few calls as
        it takes."""
        number = event.phase
        phase = self.phases.get(number) or self.phase(number)
        series = phase.transfers
        series.index.append(index)
        series.phase.append(number)
        dst, order = transfer_keys(event)
        phase.transfer_dsts.append(dst)
        phase.transfer_orders.append(order)

    def _span(self, index: int, event: Span) -> None:
        spans = self.phase(event.phase).spans
        if not spans.index:
            insort(self.span_phases, event.phase)
        spans.add(index, event.phase)

    def _check(self, index: int, event: Check) -> None:
        self.phase(event.phase).checks.add(index, event.phase)

    def _stall(self, index: int, event: Stall) -> None:
        earlier = self._waiting_in.get((event.group, event.group_seq))
        if earlier is not None:  # the same wait again, its time grown (a live job): it replaces the earlier
            self.stalls_over[earlier[0]] = index
        self._waiting_in[(event.group, event.group_seq)] = (len(self.stalls), set(event.waiting))
        self.stalls.append((index, event))

    def _wait_over(self, index: int, event: Collective | CallRanks, ranks: Iterable[int]) -> None:
        """Note the end of a stall's wait once every rank that waited has completed its call
        (``ranks`` of its members completed it at event ``index``)."""
        key = (event.group, event.group_seq)
        found = self._waiting_in.get(key)
        if found is None:
            return
        found[1].difference_update(ranks)
        if not found[1]:
            self.stalls_over[found[0]] = index
            del self._waiting_in[key]

    def _mismatch(self, index: int, event: Mismatch) -> None:
        self.mismatches.append((index, event))

    def _collective(self, index: int, event: Collective) -> None:
        self.rank(event.rank).collectives.add(index, event.phase)
        if event.edge == "end" and self._waiting_in:
            self._wait_over(index, event, (event.rank,))
        if event.edge == "end" and event.phase >= 0:
            phase = self.phase(event.phase)
            phase.collectives.add(index, event.phase)
            phase.add_call(index, (event.group, event.group_seq))

    def _call_ranks(self, index: int, event: CallRanks) -> None:
        """File each rank's begin and end as its own Phase and Collective events are filed (in
        that order: a rank's begin before its end), all at the event's one position, each with its
        place in the event's columns."""
        number = event.phase
        for rank, place in zip(event.issued, begin_places(event)):
            found = self.rank(rank)
            found.phases.add_grouped(index, number, place)
            found.collectives.add_grouped(index, number, place)
        phase = self.phase(number)
        if event.issued and phase.begin < 0:
            phase.begin, phase.name, phase.narration = index, event.name, event.narration
        if not event.ended:
            return
        for rank, place in zip(event.ended, end_places(event)):
            found = self.rank(rank)
            found.collectives.add_grouped(index, number, place)
            found.phases.add_grouped(index, number, place)
        if self._waiting_in:
            self._wait_over(index, event, event.ended)
        if number >= 0:
            count = len(event.ended)
            phase.collectives.extend(array("q", [index]) * count, array("q", [number]) * count, end_places(event))
            phase.add_call(index, (event.group, event.group_seq))
        self._end_step_after(number, index)
