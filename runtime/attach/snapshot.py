"""One snapshot of a running job, like ``py-spy dump``: per rank the call it last completed and
the call it is in now, who waits on whom, and for each rank the others wait on, its Python stack
line; the exit status says whether every rank is in step.

torch keeps two Flight Recorders, one for CPU backends (gloo: the ``fr_trace_json`` handler) and
one for NCCL (``dump_nccl_trace_json``, absent where torch has no NCCL: a 404 there is no error);
a reading asks both and reads their calls as one dump per rank (their groups are distinct).

The job is read twice, :attr:`SnapshotOptions.interval_s` apart (a call some ranks entered a
moment before the others is in flight, not a wait): a wait is reported only where the same ranks
wait in the same call in both readings. The Flight Recorder's calls are read with the dump
reader's own parser and analysis (:func:`~..sources.flight_recorder.import_dumps`: the watchdog's
"who waits where, who never came"), given only each rank's tail (:mod:`.tail`: the calls from the
last one every rank completed onwards); only the ranks others wait on are asked for their stacks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..observation.rank_lists import ranks_text
from ..sources.flight_recorder import Dump, import_dumps
from ..wire.protocol import AnyEvent, Collective, Stall
from .stacks import user_stack_line
from .tail import Floors, Trace, decode_trace, retired_floors, tail_content
from .workers import Answer, Worker, ask_all

__all__ = ["RECORDERS", "RankNow", "Reading", "Snapshot", "SnapshotOptions", "Wait", "confirm", "read_once",
           "take_snapshot"]

RECORDERS = ("fr_trace_json", "dump_nccl_trace_json")
"""The handlers of torch's two Flight Recorders (CPU backends, NCCL)."""


Ask = Callable[[Sequence[Worker], str, float], dict[int, Answer]]
"""How the servers are asked (:func:`~.workers.ask_all`; tests may pass another)."""


@dataclass(frozen=True)
class SnapshotOptions:
    """How a snapshot reads: each request's timeout, the time between the two readings, and the
    wall-clock time (ns since the epoch) before which calls are not the job's (``since_ns``: a
    launcher's ranks, forked from a process that had made calls, inherit its recorder's entries)."""

    timeout_s: float = 2.0
    interval_s: float = 1.0
    since_ns: int = 0


@dataclass(frozen=True)
class RankNow:
    """One rank as read: the call it last completed and the call it is in (their text; empty
    when none), or why it could not be read."""

    rank: int
    done: str = ""
    inside: str = ""
    error: str = ""


