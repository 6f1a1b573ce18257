"""A script's run read from Flight Recorder, live (``collviz run`` without ``--observe``): the
launcher reads its ranks' worker servers while they run, as ``collviz attach`` reads a job.

:class:`LiveRecorder` steps the one live loop (:class:`~collviz.runtime.live.loop.LiveLoop`) over a
:class:`~collviz.runtime.live.recorder_reader.RecorderReader` of the sockets of the run's folder and
its :class:`~collviz.runtime.live.feed.Feed` (``patient`` while the servers start; the run's
RunStart and RankEnd events are the launcher's), between the launcher's own work, so the viewer
shows each call as the ranks issue and complete it. A rank that has exited answers from the dump it wrote
(:meth:`~.recorded.RecorderDumps.answer`) — and so does one whose server no longer answers once that dump
is written (a rank removes its server's socket just after its last dump, before the launcher sees
its process end: read then, it would be no rank, and a subgroup's members, which gloo's recorder
does not name, would be guessed from the others) —, so the last reading, once every rank has
exited, reads the dumps through the same feed: each call is one step, each rank's events one
gap-free numbering, and only what no live reading showed is added. A rank not read otherwise (its
server slow, refusing, not started yet, its answer cut short) holds back the calls of the groups
gloo's recorder does not name until it is read (:func:`~..live.recorder_reader.tail_reading`);
one that exited without a dump is never read, and those groups' members are then the ranks whose
dumps mention them, said in a warning, as in an import of dumps.

A wait the feed confirms whose waiters have waited ``timeout_s`` becomes its Stall (with the line
of code each missing rank is at) and :attr:`LiveRecorder.hang`: the launcher ends the run. When the
run ends otherwise (a rank failed, Ctrl-C), :meth:`LiveRecorder.last_look` reads once more before
the ranks are asked to dump, every wait then final, with the missing ranks' stacks, except a wait
for a rank that failed (raised or died): its peers wait because it failed, and its error is the
run's story, not a hang.

Read less: a reading of the calls costs each rank the building of its whole recorder's answer
(~25 ms at 2,000 calls), its groups' status alone microseconds (the handler collviz adds to the
ranks it starts: :data:`~collviz.runtime.userjob.recorder.STATUS_HANDLER`). So the status is read
every second — once each working rank has also run a second of its own CPU since the last read
(:data:`STATUS_CPU_S`; a waiting rank holds nothing back) —, and the calls only every 10 s in the
viewer (:data:`WATCHED`), every minute headless (:data:`UNWATCHED`), or at once when the status shows a rank still inside the call it was inside a
second before, twice in a row; then every second while ranks wait, so a hang is confirmed soon after it outlasts
the timeout while a steady job is read rarely (``benchmarks/live_cost.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..live.feed import Feed
from ..live.loop import LiveLoop
from ..live.pace import Pace
from ..live.reading_cost import OwnCpuPace
from ..live.recorder_reader import Launched, RecorderReader
from ..live.workers import Answer, Worker, ask_all
from ..observation.rank_lists import ranks_text
from ..userjob.recorder import STATUS_HANDLER, socket_path
from ..wire.protocol import AnyEvent, Phase, RankEnd, RankStart, Stall
from .intake import Intake
from .recorded import RecorderDumps

__all__ = ["STATUS_CPU_S", "STATUS_EVERY_S", "UNWATCHED", "WATCHED", "LiveRecorder", "stuck"]

WATCHED = Pace(fastest_s=1.0, slowest_s=10.0)
"""The pace of a run shown in the viewer: every second while ranks wait, else every 10 s."""

UNWATCHED = Pace(fastest_s=1.0, slowest_s=60.0)
"""The pace of a run nobody watches live (headless): its calls are read for its hangs, which the
groups' status finds (:data:`STATUS_EVERY_S`), and from its dumps at its end."""

STATUS_EVERY_S = 1.0
"""How often the running ranks' groups' status is read, at the most."""

