"""The view state: a pure function of (event log, cursor), computed without rescanning the log.

:func:`view_at` looks up each rank's latest buffers, memory and status with bisections over the
indexes :class:`~collviz.app.model.log.EventLog` keeps, so its cost depends on the number of ranks
and buffer names, not on the length of the log.

The *step* at a cursor is the phase being shown: the first phase whose end lies at or after the
cursor (or the phase in progress past the last end). Everything per rank is filtered to phases
``<= step`` and transfers are listed in a fixed order, so the view at a step boundary does not
depend on how the ranks' events interleaved on the way to the collector.
"""

from __future__ import annotations

import heapq
import json
import re

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, cast

import numpy as np

from collviz.runtime.wire.protocol import (
    UNKNOWN_RANKS_OPTION,
    AnyEvent,
    Buffer,
    Check,
    Collective,
    CudaMemory,
    Freed,
    NvmlMemory,
    Phase,
    RankEnd,
    RunStart,
    Span,
    Stall,
    Transfer,
)

from .bench import BenchView, bench_at
from .cost import CallCost, costs_at
from .log import EventLog, PhaseIndex, RankIndex, Series
from .previous import Candidate, PreviousReports
from .thin import read_events, read_thin

__all__ = ["Labels", "BenchView", "CallCost", "MemoryTrack", "RankView", "RunState", "ViewState", "view_at", "step_at", "rank_list", "TAIL_LENGTH", "MAX_TRANSFERS", "SORT_LIMIT"]

TAIL_LENGTH = 200
"""How many events before the cursor the view carries for the raw event log pane."""

MAX_TRANSFERS = 64
"""Transfers of one step the view carries (the first ones, sorted by destination and source):
as many as the transfers pane lists, each decoded from the store per new step;
``ViewState.transfer_count`` gives the full count."""

SORT_LIMIT = 4096
"""Most transfers decoded to put a step's first ones in order where their keys cannot (a field
beyond what the key packs): they are sorted among the first of them to arrive, and say so."""

RankState = Literal["pending", "running", "waiting", "done", "error"]
RunKind = Literal["empty", "starting", "running", "waiting", "stalled", "finished", "failed", "interrupted"]


@dataclass(unsafe_hash=True, slots=True)
class MemoryTrack:
    """One rank's memory samples (the whole known series) and where the cursor stands in them.

    ``live``, ``phases``, ``categories`` (live bytes by category) and ``peaks`` (the running peak)
    are the log's own lists (valid until the log grows); the first ``upto`` samples have happened
    at the cursor. ``length`` is the series' length when the view was
    made and ``top`` its highest figure (to scale a plot of it); equality and the hash ignore the
    lists. ``cuda`` and ``nvml``: the device figures of the latest sample at the cursor (``None``
    where that sample had none: a CPU run, no NVML library, or no sample yet).

    Never changed once made, but not frozen: a frozen dataclass sets each field through
    ``object.__setattr__``, four times the cost of making it, and a 64-rank view makes 64.
    """

    live: Sequence[int] = field(compare=False)
    phases: Sequence[int] = field(compare=False)
    categories: Sequence[dict[str, int]] = field(compare=False)
    peaks: Sequence[int] = field(compare=False)
    length: int
    upto: int
    current: int
    peak: int
    top: int
    cuda: CudaMemory | None = None
    nvml: NvmlMemory | None = None


class RankView(NamedTuple):
    """What one rank holds and does at the cursor: ``buffers`` live (this step's first, in the
    order the rank reported them, then earlier steps', latest first), ``freed`` released (each the
    Freed event that released it); ``step`` is the viewer step shown. A tuple: a 64-rank frame
    makes 64 of them, at half a frozen dataclass's cost each."""

    rank: int
    device: str
    backend: str
    state: RankState
    status: str
    phase: int | None
    buffers: tuple[Buffer, ...]
    collective: Collective | None
    memory: MemoryTrack
    freed: tuple[Freed, ...] = ()
    step: int = -1
    note: str = ""
    """What a stall lasting at the cursor says of this rank, where others wait for it
    (``rank 1 is missing from the call, at train.py:12 in load``; ``rank 2 never arrived …``)."""
    previous: Sequence[Buffer] = ()
    """For a buffer this step changed (a ring's ``x`` at a hop, an in-place all-reduce's), its value
    before: the one reported before it, where that was in an earlier step or at another moment of
    this one (``before`` the call, then ``after``) and its values or checksum differ. Read from the
    trace when first asked for (:class:`~.previous.PreviousBuffers`)."""


