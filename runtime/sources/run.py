"""Imported calls become a collviz run: the events every artifact source builds, and their analysis.

A source (Flight Recorder dumps, profiler traces, an NCCL log) reduces its artifacts to
:class:`Step` s, in an order every rank's own order agrees with (:func:`order_steps`): each is one
collective call seen from the ranks that made it (a :class:`Call` per rank), or links NCCL reported
(:class:`Hop` s). :func:`build_run` turns them into the events collviz's own runs emit — RunStart,
RankStart per rank, per step and rank a Phase begin/end around Collective begin/end and Transfers —
then puts the calls to the live run's own checks (:mod:`.call_checks`, over a
:class:`~.call_table.CallTable` of them): the watchdog
(:class:`~..observation.watchdog.CollectiveWatch`, at the log's end) names who waits where and who
never came, the fingerprint check (:class:`~..observation.fingerprints.FingerprintCheck`) names
ranks that called something else at the same place. What they find becomes Stall and Mismatch
events and the RunEnd, whose status gives the exit status (1 for a hung or mismatched job, as for
a live run). A rank gets a RankEnd once it had finished: a rank still inside a call, one the others
waited for, or one that called something else than the others, gets none (it was still running
when the artifact was taken, or its last call is the fault), and its lane says where it was.

Times are the artifact's own (``t_ns``); a call whose duration the artifact does not hold ends
when it begins and carries ``duration_ns=None``, so no report invents a duration.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, Protocol, TypeVar

import msgspec
import numpy as np

from ..observation.group_names import group_label
from ..observation.watchdog import Stalled
from ..wire.protocol import (
    IMPORT_RUN_PREFIX,
    LAUNCHER_RANK,
    NOT_RECORDED_OPTION,
    UNKNOWN_RANKS_OPTION,
    UNTIMED_OPTION,
    AnyEvent,
    Collective,
    Mismatch,
    Phase,
    RankEnd,
    RankStart,
    RunEnd,
    RunStart,
    Stall,
    Transfer,
)
from .call_checks import Findings, find_problems
from .call_table import CallTable, algo_bytes_of

__all__ = ["Call", "Hop", "Step", "Origin", "ImportedRun", "Failed", "Summary", "Stamper", "emit_rank_step", "emit_steps", "start_run", "finish_run",
           "Progress", "no_progress", "group_label", "order_steps", "build_run"]

Progress = Callable[[str, int, int], None]
"""Told ``(stage, done, total)`` as an import goes on (``reading files``, ``reading calls``,
``building steps``), for a progress line: a 64-rank dump of thousands of calls takes seconds."""


def no_progress(stage: str, done: int, total: int) -> None:
    """A :data:`Progress` that shows nothing."""


_Key = TypeVar("_Key", bound=Hashable)
_EventT = TypeVar("_EventT", bound=AnyEvent)


class Call(msgspec.Struct, frozen=True, gc=False):
    """One collective call as an artifact recorded it on one rank: a frozen struct, changed with
    :func:`msgspec.structs.replace`, that the cyclic collector never tracks (it holds no container
    but its group's tuple of ints). A live reading of 1,024 ranks makes 12,287 of them: as frozen
    dataclasses they cost 0.025 s of CPU to make and, once the reading's collector pause ended, a
    0.028 s collection that walked them; as these, 0.004 s and none (2026-11-29).

    ``group_seq`` numbers the call on its group (the artifact's own number where it has one);
    ``count`` is this rank's input elements; ``bytes_in``/``bytes_out`` are 0 where the element
    type's size is unknown. ``t_ns``: when the rank issued it, on the artifact's clock.
    ``duration_ns``: its own time where the artifact measured one, else None. ``completed``: False
    for a call the rank was still inside when the artifact was taken. ``where``: the user's code
    that made the call, where the artifact says (``train.py:31 in step``).
    """

    rank: int
    group: str
    group_ranks: tuple[int, ...]
    group_seq: int
    op: str
    dtype: str
    count: int
    bytes_in: int
    bytes_out: int
    t_ns: int
    duration_ns: int | None = None
    completed: bool = True
    root: int | None = None
    where: str = ""
    group_id: str = ""
    """The group's identity where its source tells groups apart by more than their label, never
    shown: a Flight Recorder group's name and the backend that numbered the call (a group made with
    ``"cpu:gloo,cuda:nccl"`` numbers each backend's calls apart, and its label gains ``on <backend>``
    only in a reading that holds both). Empty: the label is the group's identity."""
    backend: str = ""
    """The backend that numbered the call, where the source says (``nccl``, ``gloo``)."""

    @property
    def key(self) -> tuple[str, int]:
        """The call across its ranks: its group's identity and its number on the group, never its words."""
        return (self.group_id or self.group, self.group_seq)


@dataclass(frozen=True)
class Hop:
    """A link an artifact reported rather than data it observed: ``src`` sends to ``dst`` in hop
    ``number`` (from 1) of the algorithm drawn; ``label`` names it (``NCCL ring 00 via P2P/IPC``);
    ``bytes``: what it carried, where the artifact says (an Inspector send's), else 0."""

    src: int
    dst: int
    number: int
    label: str
    bytes: int = 0


@dataclass
class Step:
    """One viewer step: a collective call across its ranks, or reported links, or both.

    ``t_ns`` places a step without calls; ``took_ns`` gives ranks that take part without a call
    (NCCL's init, say) and how long their part took (0: not known).
    """

    name: str
    narration: str
    calls: list[Call] = field(default_factory=list)
    hops: list[Hop] = field(default_factory=list)
    t_ns: int = 0
    took_ns: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Origin:
    """Where an imported run came from, as its RunStart says it.

    ``scenario`` names the source (``flight-recorder``); ``reason`` is the header's line about the
    backend and what the source cannot show; ``description`` the narration before the first step;
    ``device`` each RankStart's device text; ``untimed`` why a call may have no duration (the
    summary and the cost pane say it); ``not_recorded`` why the run has no values, provenance or
    transfers of data (the viewer says it where they would be shown). ``check_calls``: whether calls are compared across ranks (only where the
    source names every call's group).
    """

    scenario: str
    description: str
    reason: str
    backend: str
    device_kind: Literal["cpu", "cuda"]
    world_size: int
    device: str
    untimed: str
    not_recorded: str
    nccl_version: str = ""
    host: str = ""
    check_calls: bool = True
    devices: Mapping[int, str] = field(default_factory=dict)
    """Each rank's own device text where the source names it (else ``device``)."""
    failed: Failed = field(default_factory=lambda: Failed())
    """What the artifacts themselves say went wrong: the run fails naming it first."""


@dataclass(frozen=True)
class Failed:
    """What the artifacts themselves say went wrong (an NCCL WARN line, a call a dump marks failed or
    timed out): ``ranks`` each rank's first error as the artifact words it (that rank ends in error),
    ``accounts`` a sentence for each failure, first first (the run fails naming the first, ahead of
    any hang or mismatch: :class:`~.call_checks.Findings`)."""

    ranks: Mapping[int, str] = field(default_factory=dict)
    accounts: tuple[str, ...] = ()


class Summary(Protocol):
    """The headless summary of an import, made from its table of calls (:mod:`.table_summary`)."""

    def text(self) -> str:
        """What :func:`~..reports.summary.render_summary` gives for the whole run's events."""

    def document(self) -> dict:
        """What :func:`~..reports.summary_json.summary_document` gives for the whole run's events."""


@dataclass(frozen=True)
class ImportedRun:
    """Events as collviz's own runs emit them, the warnings met while reading the artifacts, and
    the exit status a run with these events has (1: hung or mismatched; 0 otherwise).
    ``summary``: the headless summary, where the source makes it from its table of calls (Flight
    Recorder dumps: for an import too large to hold as events, the events are then its last
    steps'); None where the summary is the events'."""

    kind: str
    built: list[AnyEvent] | Callable[[], list[AnyEvent]]
    """The events, or what builds them when first asked (a large import's: a headless summary never needs them)."""
    warnings: list[str]
    exit_status: int
    summary: Summary | None = None

    @cached_property
    def events(self) -> list[AnyEvent]:
        """The run's events."""
        return self.built() if callable(self.built) else self.built


def order_steps(sequences: Mapping[int, Sequence[_Key]], first_seen: Mapping[_Key, int]) -> list[_Key]:
    """Every key of ``sequences`` (each rank's calls in its own order) in one order that keeps each
    rank's, earliest ``first_seen`` first among those free to go next. Where ranks disagree (a
    cycle: rank 0 did A then B, rank 1 B then A) the earliest key left goes next regardless, and a
    rank of the cycle is shown in that order rather than its own."""
    after: dict[_Key, set[_Key]] = {key: set() for seq in sequences.values() for key in seq}
    waiting_on = dict.fromkeys(after, 0)
    for seq in sequences.values():
        for before, then in zip(seq, seq[1:]):
            if before != then and then not in after[before]:
                after[before].add(then)
                waiting_on[then] += 1
    rank_of = {key: n for n, key in enumerate(sorted(after, key=lambda k: (first_seen.get(k, 0), repr(k))))}
    ready = [(rank_of[key], key) for key, count in waiting_on.items() if count == 0]
    heapq.heapify(ready)
    order: list[_Key] = []
    placed: set[_Key] = set()
    while len(order) < len(after):
        if not ready:  # a cycle: let the earliest remaining key go
            key = min((k for k in after if k not in placed), key=rank_of.__getitem__)
            heapq.heappush(ready, (rank_of[key], key))
        _, key = heapq.heappop(ready)
        if key in placed:
            continue
        placed.add(key)
        order.append(key)
        for then in after[key]:
            waiting_on[then] -= 1
            if waiting_on[then] == 0 and then not in placed:
                heapq.heappush(ready, (rank_of[then], then))
    return order


class Stamper:
    """Gives each emitter's events a gap-free ``seq``, the run id and a time."""

    def __init__(self, run: str) -> None:
        self.run = run
        self.events: list[AnyEvent] = []
        self._seq: dict[int, int] = {}
        self._lists: dict[int, tuple[tuple[int, ...], list[int]]] = {}

    def ranks_list(self, ranks: tuple[int, ...]) -> list[int]:
        """``ranks`` as the one list every event of that group shares: a 1,024-rank group's list
        made once, not twice per call and rank (4M lists of 1,024 ranks would be 32 GB). Keyed by
        the tuple's identity (a call's ``group_ranks`` is its group's one tuple), which it keeps alive."""
        kept = self._lists.get(id(ranks))
        if kept is None:
            kept = self._lists[id(ranks)] = (ranks, list(ranks))
        return kept[1]

    def __call__(self, event_type: type[_EventT], rank: int, t_ns: int, **fields) -> _EventT:
        seq = self._seq.get(rank, 0)
        self._seq[rank] = seq + 1
        event = event_type(run=self.run, rank=rank, seq=seq, t_ns=t_ns, **fields)
        self.events.append(event)
        return event


def _options(origin: Origin, missing: Mapping[int, str]) -> dict[str, str | int | float | bool]:
    """The RunStart's options: why calls are untimed, why nothing else is recorded, which ranks are unknown."""
    options: dict[str, str | int | float | bool] = {UNTIMED_OPTION: origin.untimed,
                                                    NOT_RECORDED_OPTION: origin.not_recorded}
    if missing:  # msgspec (int keys written as strings): a 10^6-rank job's absent ranks took json 4 s
        ranks = sorted(missing)
        ordered = missing if list(missing) == ranks else {rank: missing[rank] for rank in ranks}
        options[UNKNOWN_RANKS_OPTION] = msgspec.json.encode(ordered).decode()
    return options


def _collective(stamp: Stamper, call: Call, phase: int, edge: Literal["begin", "end"], t_ns: int) -> None:
    stamp(Collective, call.rank, t_ns, phase=phase, edge=edge, op=call.op, group=call.group,
          group_ranks=stamp.ranks_list(call.group_ranks), group_seq=call.group_seq, dtype=call.dtype, count=call.count,
          bytes_in=call.bytes_in, bytes_out=call.bytes_out,
          algo_bytes=algo_bytes_of(call.op, len(call.group_ranks), call.bytes_in, call.bytes_out), root=call.root,
          duration_ns=call.duration_ns if edge == "end" else None)


def emit_rank_step(stamp: Stamper, index: int, step: Step, rank: int, call: Call | None,
                   received: Sequence[Hop] | None = None) -> None:
    """``rank``'s events of step ``index``: its Phase begin, its ``call``'s Collective begin (if it
    made one), the hops it receives (``received``, where the caller has them by rank: looking
    through every hop of a 20,000-rank ring for each rank took 45 s), and (unless the call is
    not completed) the ends."""
    begin = call.t_ns if call is not None else step.t_ns
    stamp(Phase, rank, begin, index=index, name=step.name, edge="begin", narration=step.narration)
    if call is not None:
        _collective(stamp, call, index, "begin", begin)
    for hop in step.hops if received is None else received:
        if hop.dst == rank:
            stamp(Transfer, rank, begin, phase=index, src=hop.src, dst=hop.dst, bytes=hop.bytes, buffer=hop.label,
                  start=0, length=0, kind="p2p", hop=hop.number)
    if call is not None and not call.completed:
        return
    end = begin + (step.took_ns.get(rank, 0) if call is None else call.duration_ns or 0)
    if call is not None:
        _collective(stamp, call, index, "end", end)
    stamp(Phase, rank, end, index=index, name=step.name, edge="end")


def emit_steps(stamp: Stamper, steps: Sequence[Step], progress: Progress) -> dict[int, int]:
    """Phase, Collective and Transfer events of every step; returns each rank's last step."""
    last: dict[int, int] = {}
    for index, step in enumerate(steps):
        progress("building steps", index, len(steps))
        calls = {call.rank: call for call in step.calls}
        received: dict[int, list[Hop]] = defaultdict(list)
        for hop in step.hops:
            received[hop.dst].append(hop)
        ranks = sorted(set(calls) | {h.src for h in step.hops} | set(received) | set(step.took_ns))
        for rank in ranks:
            emit_rank_step(stamp, index, step, rank, calls.get(rank), received.get(rank, []))
            last[rank] = index
    progress("building steps", len(steps), len(steps))
    return last


def _waited_at_least(stall: Stalled, table: CallTable, latest: int) -> float:
    """Seconds from the first waiter's call to the last time the artifacts recorded (``latest``):
    how long the waiters had waited at least (the artifacts do not say when they were taken)."""
    groups = [index for index, label in enumerate(table.groups) if label == stall.group]
    rows = np.isin(table.group, groups) & (table.seq == stall.group_seq)
    entered = table.t_ns[rows & np.isin(table.rank, stall.waiting)]
    return max(0, latest - int(entered.min())) / 1e9 if len(entered) else 0.0


def finish_run(stamp: Stamper, origin: Origin, table: CallTable, findings: Findings, ranks: Sequence[int],
               last_step: Mapping[int, int], end: int, warnings: list[str]) -> ImportedRun:
    """The events after the steps' (Stall, Mismatch, each RankEnd, RunEnd: ``end`` is the last time
    the artifacts recorded, ``last_step`` each rank's last step) and the run they end; ``failed``:
    ``origin.failed``'s ranks end in error (the findings put its accounts first)."""
    failed = origin.failed
    for stall in findings.stalls:
        stamp(Stall, LAUNCHER_RANK, end, group=stall.group, group_seq=stall.group_seq, op=stall.op,
              waiting=stall.waiting, elsewhere=list(stall.elsewhere.values()),
              waited_s=_waited_at_least(stall, table, end), text=stall.text)
    for found in findings.mismatches:
        stamp(Mismatch, LAUNCHER_RANK, end, group=found.group, group_ranks=list(found.group_ranks),
              group_seq=found.group_seq, calls=found.calls, odd_ranks=found.odd_ranks, text=found.text)
    inside = set(np.unique(table.rank[~table.completed]).tolist())
    for rank in ranks:  # see the module's docstring: who gets a RankEnd
        if rank in failed.ranks:
            stamp(RankEnd, rank, end, status="error", error=failed.ranks[rank], phase=last_step.get(rank))
        elif rank not in findings.implicated and rank not in inside:
            stamp(RankEnd, rank, end, status="ok", phase=last_step.get(rank))
    stamp(RunEnd, LAUNCHER_RANK, end, status="failed" if findings.failed else "ok", detail=findings.detail(),
          events=len(stamp.events) + 1)
    return ImportedRun(origin.scenario, stamp.events, warnings, 1 if findings.failed else 0)


def start_run(origin: Origin, steps: int, start: int, ranks: Sequence[int], missing: Mapping[int, str]) -> Stamper:
    """The stamper of an imported run, its RunStart (``steps`` steps, from ``start``) and each
    rank's RankStart emitted."""
    stamp = Stamper(f"{IMPORT_RUN_PREFIX}{origin.scenario}")
    stamp(RunStart, LAUNCHER_RANK, start, scenario=origin.scenario, world_size=origin.world_size,
          backend=origin.backend, device_kind=origin.device_kind, backend_reason=origin.reason, mode="live",
          options=_options(origin, missing), description=origin.description, torch_version="not recorded",
          nccl_version=origin.nccl_version, host=origin.host, phase_count=steps)
    for rank in ranks:
        stamp(RankStart, rank, start, device=origin.devices.get(rank, origin.device), backend=origin.backend, host=origin.host, pid=0)
    return stamp


def build_run(origin: Origin, steps: Sequence[Step], warnings: list[str], ranks: Sequence[int],
              missing: Mapping[int, str] | None = None, progress: Progress = no_progress) -> ImportedRun:
    """The events of an imported run: ``ranks`` are those the artifacts describe, ``missing`` the
    ranks of the world they do not (rank → why, e.g. "no dump of this rank"); ``warnings`` gains
    what could not be shown; ``progress`` is told each step built."""
    missing = dict(missing or {})
    times = [c.t_ns for s in steps for c in s.calls] + [s.t_ns for s in steps if not s.calls]
    stamp = start_run(origin, len(steps), min(times, default=0), ranks, missing)
    last = emit_steps(stamp, steps, progress)
    table = CallTable.from_steps(steps)
    findings = find_problems(table, [step.name for step in steps], last, missing, origin.world_size,
                             origin.check_calls, warnings, origin.failed.accounts)
    end = max(e.t_ns for e in stamp.events)
    return finish_run(stamp, origin, table, findings, ranks, last, end, warnings)
