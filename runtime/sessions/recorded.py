"""The launcher's side of a script's run read from Flight Recorder (``collviz run`` without
``--observe``; the ranks' side is :mod:`~collviz.runtime.userjob.recorder`).

Its ranks send no calls while they run: each says only how it ended (its ``RankEnd``, which the
session reads as a message, not as part of the run's stream). The launcher holds the write end of
one pipe all ranks listen on; closing it (:meth:`RecorderDumps.request`, when the run fails or is
interrupted) makes every rank still alive dump its recorder where it is — a rank blocked in a
collective its peer never joins included — before the session ends them. Once every rank has
exited, :meth:`RecorderDumps.read` opens the dumps with the Flight Recorder reader
(:func:`~collviz.runtime.sources.detect.open_artifacts`) and returns their events for the run's
stream: each rank's steps and calls, stamped with the session's run, its ``RankEnd`` carrying the
error the rank reported; and the hangs and mismatches the reader found, for the launcher to emit.
A rank without a dump (killed before it could write one) is unknown, as the reader says.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from ..errors import UsageError
from ..sources.detect import open_artifacts
from ..sources.flight_recorder import BLANK_KEY_WARNING
from ..userjob.recorder import RecorderPlace, dump_path, socket_path
from ..wire.protocol import LAUNCHER_RANK, AnyEvent, Mismatch, Phase, RankEnd, RankStart, RunEnd, Stall

__all__ = ["DUMP_GRACE_S", "Recorded", "RecorderDumps"]

_STAMP = frozenset(("run", "rank", "seq", "t_ns"))
"""The fields every event's emitter stamps."""

DUMP_GRACE_S = 5.0
"""When a run fails or is interrupted, how long the ranks still alive get to write their dumps
before they are ended (each writes its own in tens of milliseconds; the bound is for a rank that
holds the interpreter lock in C++ code that never releases it)."""


@dataclass
class Recorded:
    """What the dumps said: the ranks' events, the reader's hangs and mismatches (launcher events
    to emit again, in the session's name), its warnings, and its verdict where the job hung or
    disagreed (empty where not)."""

    rank_events: list[AnyEvent] = field(default_factory=list)
    findings: list[tuple[type[Stall] | type[Mismatch], dict]] = field(default_factory=list)
    """Each hang or mismatch as its event type and fields (its run, rank, seq and time left out)."""
    warnings: list[str] = field(default_factory=list)
    failure: str = ""


class RecorderDumps:
    """The recorder's folder and request pipe of one run of ``world_size`` ranks in ``folder``."""

    def __init__(self, folder: str, world_size: int) -> None:
        self.folder = folder
        self.world_size = world_size
        read, self._request_fd = os.pipe()
        self.place = RecorderPlace(folder, read)
        """What every rank receives (its read end of the pipe is inherited by the fork)."""
        self._requested = False

    def in_rank(self) -> None:
        """In a forked rank: drop the launcher's end, so that only the launcher's closing it (or
        its death) ends the pipe."""
        os.close(self._request_fd)

    def after_forks(self) -> None:
        """In the launcher once every rank is forked: its copy of the ranks' end is not needed."""
        os.close(self.place.request_fd)

    def request(self) -> None:
        """Ask every rank still alive to dump its recorder now (idempotent)."""
        if not self._requested:
            self._requested = True
            os.close(self._request_fd)

    def dumped(self, ranks: list[int]) -> bool:
        """Whether each of ``ranks`` has written its dump."""
        return all(dump_path(self.folder, rank).exists() for rank in ranks)

    def close(self) -> None:
        """Once the ranks are gone: the pipe closed, sockets a killed rank left removed (the
        dumps stay, for :meth:`read` and in a failed run's kept folder)."""
        self.request()
        for rank in range(self.world_size):
            socket_path(self.folder, rank).unlink(missing_ok=True)

    def read(self, run: str, ends: Mapping[int, RankEnd], pids: Mapping[int, int], device: str) -> Recorded:
        """The dumps' events, stamped with ``run``; ``ends`` are the RankEnd each rank sent, whose
        error (if any) the rank's own RankEnd carries, added where the dump ends inside a call.
        Each RankStart says what the launcher knows and a dump does not: the rank's process id
        (``pids``), this host, and ``device`` where the plan knows it (else the reader's "unknown")."""
        paths = [path for rank in range(self.world_size) if (path := dump_path(self.folder, rank)).exists()]
        if not paths:
            return Recorded(warnings=["no rank's Flight Recorder holds a collective call (none made, or none before "
                                      "the rank was killed)"])
        try:
            imported = open_artifacts(paths)
        except UsageError as exc:
            return Recorded(warnings=[str(exc)])
        # gloo's blank group key is said when a user opens dumps; after each run it is noise
        recorded = Recorded(warnings=[text for text in imported.warnings if BLANK_KEY_WARNING not in text])
        next_seq: dict[int, int] = {}
        last_phase: dict[int, int] = {}
        told: set[int] = set()
        for event in imported.events:
            if event.rank == LAUNCHER_RANK:
                if isinstance(event, (Stall, Mismatch)):
                    recorded.findings.append((type(event), {name: getattr(event, name) for name in event.__struct_fields__
                                                            if name not in _STAMP}))
                elif isinstance(event, RunEnd) and imported.exit_status:  # the job hung or its ranks disagreed
                    recorded.failure = event.detail
                continue
            end = ends.get(event.rank)
            if isinstance(event, RankEnd) and end is not None and end.status == "error":
                event = msgspec.structs.replace(event, status="error", error=end.error)
                told.add(event.rank)
            elif isinstance(event, Phase):
                last_phase[event.rank] = event.index
            elif isinstance(event, RankStart):
                event = msgspec.structs.replace(event, pid=pids.get(event.rank, 0), host=platform.node(),
                                                device=device or event.device)
            recorded.rank_events.append(msgspec.structs.replace(event, run=run))
            next_seq[event.rank] = event.seq + 1
        t_ns = max((event.t_ns for event in recorded.rank_events), default=0)
        for rank, end in sorted(ends.items()):  # its dump ends inside a call, or it wrote none
            if end.status == "error" and rank not in told:
                recorded.rank_events.append(RankEnd(run=run, rank=rank, seq=next_seq.get(rank, 0), t_ns=t_ns,
                                                    status="error", error=end.error, phase=last_phase.get(rank)))
        return recorded