STATUS_CPU_S = 1.0
"""The own CPU each working rank runs between two reads of the groups' status (0.2–0.4 ms of its
server each, ``benchmarks/live_cost.py``): at most 0.04 % of its CPU, however little of a core a
loaded machine gives it (read by wall clock alone, the less of a core, the more of its CPU)."""

TIMEOUT_S = 2.0
"""Each request's deadline."""


def stuck(before: Mapping[int, dict], now: Mapping[int, dict]) -> bool:
    """Whether some rank is inside a call (a group's last call enqueued past its last completed)
    that it was inside at the status before too, not one completed since: a call that may wait."""
    for rank, groups in now.items():
        for name, group in groups.items():
            earlier = before.get(rank, {}).get(name)
            if not isinstance(group, dict) or not isinstance(earlier, dict):
                continue
            completed, enqueued = group.get("last_completed_collective"), group.get("last_enqueued_collective")
            if completed == earlier.get("last_completed_collective") and str(enqueued) != str(completed):
                return True
    return False


class _Passing:
    """The feed's sink: the session's intake, noting what passes (each rank's RankStart, last step
    and last time; the Stalls' texts)."""

    def __init__(self, intake: Intake) -> None:
        self.intake = intake
        self.events: list[AnyEvent] = []
        self.stalls: list[str] = []
        self.shown: set[int] = set()
        self.phase: dict[int, int] = {}
        self.t_ns: dict[int, int] = {}

    def take(self, event: AnyEvent) -> None:
        """Take in a rank's event and note it."""
        self.intake.take(event)
        self.events.append(event)
        self.t_ns[event.rank] = event.t_ns
        if isinstance(event, RankStart):
            self.shown.add(event.rank)
        elif isinstance(event, Phase) and event.edge == "begin":
            self.phase[event.rank] = event.index

    def emit(self, event_type: type[AnyEvent], **fields: Any) -> None:
        """Take in an event of the launcher's (a Stall's text is noted)."""
        self.intake.emit(event_type, **fields)
        if event_type is Stall:
            self.stalls.append(fields["text"])

    def passed(self) -> list[AnyEvent]:
        """The ranks' events taken in since the last call."""
        events, self.events = self.events, []
        return events