@dataclass(frozen=True)
class RunState:
    """The run as a whole at the cursor: a kind for styling and a sentence for the header."""

    kind: RunKind
    text: str
    gate: int | None = None
    waiting: tuple[int, ...] = ()


class Labels(NamedTuple):
    """The header's words from the app: ``mode`` (replay, live, step-through, paced…),
    ``playback`` (where the view is and what the controls do), and ``history``: whether the frame
    shows a moment other than the run's present (a replay, or a live run browsed back), so the run's
    state at the cursor is "the run here", not the run now; ``kind``: ``replay``, ``live`` or
    ``stepping``, what the viewer does while it follows its run."""

    mode: str
    playback: str
    history: bool
    kind: str = "replay"


@dataclass(frozen=True)
class ViewState:
    """Everything the screen shows for one cursor position.

    ``cursor``/``length``: events shown / in the log. ``run``: the launcher's RunStart (static).
    ``step`` (0-based) of ``step_count``; ``phase_name`` and ``narration`` of that step (the run's
    description before the first phase). ``ranks``: one view per rank. ``transfers``: the step's
    transfers so far (at most :data:`MAX_TRANSFERS`, sorted), ``transfer_count`` all of them.
    ``checks``: the step's checks. ``tail``: the last :data:`TAIL_LENGTH` events before the cursor.
    ``last_go``: the last gate released before the cursor (-1: none). ``costs``: what the step's
    latest collective calls cost (at most :data:`~.cost.MAX_CALLS`), ``call_count`` of how many. ``bench``: the busbw series of a ``collviz bench`` run (None
    for any other run). ``phase_names``: every phase's name seen so far, by number.
    """

    cursor: int
    length: int
    run: RunStart | None
    state: RunState
    step: int
    step_count: int
    phase_name: str
    narration: str
    ranks: tuple[RankView, ...]
    transfers: tuple[Transfer, ...]
    transfer_count: int
    checks: tuple[Check, ...]
    tail: tuple[AnyEvent, ...]
    last_go: int
    costs: tuple[CallCost, ...] = ()
    call_count: int = 0
    bench: BenchView | None = None
    phase_names: dict[int, str] = field(default_factory=dict, compare=False)
    spans: tuple[Span, ...] = ()
    """The pipeline spans, so far, of the latest phase at or before the step that has any (a
    pipelined step stays on screen while its optimizer step and checks are shown)."""
    spans_hidden: int = 0
    """Spans at the cursor left out of ``spans``: the pipelined step shown piece by piece
    (:func:`~.navigation.first_pieces`)."""
    transfers_sorted_among: int = 0
    """How many of the step's transfers ``transfers`` were chosen from: ``transfer_count``, or
    fewer when a flood was sorted among the first of it to arrive (:data:`SORT_LIMIT`)."""


def _latest(series: Series, cursor: int, step: int) -> int:
    """Position (in ``series``) of the last event before ``cursor`` in a phase ``<= step``; -1 if none."""
    return min(bisect_left(series.index, cursor), bisect_right(series.phase, step)) - 1


def _latest_events(log: EventLog, series: list[Series[Any]], cursor: int, step: int, kind: Any) -> list[Any]:
    """Per series (one a rank), its :func:`_latest` event and that event's log position, or None:
    decoded together, in one msgspec call (at 64 ranks, 64 reads through the store's cache cost
    twice as much)."""
    ats = [_latest(found, cursor, step) for found in series]
    if any(found.holds_grouped for found in series):  # a live log's grouped calls: each read by its rank's series
        return [(found.index[at], found.events[at]) if at >= 0 else None for found, at in zip(series, ats)]
    positions = [found.index[at] if at >= 0 else -1 for found, at in zip(series, ats)]
    read = iter(read_thin(log.events, [position for position in positions if position >= 0], kind))
    return [(position, next(read)) if position >= 0 else None for position in positions]


