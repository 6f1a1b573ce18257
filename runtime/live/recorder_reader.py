"""A running job's ranks read through torch's worker servers: each rank's Flight Recorder (both of
torch's: CPU backends' ``fr_trace_json`` and NCCL's ``dump_nccl_trace_json``, absent where torch has
no NCCL — a 404 there is no error) decoded to calls, and the stack of each rank the others wait on
(``dump_traceback``, asked only for those ranks).

Only each rank's tail is decoded in full (:mod:`.tail`): the calls from where every rank's calls
were complete at the reading before. A reader that shows every call (``from_first``: the live
viewer) decodes the whole buffer at its first reading; a snapshot only the tail. A rank that did
not answer within the deadline is ``slow``; the rest of its answer is never waited for.
While any rank is not read (slow, or for any other reason) and may be read later, the calls of a
group whose members no recorder names (gloo's subgroups) wait: their members are never guessed
from part of the job.

:class:`RecorderReader` serves ``collviz attach`` (the job's servers, found by
:func:`~.workers.find_workers`) and ``collviz run`` (its own ranks' sockets, a rank that has exited
answering from its dump: the launcher passes its own ``ask``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..sources.flight_recorder import Dump, device_of_backend, read_calls
from ..wire.protocol import NOT_RECORDED_OPTION, UNTIMED_OPTION
from .reading import End, RankRead, Reading
from .stacks import user_stack_line
from .tail import Floors, Trace, decode_trace, retired_floors, tail_content
from .workers import Answer, Worker, ask_all

__all__ = ["ATTACHED_REASON", "ENDED", "NOT_RECORDED", "RECORDERS", "UNTIMED", "Ask", "Launched", "RecorderReader",
           "attached_run_start", "host_of", "stack_lines", "tail_reading"]

RECORDERS = ("fr_trace_json", "dump_nccl_trace_json")
"""The handlers of torch's two Flight Recorders (CPU backends, NCCL)."""

ATTACHED_REASON = "attached to a running job: Flight Recorder sizes and states, no values"
"""The RunStart's backend line for an attached job."""

UNTIMED = "an attached job's Flight Recorder records durations only on NCCL with TORCH_NCCL_ENABLE_TIMING=1"
"""Why an attached job's calls may have no duration."""

NOT_RECORDED = ("attached to a running job: its Flight Recorder holds each call's sizes and state, "
                "no values, provenance or transfers")
"""Why an attached job shows no values."""

ENDED = "the job ended: no rank's worker server answers any more (its exit status is its launcher's)"
"""How an attached job's end is told."""

Ask = Callable[[Sequence[Worker], str, float], Mapping[int, Answer]]
"""How the servers are asked (:func:`~.workers.ask_all`; a launcher or a test may pass another)."""


@dataclass(frozen=True)
class Launched:
    """What the launcher of the job knows (``collviz run``): each rank's process id, the host, and
    the ranks' device where the plan knows it (empty: unknown)."""

    pids: Mapping[int, int]
    host: str
    device: str = ""


def _recorder(answer: Answer, handler: str, since_ns: int) -> Trace | str | None:
    """One recorder's trace in ``answer``, skimmed, without calls made before ``since_ns``; None
    where the handler does not exist (NCCL's, without NCCL); else why it could not be read."""
    if answer.body is None:
        return None if answer.status == 404 and handler != RECORDERS[0] else answer.error
    trace = decode_trace(answer.body, since_ns)
    return f"its {handler} answer is {trace}" if isinstance(trace, str) else trace


def tail_reading(traces: Mapping[int, Sequence[Trace]], unread: Mapping[int, RankRead], paths: Mapping[int, Path],
                 earlier: Floors | None, warnings: list[str],
                 hosts: Mapping[int, str]) -> tuple[Reading, Floors]:
    """One reading of the ranks whose recorders' ``traces`` were read (``unread``: the others, and
    why; ``hosts``: where each runs, as far as known), and where each group's calls are now complete on every rank read (its floors). Each
    rank's tail is decoded from the floors of ``earlier`` (the reading before's, for a reader that
    shows every call; empty: from the first call; None: from this reading's floors). While a rank
    is not read, for any reason (slow, refusing, not started yet, an answer cut short or not
    understood, or not asked at all: a rank of the job with no server among ``paths``), unless it
    has ``ended`` (never read later), a group whose members its recorder
    alone may name waits (:func:`~..sources.flight_recorder.read_calls`): never shown with
    members guessed from the ranks read; ``warnings`` gains each warning once."""
    floors = retired_floors(traces)
    earlier = floors if earlier is None else earlier
    start = {key: min(seq, earlier.get(key, 0)) for key, seq in floors.items()}
    dumps = [Dump(paths[rank], rank, content) for rank, content in tail_content(traces, start).items()]
    said: list[str] = []
    later = {rank: read.error for rank, read in unread.items() if not read.ended}
    calls, origin = read_calls(dumps, said, later, [rank for rank, read in unread.items() if read.ended]) \
        if dumps else ([], None)
    warnings.extend(warning for warning in dict.fromkeys(said) if warning not in warnings)  # a reading a second
    ranks = {**unread, **{rank: RankRead(rank, host=hosts.get(rank, "")) for rank in traces}}
    world = max(origin.world_size if origin is not None else 0, max(paths, default=-1) + 1)
    return Reading(ranks, calls, world, origin.backend if origin is not None else "unknown",
                   origin.nccl_version if origin is not None else ""), floors


def host_of(worker: Worker) -> str:
    """The host a debug server's address names (``http://HOST:PORT``, as the rank registered it);
    empty for a socket (this host, unnamed)."""
    return urlsplit(worker.address).hostname or "" if worker.address.startswith("http://") else ""