@dataclass(frozen=True)
class Wait:
    """Ranks waiting in one call for others: the call, who waits, who is missing, and where each
    missing rank's Python is (rank → stack line, empty where it could not be read)."""

    call: str
    waiting: tuple[int, ...]
    missing: tuple[int, ...]
    stacks: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Snapshot:
    """Every rank as read, and the waits both readings agree on."""

    ranks: list[RankNow]
    waits: list[Wait]

    @property
    def exit_status(self) -> int:
        """0 when every rank answered and none waits on another; else 1."""
        return 1 if self.waits or any(now.error for now in self.ranks) else 0

    def document(self) -> dict:
        """The snapshot as JSON-ready data (``collviz attach --json``): per rank its last completed
        call and the call it is in (null when none), the call it waits in and for whom, the call it
        is missing from and its stack line, or why it was not read; then every wait, the ranks
        others wait on (``missing``), the ranks not read and the exit status."""
        waiting = {rank: wait for wait in self.waits for rank in wait.waiting}
        missing = {rank: wait for wait in self.waits for rank in wait.missing}
        ranks = []
        for now in self.ranks:
            row: dict = {"rank": now.rank}
            if now.error:
                ranks.append({**row, "error": now.error})
                continue
            waits_in, absent_from = waiting.get(now.rank), missing.get(now.rank)
            ranks.append({**row, "last_completed": now.done or None, "current": now.inside or None,
                          "waiting_in": waits_in.call if waits_in else None,
                          "waiting_for": list(waits_in.missing) if waits_in else [],
                          "missing_from": absent_from.call if absent_from else None,
                          "stack": (absent_from.stacks.get(now.rank) or None) if absent_from else None})
        return {"ranks": ranks,
                "waits": [{"call": w.call, "waiting": list(w.waiting), "missing": list(w.missing),
                           "stacks": {str(r): w.stacks.get(r) or None for r in w.missing}} for w in self.waits],
                "missing": sorted(missing), "not_read": [now.rank for now in self.ranks if now.error],
                "in_step": self.exit_status == 0, "exit_status": self.exit_status}

    def text(self) -> str:
        """The snapshot in lines: one per rank, then one per wait with each missing rank's stack."""
        lines = []
        for now in self.ranks:
            if now.error:
                lines.append(f"rank {now.rank}: not read: {now.error}")
                continue
            done = f"last completed {now.done}" if now.done else "no call completed"
            lines.append(f"rank {now.rank}: {done}; " + (f"now in {now.inside}" if now.inside else "in no collective"))
        for wait in self.waits:
            plural = "s" if len(wait.missing) > 1 else ""
            lines.append(f"waiting: {wait.call}: rank{'s' if len(wait.waiting) > 1 else ''} {ranks_text(wait.waiting)} "
                         f"wait{'' if len(wait.waiting) > 1 else 's'} for rank{plural} {ranks_text(wait.missing)}")
            for rank in wait.missing:
                lines.append(f"  rank {rank} is missing from the call, at {wait.stacks.get(rank) or '(stack not read)'}")
        if not self.waits and not any(now.error for now in self.ranks):
            lines.append("every rank is in step")
        return "\n".join(lines)


def _call_text(event: Collective) -> str:
    return f"{event.op} #{event.group_seq} on group {event.group}"


@dataclass(frozen=True)
class Reading:
    """One reading of every rank: each rank's state, and the waits the dumps show, keyed by call;
    ``events``: the calls of the tail read, as the Flight Recorder reader makes them (one step
    per call: Phase and Collective begin, and end where the rank completed it); ``floors``: where
    each group's calls are complete on every rank read (:func:`~.tail.retired_floors`)."""

    ranks: dict[int, RankNow]
    waits: dict[tuple[str, int], Wait]
    events: tuple[AnyEvent, ...] = ()
    floors: Floors = field(default_factory=dict)

    def unconfirmed(self) -> Snapshot:
        """The ranks as read, without waits: what one reading says before a second confirms a wait
        (one seen once may be a call some ranks entered a moment before the others)."""
        return Snapshot([self.ranks[rank] for rank in sorted(self.ranks)], [])


def _recorder(answer: Answer, handler: str, since_ns: int) -> Trace | str | None:
    """One recorder's trace in ``answer``, skimmed (:mod:`.tail`), without calls made before
    ``since_ns``; None where the handler does not exist (NCCL's, without NCCL); else why it could
    not be read."""
    if answer.body is None:
        return None if answer.status == 404 and handler != RECORDERS[0] else answer.error
    trace = decode_trace(answer.body, since_ns)
    return f"its {handler} answer is {trace}" if isinstance(trace, str) else trace