def step_at(log: EventLog, cursor: int) -> int:
    """The phase shown at ``cursor`` (0 before anything has happened)."""
    ends = log.step_ends
    step = bisect_left(ends, cursor)
    if step < len(ends):
        return step
    following = log.phases.get(len(ends))
    if following is not None and 0 <= following.begin < cursor:
        return len(ends)
    return max(len(ends) - 1, 0)


def _memory(index: RankIndex, cursor: int, step: int) -> MemoryTrack:
    series = index.memory
    upto = min(bisect_left(series.index, cursor), bisect_right(series.phase, step))
    current = series.live[upto - 1] if upto else 0
    peak = series.peak[upto - 1] if upto else 0
    top = series.peak[-1] if series.peak else 0
    cuda = series.cuda[upto - 1] if upto else None
    nvml = series.nvml[upto - 1] if upto else None
    return MemoryTrack(series.live, series.phase, series.categories, series.peak, len(series.live), upto, current,
                       peak, top, cuda, nvml)


def _rank_status(index: RankIndex, cursor: int, step: int, names: dict[int, str],
                 phase_event: tuple[int, Phase] | None, run_finished: bool) -> tuple[RankState, str, int | None]:
    """State, a short sentence and the current phase of one rank at the cursor (the phase named
    only where it is not the step shown); ``phase_event``: the rank's latest phase event at the
    cursor in a phase ``<= step`` and its log position (:func:`_latest_events`); ``run_finished``:
    the run ended well before the cursor, so a rank seen at work whose own end the log lacks (an
    import's ranks) is not still running."""
    if index.end is not None and index.end[0] < cursor and (index.end[1].phase or 0) <= step:
        end: RankEnd = index.end[1]
        if end.status == "ok":
            return "done", "finished", end.phase
        where = f" in phase {end.phase}" if end.phase is not None else ""
        return "error", f"error{where}: {end.error or 'unknown'}", end.phase
    if index.exit is not None and index.exit[0] < cursor and (index.exit[1].signal or index.exit[1].exit_code):
        exit_ = index.exit[1]
        how = f"killed by {exit_.signal}" if exit_.signal else f"exited with code {exit_.exit_code}"
        return "error", how, None
    at = index.gates.count_upto(cursor) - 1
    gate_position = index.gates.index[at] if at >= 0 else -1
    if at >= 0 and index.gates.events[at].edge == "wait":
        phase_position = phase_event[0] if phase_event is not None else -1
        if gate_position > phase_position:
            gate = index.gates.events[at].index
            return "waiting", f"waiting at gate {gate + 1}", gate  # gate k opens step k, 1-based on screen
    if run_finished and (phase_event is not None or index.start is not None):
        return "done", "finished (its own end is not in the log)", phase_event[1].index if phase_event else None
    if phase_event is not None:
        event = phase_event[1]
        if event.index == step:  # the step the header and narration already name: not a third time
            # a rank that ended the step shown has done it: its mark says so as its status does
            # (a 'running' mark there read as a rank still at work beside ranks already finished)
            return ("running", "running", event.index) if event.edge == "begin" else ("done", "done", event.index)
        name = names.get(event.index, event.name)
        verb = "in" if event.edge == "begin" else "done"
        return "running", f"{verb} {name}", event.index
    if index.start is not None and index.start[0] < cursor:
        return "running", "started", None
    return "pending", "not started", None


def lasting_stall(log: EventLog, cursor: int) -> Stall | None:
    """The latest stall shown at ``cursor`` whose wait is not over by then (its waiting ranks have
    not all completed the call), or None."""
    shown = bisect_left(log.stalls, cursor, key=lambda entry: entry[0])
    return next((stall for place, (_, stall) in zip(range(shown - 1, -1, -1), reversed(log.stalls[:shown]))
                 if log.stalls_over.get(place, cursor) >= cursor), None)


