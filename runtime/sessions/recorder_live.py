"""A script's run read from Flight Recorder, live (``collviz run`` without ``--observe``): the
launcher reads its ranks' worker servers while they run, as ``collviz attach`` reads a job.

:class:`LiveRecorder` steps a :class:`~collviz.runtime.attach.watch.Watcher` over the sockets of
the run's folder and turns each reading into events with one
:class:`~collviz.runtime.attach.feed.Feed` (``patient`` while the servers start, ``launched``: the
run's RunStart and RankEnd events are the launcher's), so the viewer shows each call as the ranks
issue and complete it. A rank that has exited answers from the dump it wrote
(:meth:`~.recorded.RecorderDumps.answer`), so the last reading, once every rank has exited, reads
the dumps through the same feed: each call is one step, each rank's events one gap-free numbering,
and only what no live reading showed is added.

A wait the feed confirms whose waiters have waited ``timeout_s`` becomes its Stall (with the line
of code each missing rank is at) and :attr:`LiveRecorder.hang`: the launcher ends the run. When the
run ends otherwise (a rank failed, Ctrl-C), :meth:`LiveRecorder.last_look` reads once more before
the ranks are asked to dump, every wait then final, with the missing ranks' stacks, except a wait
for a rank that failed (raised or died): its peers wait because it failed, and its error is the
run's story, not a hang.

Pace (:func:`run_pace`): watched in the viewer, every second while calls move; unwatched
(headless), only waits quicken it, and the steady pace is a third of ``timeout_s`` (1–10 s), so a
hang is confirmed soon after it outlasts the timeout while a steady job is read rarely (each
reading costs a rank the building of its whole recorder's answer: BENCHMARKS, attach's cost).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..attach.feed import Feed, Launched
from ..attach.snapshot import SnapshotOptions, confirm, read_once
from ..attach.watch import Pace, Watcher
from ..attach.workers import Answer, Worker, ask_all
from ..observation.rank_lists import ranks_text
from ..userjob.recorder import socket_path
from ..wire.protocol import AnyEvent, Phase, RankEnd, RankStart, Stall
from .intake import EventIntake
from .recorded import RecorderDumps

__all__ = ["WATCHED", "LiveRecorder", "run_pace"]

WATCHED = Pace(fastest_s=1.0, slowest_s=10.0)
"""The pace of a run shown in the viewer: every second while calls move or ranks wait."""

TIMEOUT_S = 2.0
"""Each request's bound."""


def run_pace(timeout_s: float) -> Pace:
    """The pace of a run nobody watches live: every second while ranks wait, else every third of
    ``timeout_s`` (1–10 s) once steady."""
    return Pace(fastest_s=1.0, slowest_s=min(10.0, max(1.0, timeout_s / 3)), changes=False)


class _Passing:
    """The feed's sink: the session's intake, noting what passes (each rank's RankStart, last step
    and last time; the Stalls' texts)."""

    def __init__(self, intake: EventIntake) -> None:
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

    def __init__(self, intake: EventIntake, run: str, dumps: RecorderDumps, launched: Launched, pace: Pace,
                 timeout_s: float, since_ns: int) -> None:
        self._dumps = dumps
        self._timeout_s = timeout_s
        self._exited: set[int] = set()
        self._sink = _Passing(intake)
        self.workers = [Worker(rank, str(socket_path(dumps.folder, rank))) for rank in range(dumps.world_size)]
        self.feed = Feed(self._sink, run, self.workers, patient=True, launched=launched)
        # calls made before the ranks were forked are the launcher's (inherited), not the run's
        self._options = SnapshotOptions(timeout_s=TIMEOUT_S, since_ns=since_ns)
        self._watcher = Watcher(self.workers, pace, self._options, self._ask)
        self._due = time.monotonic()
        self.hang = ""
        """The Stall of the first wait that outlasted ``timeout_s`` (its text), or empty."""

    def exited(self, rank: int) -> None:
        """Rank ``rank`` has exited: read from its dump from now on."""
        self._exited.add(rank)

    def _ask(self, workers: Sequence[Worker], handler: str, timeout_s: float) -> dict[int, Answer]:
        """Each running rank's server asked, each exited rank's dump read."""
        answers = ask_all([w for w in workers if w.rank not in self._exited], handler, timeout_s)
        answers.update({w.rank: self._dumps.answer(w.rank, handler) for w in workers if w.rank in self._exited})
        return answers

    def read_if_due(self) -> list[AnyEvent]:
        """One reading if one is due: the ranks' events it took in (a wait that outlasted the
        timeout also sets :attr:`hang`)."""
        if time.monotonic() < self._due:
            return []
        reading, _ = self._watcher.read(self.feed.since)
        self.feed.take(reading, self._watcher.latest, self._timeout_s)
        self._due = time.monotonic() + self._watcher.interval
        if self._sink.stalls and not self.hang:
            self.hang = self._sink.stalls[0]
        return self._sink.passed()

    def last_look(self, failed: Collection[int] = ()) -> list[AnyEvent]:
        """One reading now, every wait in it final (the run ends): each a Stall with the stack line
        of each missing rank still running, but none for a wait on a rank of ``failed`` (ranks
        that raised or died: their peers' wait is a consequence); the ranks' events it took in."""
        reading = read_once(self.workers, self._options, self._ask, self.feed.since)
        snapshot = confirm(reading, reading, self.workers, self._options, self._ask)
        waits = [wait for wait in snapshot.waits if not set(wait.missing) & set(failed)]
        self.feed.take(reading, dataclasses.replace(snapshot, waits=waits))
        return self._sink.passed()

    def end(self, ends: Mapping[int, RankEnd], failed: Collection[int] = ()) -> tuple[list[AnyEvent], list[str]]:
        """Every rank has exited: the last reading (from the dumps; no wait on a rank of ``failed``
        is a Stall), then the RankEnd each rank sent (``ends``; a rank that showed no call gets one
        only where it failed), numbered after its other events. The ranks' events taken in, and
        what the dumps could not show."""
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