def stack_lines(answers: Mapping[int, Answer]) -> dict[int, str]:
    """rank → its own line of code from its ``dump_traceback`` answer (or why it could not be read)."""
    return {rank: user_stack_line(answer.body.decode(errors="replace")) if answer.body is not None
            else f"(stack not read: {answer.error})" for rank, answer in answers.items()}


def attached_run_start(reading: Reading, ranks: int, where: str) -> dict[str, Any]:
    """An attached job's RunStart fields: ``ranks`` read at least, through ``where`` (its servers,
    its relays)."""
    return dict(scenario="attach", world_size=max(reading.world_size, ranks), backend=reading.backend,
                device_kind=device_of_backend(reading.backend), backend_reason=ATTACHED_REASON,
                mode="live", options={UNTIMED_OPTION: UNTIMED, NOT_RECORDED_OPTION: NOT_RECORDED},
                description=(f"Attached to a running job ({where}): each rank's Flight "
                             "Recorder read live, one step per collective call as the ranks issue and "
                             "complete it; where ranks wait for others, the line of code the missing ranks "
                             "are at. Sizes and states only: no values."),
                torch_version="not recorded", nccl_version=reading.nccl_version)


@dataclass
class RecorderReader:
    """Reads ``workers`` (see the module): each request within ``timeout_s``; calls made before
    ``since_ns`` (ns since the epoch) are not the job's (a launcher's ranks, forked from a process
    that had made calls, inherit its recorder's entries). ``target``: what the user attached to;
    ``launched``: the launcher's knowledge, where collviz started the job (its RunStart is the
    launcher's then)."""

    workers: Sequence[Worker]
    timeout_s: float = 2.0
    since_ns: int = 0
    ask: Ask = ask_all
    from_first: bool = True
    target: str = ""
    launched: Launched | None = None
    floors: Floors | None = None
    """Where each group's calls were complete on every rank at the last reading every rank answered."""
    warnings: list[str] = field(default_factory=list)
    absent: dict[str, set[int]] = field(default_factory=dict)
    """handler → the ranks whose server does not have it (answered 404: torch without NCCL): not asked again
    (each request is its server's work, an answer of 404 included)."""

    def read(self) -> Reading:
        """Every rank's recorders, once (see the module)."""
        answers = {handler: self._ask_having(handler) for handler in RECORDERS}
        ranks: dict[int, RankRead] = {}
        traces: dict[int, list[Trace]] = {}
        for worker in sorted(self.workers, key=lambda w: w.rank):
            read = [_recorder(answers[handler][worker.rank], handler, self.since_ns) for handler in RECORDERS]
            error = next((found for found in read if isinstance(found, str)), None)
            if error is not None:  # slow: either recorder's answer was
                ranks[worker.rank] = RankRead(worker.rank, error=error, host=host_of(worker),
                                              slow=any(answers[handler][worker.rank].slow for handler in RECORDERS),
                                              ended=answers[RECORDERS[0]][worker.rank].ended)
                continue
            traces[worker.rank] = [found for found in read if isinstance(found, Trace)]
        reading, floors = tail_reading(traces, ranks, {worker.rank: worker.path for worker in self.workers},
                                       self.floors if self.floors is not None else {} if self.from_first else None,
                                       self.warnings, {worker.rank: host_of(worker) for worker in self.workers})
        if traces and len(traces) == len(self.workers):
            self.floors = floors
        return reading

    def _ask_having(self, handler: str) -> dict[int, Answer]:
        """rank → its answer to ``handler``, asked of the ranks not known to lack it (the others: their
        404 again, unasked); a rank that answers 404 to NCCL's recorder is noted as lacking it."""
        lacking = self.absent.setdefault(handler, set())
        having = [worker for worker in self.workers if worker.rank not in lacking]
        answers = dict(self.ask(having, handler, self.timeout_s)) if having else {}
        if handler != RECORDERS[0]:
            lacking.update(rank for rank, answer in answers.items() if answer.status == 404)
        answers.update({rank: Answer(rank, None, f"{handler} answered 404", status=404) for rank in lacking
                        if rank not in answers})
        return answers

    def stacks(self, ranks: Sequence[int]) -> dict[int, str]:
        """rank → its own line of code from its ``dump_traceback`` (or why it could not be read)."""
        asked = [worker for worker in self.workers if worker.rank in set(ranks)]
        return stack_lines(self.ask(asked, "dump_traceback", self.timeout_s) if asked else {})

    def run_start(self, reading: Reading) -> dict[str, Any] | None:
        """An attached job's RunStart (None where collviz launched it: the launcher's)."""
        if self.launched is not None:
            return None
        count = len(self.workers)
        return attached_run_start(reading, max((w.rank for w in self.workers), default=0) + 1,
                                  f"{count} worker server{'s' if count > 1 else ''}"
                                  + (f" at {self.target}" if self.target else ""))

    def rank_start(self, rank: int, reading: Reading) -> dict[str, Any]:
        """The rank's device, backend, host (a debug server's, from its address) and pid, as far as known."""
        launched = self.launched or Launched({}, "")
        read = reading.ranks.get(rank)
        return dict(device=launched.device or device_of_backend(reading.backend), backend=reading.backend,
                    host=launched.host or (read.host if read is not None else ""), pid=launched.pids.get(rank, 0))

    def ended(self, reading: Reading) -> End | None:
        """Over once no rank answers (an attached job; a launcher knows better and ends it itself)."""
        return End("ok", ENDED) if self.launched is None and reading.gone else None