_ABOUT_RANK = re.compile(r"^rank (\d+) ")


def _stall_notes(stall: Stall | None) -> dict[int, str]:
    """rank → the stall's sentence about it (each of ``elsewhere`` begins ``rank N …``)."""
    notes: dict[int, str] = {}
    for sentence in stall.elsewhere if stall is not None else ():
        about = _ABOUT_RANK.match(sentence)
        if about is not None:
            notes[int(about[1])] = sentence
    return notes


def _run_state(log: EventLog, cursor: int, ranks: tuple[RankView, ...]) -> RunState:
    if cursor == 0 or log.run_start is None and not ranks:
        return RunState("empty" if not log.events else "starting", "starting")
    if log.run_end is not None and log.run_end[0] < cursor:
        end = log.run_end[1]
        kinds: dict[str, RunKind] = {"ok": "finished", "failed": "failed", "interrupted": "interrupted"}
        kind = kinds[end.status]
        # the launcher's own account: it names the cause (a mismatch, a hang's culprit), not a consequence;
        # an ok end has a detail only from a live source, saying how the job ended ("the job ended: …")
        detail = end.detail if end.status == "ok" else end.detail or _first_failure(log, cursor)
        word = "finished" if end.status == "ok" else end.status
        return RunState(kind, f"{word}: {detail}" if detail else word)
    mismatch = bisect_left(log.mismatches, cursor, key=lambda entry: entry[0])
    if mismatch:
        return RunState("failed", f"failed: {log.mismatches[0][1].text}")
    failure = _first_failure(log, cursor)
    if failure:
        return RunState("failed", f"failed: {failure}")
    lasting = lasting_stall(log, cursor)
    if lasting is not None:
        return RunState("stalled", f"stalled: {lasting.text}")
    waiting = tuple(r.rank for r in ranks if r.state == "waiting")
    if waiting:
        gate = min(r.phase or 0 for r in ranks if r.state == "waiting")
        who = f"all {len(ranks)} ranks" if len(waiting) == len(ranks) else f"ranks {rank_list(waiting)}"
        # gates are numbered like steps: gate k opens step k (1-based on screen)
        return RunState("waiting", f"waiting at gate {gate + 1} before step {gate + 1} ({who})", gate, waiting)
    if all(r.state == "pending" for r in ranks):
        return RunState("starting", "starting")
    return RunState("running", "running")


def rank_list(ranks: Sequence[int]) -> str:
    """Ranks in ascending order with runs of three or more as ranges: ``0, 1, 3`` or ``0–31, 33–63``."""
    parts: list[str] = []
    start = 0
    for i in range(1, len(ranks) + 1):
        if i == len(ranks) or ranks[i] != ranks[i - 1] + 1:
            run = ranks[start:i]
            parts.extend([f"{run[0]}–{run[-1]}"] if len(run) >= 3 else map(str, run))
            start = i
    return ", ".join(parts)

def _held(log: EventLog, indexes: Sequence[RankIndex], cursor: int, step: int
          ) -> list[tuple[list[Buffer], list[Freed], list[Candidate]]]:
    """Per rank: its buffers live at the cursor (in its order of first report), those freed, and
    the live ones of the step shown whose report before may be shown beside them. Every rank's
    latest reports are read together (:func:`~.thin.read_events`)."""
    latest: list[tuple[int, Series[Any], int]] = []  # (rank's place in indexes, series, place in it)
    for number, index in enumerate(indexes):
        for series in index.buffers.values():
            at = _latest(series, cursor, step)
            if at >= 0:
                latest.append((number, series, at))
    held: list[tuple[list[Buffer], list[Freed], list[Candidate]]] = [([], [], []) for _ in indexes]
    reports = cast("Sequence[Buffer | Freed]", read_events(log.events, [series.index[at] for _, series, at in latest]))
    for (number, series, at), report in zip(latest, reports):
        buffers, freed, candidates = held[number]
        if isinstance(report, Freed):
            freed.append(report)
        else:
            buffers.append(report)
            if at > 0 and report.phase == step:
                candidates.append((series, at, report))
    return held