class LiveRecorder:
    """The live readings of a run's ranks (their sockets in ``dumps``' folder) into ``intake``, as
    run ``run``; ``launched``: what the launcher knows of the ranks; see the module."""

    def __init__(self, intake: Intake, run: str, dumps: RecorderDumps, launched: Launched, pace: Pace,
                 timeout_s: float, since_ns: int) -> None:
        self._dumps = dumps
        self._exited: set[int] = set()
        self._closed: set[int] = set()
        """Ranks whose server gave no answer once they had written their dump (see the module)."""
        self._sink = _Passing(intake)
        workers = [Worker(rank, str(socket_path(dumps.folder, rank))) for rank in range(dumps.world_size)]
        # calls made before the ranks were forked are the launcher's (inherited), not the run's
        self.reader = RecorderReader(workers, TIMEOUT_S, since_ns, self._ask, launched=launched)
        self.feed = Feed(self._sink, run, self.reader, patient=True, names_silent=False)
        self._loop = LiveLoop(self.reader, self.feed, pace, stall_after_s=timeout_s)
        self._status: dict[int, dict] = {}
        self._status_due = time.monotonic()
        self._status_paid = OwnCpuPace(launched.pids, STATUS_CPU_S)
        self._stuck_before = False
        self.hang = ""
        """The Stall of the first wait that outlasted ``timeout_s`` (its text), or empty."""

    def exited(self, rank: int) -> None:
        """Rank ``rank`` has exited: read from its dump from now on."""
        self._exited.add(rank)

    def _ask(self, workers: Sequence[Worker], handler: str, timeout_s: float) -> dict[int, Answer]:
        """Each running rank's server asked, each exited rank's dump read; a rank whose server gave
        no answer but that has written its dump is read from its dump from now on (see the module),
        unless the server was only slow: it is alive, and its dump may be one written on request
        that its later calls are not in."""
        from_dump = self._exited | self._closed
        answers = ask_all([w for w in workers if w.rank not in from_dump], handler, timeout_s)
        self._closed.update(rank for rank, answer in answers.items() if answer.body is None and answer.status is None
                            and not answer.slow and self._dumps.dumped([rank]))
        answers.update({w.rank: self._dumps.answer(w.rank, handler) for w in workers
                        if w.rank in self._exited | self._closed})
        return answers

    def _may_wait(self) -> bool:
        """Whether the running ranks' groups' status (read every :data:`STATUS_EVERY_S` once the
        working ranks have paid for it: :data:`STATUS_CPU_S`) shows a rank still inside the call it
        was inside at the status before, twice in a row (once may be a rank the loaded machine did
        not run for a second)."""
        if time.monotonic() < self._status_due or self._status_paid.owed_s() > 0:
            return False
        self._status_due = time.monotonic() + STATUS_EVERY_S
        running = [worker for worker in self.reader.workers if worker.rank not in self._exited | self._closed]
        answers = ask_all(running, STATUS_HANDLER, TIMEOUT_S)
        self._status_paid.asked()
        now = {}
        for rank, answer in answers.items():
            try:
                status = json.loads(answer.body or b"{}").get("pg_status")
            except (ValueError, AttributeError):
                continue
            if isinstance(status, dict):
                now[rank] = status
        before, self._status = self._status, now
        found, self._stuck_before = self._stuck_before, stuck(before, now)
        return found and self._stuck_before

    def read_if_due(self) -> list[AnyEvent]:
        """One reading if one is due, or sooner where the groups' status shows a rank that may
        wait: the ranks' events it took in (a wait that outlasted the timeout also sets
        :attr:`hang`)."""
        if self._loop.due or self._may_wait():
            self._loop.step()
        if self._sink.stalls and not self.hang:
            self.hang = self._sink.stalls[0]
        return self._sink.passed()

    def last_look(self, failed: Collection[int] = ()) -> list[AnyEvent]:
        """One reading now, every wait in it final (the run ends): each a Stall with the stack line
        of each missing rank still running, but none for a wait on a rank of ``failed`` (ranks
        that raised or died: their peers' wait is a consequence), nor on a rank that has written its
        last dump but whose exit the launcher has not seen (its script has ended: how, an error
        maybe, is not known yet — a script that destroys its process group in a ``finally`` fails its
        peers before its own process ends); the ranks' events it took in."""
        ending = [rank for rank in range(self._dumps.world_size) if rank not in self._exited]
        self._loop.stall_after_s = 0.0
        self._loop.step(final=True, excused={*failed, *(rank for rank in ending if self._dumps.dumped([rank]))})
        return self._sink.passed()

    def end(self, ends: Mapping[int, RankEnd], failed: Collection[int] = ()) -> tuple[list[AnyEvent], list[str]]:
        """Every rank has exited: the last reading (from the dumps; no wait on a rank of ``failed``
        is a Stall), then the RankEnd each rank sent (``ends``; a rank that showed no call gets one
        only where it failed), numbered after its other events. The ranks' events taken in, and
        what the dumps could not show."""
        self._exited.update(range(self._dumps.world_size))  # each rank read from its dump, whatever was reaped
        events = self.last_look(failed)
        sink = self._sink
        for rank, end in sorted(ends.items()):
            if rank in sink.shown or end.status == "error":
                self.feed.stamp(RankEnd, rank, max(end.t_ns, sink.t_ns.get(rank, 0)), status=end.status,
                                error=end.error, phase=sink.phase.get(rank))
        events += sink.passed()
        if not self.feed.started:
            return events, ["no rank's Flight Recorder holds a collective call (none made, or none before the rank "
                            "was killed)"]
        missing = self._dumps.missing()
        if not missing:
            return events, []
        plural = len(missing) > 1
        return events, [f"no dump of rank{'s' if plural else ''} {ranks_text(missing)} (made no call, or killed before "
                        f"{'they' if plural else 'it'} could write one): what {'they' if plural else 'it'} did after "
                        "the last live reading is unknown"]
