"""Synthetic worker servers of a job that moves, for ``relay_scale.py``: RANKS Unix sockets
``FOLDER/sockets/rank<r>.sock`` answering as torch's worker server does (``_fr_servers.py``'s
answers), each ``fr_trace_json`` answer the rank's recorder as it is now: a window of WINDOW
calls that moves on by STEP calls at each line read from stdin (the benchmark's step, before each
of its viewer's readings: every rank moves at once, however often or late its relay reads it, and
a reading slowed by a loaded machine finds no more news than any other). The calls are ``FOLDER/real.json``'s
entries (a real gloo rank's, ``_fr_rank.py``), renumbered to run on past its end; rank BEHIND has
not issued the newest call of its window, which every other rank is inside (not yet retired). All
in one asyncio loop; prints ``ready``, serves until stdin closes.

    python benchmarks/_fr_moving_servers.py FOLDER RANKS WINDOW STEP BEHIND
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
from pathlib import Path

from _fr_servers import serve_ranks


class _Job:
    """Every call's entry as JSON bytes (retired, and the not-retired form of each), numbered on."""

    def __init__(self, real: dict, ranks: int, window: int, step: int, behind: int) -> None:
        real["pg_config"] = {"": {"name": "", "desc": "", "ranks": json.dumps(list(range(ranks)))}}
        self.head = json.dumps({k: v for k, v in real.items() if k != "entries"})[:-1].encode() + b', "entries": ['
        self.window, self.step, self.behind = window, step, behind
        self.template = real["entries"]
        self.retired: list[bytes] = []
        self.inside: list[bytes] = []
        self.steps = 0

    def _entry(self, index: int) -> None:
        """Make the call ``index`` (from 0): the real entry at that place in the recording, renumbered."""
        real = self.template[index % len(self.template)]
        entry = {**real, "collective_seq_id": index + 1, "op_id": index + 1, "record_id": index,
                 "time_created_ns": real["time_created_ns"] + index * 1000}
        self.retired.append(json.dumps({**entry, "retired": True}).encode())
        self.inside.append(json.dumps({**entry, "retired": False}).encode())

    def step_on(self) -> None:
        """Every rank makes STEP calls more."""
        self.steps += 1

    def answer_now(self, rank: int) -> bytes:
        """The rank's recorder now."""
        return self.answer(rank, self.steps)

    def answer(self, rank: int, steps: int) -> bytes:
        """The rank's recorder after the job's ``steps``-th step."""
        end = self.window + steps * self.step
        while len(self.retired) < end:
            self._entry(len(self.retired))
        start = end - self.window
        if rank == self.behind:
            entries = self.retired[start:end - 1]
        else:
            entries = [*self.retired[start:end - 1], self.inside[end - 1]]
        return self.head + b", ".join(entries) + b"]}"


if __name__ == "__main__":
    FOLDER = Path(sys.argv[1])
    RANKS, WINDOW, STEP, BEHIND = map(int, sys.argv[2:6])
    JOB = _Job(json.loads((FOLDER / "real.json").read_bytes()), RANKS, WINDOW, STEP, BEHIND)
    asyncio.run(serve_ranks(FOLDER / "sockets", {f"rank{rank}": functools.partial(JOB.answer_now, rank)
                                                 for rank in range(RANKS)}, JOB.step_on))