def _first_failure(log: EventLog, cursor: int) -> str:
    """A sentence about the first failed rank before ``cursor``, or ''."""
    for index, event in log.failures:
        if index >= cursor:
            break
        if isinstance(event, RankEnd):
            return f"rank {event.rank}: {event.error or 'error'}"
        how = f"killed by {event.signal}" if event.signal else f"exit code {event.exit_code}"
        return f"rank {event.target} {how}"
    return ""


def _first_transfers(phase: PhaseIndex, count: int) -> tuple[tuple[Transfer, ...], int]:
    """The first :data:`MAX_TRANSFERS` of the phase's first ``count`` transfers in (destination,
    hop, source, start) order — of all of them, not of the first to arrive (at 64 ranks 4,032
    arrive in any order) — and how many they were chosen from: ``count``, or :data:`SORT_LIMIT`
    when a transfer's fields were beyond what its order key packs and the first to arrive had to
    be read to be ordered.

    The order comes from the keys the log keeps beside the series (the destination and
    :func:`~collviz.runtime.wire.columns.transfer_order_key`), so only the transfers listed are
    decoded. Remembered on the phase for that count: a frame repeats its step's."""
    cached = phase.sorted_transfers
    if cached is not None and cached[0] == count:
        return cached[1], cached[2]
    dsts = np.frombuffer(phase.transfer_dsts, dtype=np.int64, count=count) if count else np.zeros(0, np.int64)
    orders = np.frombuffer(phase.transfer_orders, dtype=np.int64, count=count) if count else np.zeros(0, np.int64)
    lowest = int(dsts.min()) if count else 0
    if not count or (lowest >= 0 and orders.min() >= 0):  # min: no 100,000-entry mask made per check
        positions = np.frombuffer(phase.transfers.index, dtype=np.int64, count=count) if count else dsts
        listed = positions[_first_in_order(dsts, orders, MAX_TRANSFERS, lowest)].tolist()
        # decoded together, in one msgspec call (the phase keeps them)
        first, chosen_from = tuple(read_thin(phase.store, listed, Transfer)), count
    else:
        chosen_from = min(count, SORT_LIMIT)
        first = tuple(heapq.nsmallest(MAX_TRANSFERS, phase.transfers.events[:chosen_from], key=lambda t: (t.dst, t.hop, t.src, t.start)))
    phase.sorted_transfers = (count, first, chosen_from)
    return first, chosen_from


def _first_in_order(dsts: np.ndarray, orders: np.ndarray, count: int, lowest: int | None = None) -> np.ndarray:
    """Positions of the first ``count`` entries in (``dsts``, ``orders``) order, ties in position
    order: ``np.lexsort((orders, dsts))[:count]``, sorting only the entries that can be among
    them (``lowest``: ``dsts.min()`` where the caller found it already). At 64 ranks a step has
    ~100,000 transfers, whose full sort cost 3 ms a first visit; those into the lowest destination
    (or, when fewer than ``count``, into the ``count`` lowest), and of those the lowest keys, are a
    few hundred."""
    if len(dsts) <= 4 * count:
        return np.lexsort((orders, dsts))[:count]
    chosen = np.flatnonzero(dsts == (dsts.min() if lowest is None else lowest))
    if len(chosen) >= count:  # one destination holds them all: keep its lowest keys (and their ties)
        keys = orders[chosen]
        chosen = chosen[keys <= np.partition(keys, count - 1)[count - 1]]
    else:  # every destination up to the count-th lowest
        chosen = np.flatnonzero(dsts <= np.partition(dsts, count - 1)[count - 1])
    return chosen[np.lexsort((orders[chosen], dsts[chosen]))[:count]]  # stable: ties keep their arrival order


