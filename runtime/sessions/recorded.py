"""The launcher's side of a script's run read from Flight Recorder (``collviz run`` without
``--observe``; the ranks' side is :mod:`~collviz.runtime.userjob.recorder`).

Its ranks send no calls while they run: each says only how it ended (its ``RankEnd``, which the
session reads as a message, not as part of the run's stream). The launcher holds the write end of
one pipe all ranks listen on; closing it (:meth:`RecorderDumps.request`, when the run fails or is
interrupted) makes every rank still alive dump its recorder where it is — a rank blocked in a
collective its peer never joins included — before the session ends them. A rank that has exited
answers from its dump (:meth:`RecorderDumps.answer`) what its worker server answered while it ran,
so the live readings (:mod:`.recorder_live`) read it to the end the same way. A rank without a
dump (killed before it could write one) is unknown.
"""

from __future__ import annotations

import os

from ..live.recorder_reader import RECORDERS
from ..live.workers import Answer
from ..userjob.recorder import RecorderPlace, dump_path, socket_path

__all__ = ["DUMP_GRACE_S", "RecorderDumps"]

DUMP_GRACE_S = 5.0
"""When a run fails or is interrupted, how long the ranks still alive get to write their dumps
before they are ended (each writes its own in tens of milliseconds; the bound is for a rank that
holds the interpreter lock in C++ code that never releases it)."""


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

    def answer(self, rank: int, handler: str) -> Answer:
        """What rank ``rank``, once it has exited, says to ``handler`` of its worker server: its dump
        for its Flight Recorder (which joins every recorder's calls: NCCL's handler is not there),
        no stack; without a dump, an answer that says the rank is ended (never read later)."""
        if handler == RECORDERS[0]:
            try:
                return Answer(rank, dump_path(self.folder, rank).read_bytes(), status=200)
            except FileNotFoundError:
                return Answer(rank, None, "it ended without a Flight Recorder dump (it made no call, or was killed "
                                          "before it could write one)", ended=True)
        if handler in RECORDERS:
            return Answer(rank, None, f"{handler}: its dump holds every recorder's calls", status=404)
        return Answer(rank, None, "it has exited")

    def missing(self) -> list[int]:
        """The ranks without a dump (once every rank has exited)."""
        return [rank for rank in range(self.world_size) if not dump_path(self.folder, rank).exists()]
