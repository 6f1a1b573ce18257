"""A running job that prepared nothing, read by pid (``collviz attach --pid``): every rank's Python
stack read from outside with py-spy (:mod:`.py_spy`; non-blocking unless ``native``), never
signalling or stopping the job.

A reading says, per rank, whether it is inside a collective call (the torch API function it is in,
:func:`~.stacks.place_of`, and the line of its own code that called it) or outside any, at the
line of its own code. A call is known by that place alone (``all_reduce at job.py:14 in main``):
a stack holds no group, call number, sizes or values. Its group is taken to be every rank read, so
a rank not in it is missing from it (:func:`~.reading.waits_of`); a rank seen in it at two readings
in a row is taken to be in one call. Once no rank is in it any more, the reading says every rank
completed it (a collective on every rank is over only once each took part); ranks seen entering it
again later are in a new call.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..sources.run import Call
from ..wire.protocol import NOT_RECORDED_OPTION, SIZES_NOT_READ, STACKS_SCENARIO, UNTIMED_OPTION
from .pids import RankProcess
from .py_spy import PtraceDenied, StackError, dump_threads
from .reading import CallKey, End, RankRead, Reading
from .stacks import Frame, Place, place_of

__all__ = ["NOT_RECORDED", "PidReader", "UNTIMED"]

UNTIMED = "read from the ranks' stacks, which hold no call's time"
"""Why a call read by pid has no duration."""

NOT_RECORDED = ("read from the ranks' Python stacks (py-spy): where each rank is, no group, call number, sizes, "
                "values or transfers")
"""Why a job read by pid shows no values."""

Dump = Callable[[int, bool, float], list[list[Frame]]]
"""How a process's threads are read (:func:`~.py_spy.dump_threads`; a test may pass another)."""

_PARALLEL = 16


@dataclass
class _Open:
    """A call some ranks are in: its key, its words, when each rank was first seen in it."""

    key: CallKey
    op: str
    words: str
    seen_ns: dict[int, int] = field(default_factory=dict)


@dataclass
class PidReader:
    """Reads the stacks of ``ranks`` (see the module), each within ``timeout_s``; ``native`` adds
    C and C++ frames (py-spy pauses each rank for the moment of its read)."""

    ranks: Sequence[RankProcess]
    native: bool = False
    timeout_s: float = 5.0
    dump: Dump = dump_threads
    _open: dict[str, _Open] = field(default_factory=dict)
    """The calls ranks are in, by their words."""
    _entered: dict[str, int] = field(default_factory=dict)
    """How many times ranks were seen entering a call at each place."""
    _lines: dict[int, str] = field(default_factory=dict)
    """Each rank's own line at the last reading."""

    def check(self) -> None:
        """Read the first rank once: a one-line UsageError where the system refuses ptrace."""
        try:
            self.dump(self.ranks[0].pid, False, self.timeout_s)
        except PtraceDenied as denied:
            raise UsageError(f"pid {self.ranks[0].pid} (rank {self.ranks[0].rank}): {denied}") from None
        except StackError:
            pass  # a rank that cannot be read now is named by the readings

    def _places(self) -> dict[int, Place | str]:
        """rank → where its Python is, or why it could not be read."""

        def read(process: RankProcess) -> Place | str:
            if not Path(f"/proc/{process.pid}").exists():
                return f"its process (pid {process.pid}) has ended"
            try:
                return place_of(self.dump(process.pid, self.native, self.timeout_s))
            except StackError as failed:
                return f"pid {process.pid}: {failed}"

        with ThreadPoolExecutor(max_workers=min(_PARALLEL, len(self.ranks))) as pool:
            return dict(zip((process.rank for process in self.ranks), pool.map(read, self.ranks)))

    def read(self) -> Reading:
        """Every rank's stack, once: the calls ranks are in, and those no rank is in any more."""
        now = time.time_ns()
        places = self._places()
        members = tuple(sorted(places))
        ranks = {rank: RankRead(rank, error=place) if isinstance(place, str) else RankRead(rank)
                 for rank, place in places.items()}
        found = {rank: place for rank, place in places.items() if isinstance(place, Place)}
        self._lines = {rank: place.line or "(no frame of the job's own code)" for rank, place in found.items()}
        inside: dict[str, list[int]] = {}
        shown: dict[int, str] = {}
        for rank, place in found.items():
            if place.collective is None or place.own is None:
                shown[rank] = self._lines[rank]
                continue
            words = f"{place.collective.name} at {place.own}"
            inside.setdefault(words, []).append(rank)
            innermost = place.innermost
            shown[rank] = str(innermost) if innermost is not None and innermost.native else ""
            if words not in self._open:
                count = self._entered[words] = self._entered.get(words, 0) + 1
                self._open[words] = _Open((words, count), place.collective.name, words)
        calls: list[Call] = []
        for words, call in list(self._open.items()):
            still = inside.get(words, [])
            for rank in still:
                call.seen_ns.setdefault(rank, now)
            over = not still
            if over:
                del self._open[words]
            for rank in (members if over else still):
                calls.append(Call(rank, call.key[0], members, call.key[1], call.op, SIZES_NOT_READ, 0, 0, 0,
                                  call.seen_ns.get(rank, now), None, completed=over, where=words.partition(" at ")[2]))
        texts = {call.key: (call.words, _narration(call.words)) for call in self._open.values()}
        worded = {call.key: call.group for call in calls}
        world = max([process.world_size for process in self.ranks] + [len(self.ranks)])
        return Reading(ranks, calls, world, texts=texts, call_texts=worded, places=shown)

    def stacks(self, ranks: Sequence[int]) -> dict[int, str]:
        """rank → the line of its own code at the last reading (read for every rank at each)."""
        return {rank: self._lines.get(rank, "") for rank in ranks}

    def run_start(self, reading: Reading) -> dict[str, Any] | None:
        """The RunStart of the job read by pid."""
        count = len(self.ranks)
        return dict(scenario=STACKS_SCENARIO, world_size=reading.world_size or count, backend="unknown", device_kind="cpu",
                    backend_reason="attached by pid: each rank's Python stack read with py-spy; the backend and "
                                   "devices are not read", mode="live",
                    options={UNTIMED_OPTION: UNTIMED, NOT_RECORDED_OPTION: NOT_RECORDED},
                    description=(f"Attached by pid to {count} rank{'s' if count > 1 else ''} of a job that prepared "
                                 "nothing: each rank's Python stack read with py-spy at every reading, one step per "
                                 "collective call ranks are seen in, known only by the function and the line that "
                                 "called it (a stack holds no group, call number or sizes: every rank read is taken "
                                 "to be in the call's group). Where ranks wait in a call, the line of their own code "
                                 "the missing ranks are at."),
                    torch_version="not recorded", nccl_version="")

    def rank_start(self, rank: int, reading: Reading) -> dict[str, Any]:
        """The rank's host (this one) and pid; its device is not read."""
        pid = next(process.pid for process in self.ranks if process.rank == rank)
        return dict(device="device unknown", backend="unknown", host=socket.gethostname(), pid=pid)

    def ended(self, reading: Reading) -> End | None:
        """Over once no rank's process is there any more."""
        return End("ok", "the job ended: every rank's process has ended") if reading.gone else None


def _narration(words: str) -> str:
    return (f"{words}: read from the ranks' Python stacks (py-spy), which hold no group, call number, sizes or "
            "values; a rank seen in it at readings in a row is taken to be in one call.")