def _unknown_ranks(log: EventLog) -> dict[int, str]:
    """Ranks an imported run does not describe (rank → why), from its RunStart: said unknown, never
    "not started"."""
    text = log.run_start.options.get(UNKNOWN_RANKS_OPTION) if log.run_start is not None else None
    try:
        found = json.loads(text) if isinstance(text, str) else {}
        return {int(rank): str(why) for rank, why in found.items()}
    except (ValueError, AttributeError):
        return {}


def view_at(log: EventLog, cursor: int, tail: int = TAIL_LENGTH) -> ViewState:
    """The view of ``log`` after its first ``cursor`` events (clamped to ``0..len(log)``)."""
    cursor = max(0, min(cursor, len(log)))
    step = step_at(log, cursor)
    names = {number: phase.name for number, phase in log.phases.items()}
    ranks = []
    unknown = _unknown_ranks(log)
    notes = _stall_notes(lasting_stall(log, cursor))
    numbers = range(max(log.world_size, log.max_rank + 1))
    indexes = [log.ranks.get(number) or RankIndex(number) for number in numbers]
    held = _held(log, indexes, cursor, step)
    run_finished = log.run_end is not None and log.run_end[0] < cursor and log.run_end[1].status == "ok"
    earlier = PreviousReports(log, [candidates for _, _, candidates in held]).per_rank()
    collectives = _latest_events(log, [index.collectives for index in indexes], cursor, step, Collective)
    phase_events = _latest_events(log, [index.phases for index in indexes], cursor, step, Phase)
    for number, index, (buffers, freed, _), previous, latest_call, phase_event in zip(
            numbers, indexes, held, earlier, collectives, phase_events):
        collective = latest_call[1] if latest_call is not None and latest_call[1].phase == step else None
        state, status, rank_phase = _rank_status(index, cursor, step, names, phase_event, run_finished)
        if index.start is None and number in unknown:
            status = f"unknown: {unknown[number]}"
        start = index.start[1] if index.start is not None else None
        ranks.append(
            RankView(
                rank=number,
                device=start.device if start else "",
                backend=start.backend if start else "",
                state=state,
                status=status,
                phase=rank_phase,
                buffers=tuple(sorted(buffers, key=lambda b: (b.phase != step, -b.phase)) if len(buffers) > 1
                              else buffers),
                collective=collective,
                memory=_memory(index, cursor, step),
                freed=tuple(freed),
                step=step,
                note=notes.get(number, ""),
                previous=previous,
            )
        )
    rank_views = tuple(ranks)
    phase = log.phases.get(step)
    shown = phase is not None and 0 <= phase.begin < cursor
    transfers: tuple[Transfer, ...] = ()
    checks: tuple[Check, ...] = ()
    moved_count = sorted_among = 0
    if phase is not None:
        moved_count = phase.transfers.count_upto(cursor)
        transfers, sorted_among = _first_transfers(phase, moved_count)
        checks = tuple(sorted(phase.checks.events[: phase.checks.count_upto(cursor)], key=lambda c: (c.rank, c.name)))
    gos = log.gos.count_upto(cursor)
    run = log.run_start
    costs, call_count = costs_at(log, cursor, step) if shown else ((), 0)
    spans: tuple[Span, ...] = ()
    for number in reversed(log.span_phases[: bisect_right(log.span_phases, step)]):
        span_series = log.phases[number].spans
        spans = tuple(span_series.events[: span_series.count_upto(cursor)])
        if spans:
            break
    return ViewState(
        cursor=cursor,
        length=len(log),
        run=run,
        state=_run_state(log, cursor, rank_views),
        step=step,
        step_count=log.phase_count,
        phase_name=phase.name if phase is not None and shown else "",
        narration=phase.narration if phase is not None and shown else (run.description if run else ""),
        ranks=rank_views,
        transfers=transfers,
        transfer_count=moved_count,
        transfers_sorted_among=sorted_among,
        checks=checks,
        tail=tuple(log.events[max(0, cursor - tail) : cursor]),
        last_go=log.gos.events[gos - 1].index if gos else -1,
        costs=costs,
        call_count=call_count,
        bench=bench_at(log, cursor, step),
        phase_names=names,
        spans=spans,
    )