def read_once(workers: Sequence[Worker], options: SnapshotOptions = SnapshotOptions(),
              ask: Ask = ask_all, since: Floors | None = None) -> Reading:
    """One reading of every rank's Flight Recorder (both recorders), its waits not yet confirmed.
    ``since``: the floors of the reading before, where each group's tail starts (None: at the
    floors of this reading, all a snapshot needs; see :mod:`.tail`)."""
    answers = {handler: ask(workers, handler, options.timeout_s) for handler in RECORDERS}
    ranks: dict[int, RankNow] = {}
    traces: dict[int, list[Trace]] = {}
    for worker in sorted(workers, key=lambda w: w.rank):
        read = [_recorder(answers[handler][worker.rank], handler, options.since_ns) for handler in RECORDERS]
        error = next((found for found in read if isinstance(found, str)), None)
        if error is not None:
            ranks[worker.rank] = RankNow(worker.rank, error=error)
            continue
        traces[worker.rank] = [found for found in read if isinstance(found, Trace)]
    paths = {worker.rank: worker.path for worker in workers}
    floors = retired_floors(traces)
    start = floors if since is None else {key: min(seq, since.get(key, 0)) for key, seq in floors.items()}
    dumps = [Dump(paths[rank], rank, content) for rank, content in tail_content(traces, start).items()]
    if not any(dump.content["entries"] for dump in dumps):  # nothing issued yet: every rank read is in step
        ranks.update({dump.rank: RankNow(dump.rank) for dump in dumps})
        return Reading(ranks, {}, floors=floors)
    events = import_dumps(dumps, []).events
    unended: dict[int, dict[int, Collective]] = {}  # rank → step → the call begun there and not ended
    ended: dict[int, Collective] = {}
    for event in events:
        if isinstance(event, Collective):
            if event.edge == "begin":
                unended.setdefault(event.rank, {})[event.phase] = event
            else:
                ended[event.rank] = event
                unended.get(event.rank, {}).pop(event.phase, None)
    for dump in dumps:  # the rank is inside the latest call it began and did not end (on any backend)
        last, inside = ended.get(dump.rank), list(unended.get(dump.rank, {}).values())
        ranks[dump.rank] = RankNow(dump.rank, done=_call_text(last) if last else "",
                                   inside=_call_text(inside[-1]) if inside else "")
    members = {(e.group, e.group_seq): e.group_ranks for e in events if isinstance(e, Collective)}
    waits = {}
    for stall in (e for e in events if isinstance(e, Stall)):
        key = (stall.group, stall.group_seq)
        missing = tuple(r for r in members.get(key, []) if r not in stall.waiting)
        waits[key] = Wait(f"{stall.op} #{stall.group_seq} on group {stall.group}", tuple(stall.waiting), missing)
    return Reading(ranks, waits, tuple(events), floors)


def confirm(first: Reading, second: Reading, workers: Sequence[Worker], options: SnapshotOptions = SnapshotOptions(),
            ask: Ask = ask_all) -> Snapshot:
    """The snapshot of ``second``: its waits that ``first`` shows too (the same ranks waiting in the
    same call), with the stack of each rank they wait on (only those ranks are asked)."""
    waits = [wait for key, wait in second.waits.items()
             if key in first.waits and first.waits[key].waiting == wait.waiting]
    missing = sorted({rank for wait in waits for rank in wait.missing})
    by_rank = {worker.rank: worker for worker in workers}
    asked = [by_rank[rank] for rank in missing if rank in by_rank]
    stacks = ask(asked, "dump_traceback", options.timeout_s) if asked else {}
    lines = {rank: user_stack_line(answer.body.decode(errors="replace")) if answer.body is not None
             else f"(stack not read: {answer.error})" for rank, answer in stacks.items()}
    waits = [Wait(wait.call, wait.waiting, wait.missing, {r: lines.get(r, "") for r in wait.missing}) for wait in waits]
    return Snapshot([second.ranks[rank] for rank in sorted(second.ranks)], waits)


def take_snapshot(workers: Sequence[Worker], options: SnapshotOptions = SnapshotOptions(),
                  ask: Ask = ask_all, sleep: Callable[[float], None] = time.sleep) -> Snapshot:
    """Read every rank (twice when some wait, ``options.interval_s`` apart) and ask the ranks the
    others wait on for their stacks; the snapshot of the second reading."""
    first = read_once(workers, options, ask)
    if not first.waits:
        return first.unconfirmed()
    sleep(options.interval_s)
    return confirm(first, read_once(workers, options, ask), workers, options, ask)
