"""What readings cost a job's ranks, measured per thread, and how long the next steady reading must
wait so that they stay under :data:`COST_SHARE` of each rank's own CPU.

torch 2.13's worker server builds its whole Flight Recorder answer at each request (its
``fr_trace_json`` handler takes no parameter: ``onlyactive`` and the rest are ignored), so what a
reading costs a rank is fixed by its buffer; only how often it is read is collviz's to choose. A
rank on this host (its worker server a Unix socket: its process id from the socket's peer
credentials) is measured as ``benchmarks/live_cost.py`` measures it: the CPU of its worker-server
threads (``pt_workerserver``) ÷ the CPU of its other threads, from ``/proc/PID/task/*/schedstat``
— read by collviz, from outside, costing the rank nothing. After each reading the next steady one
is held back until the rank's own CPU has grown enough to pay for another at that share (the worse
rank decides) — the share of both since the rank started, as the benchmark measures it, so a
reading paid before its cost was known (a young job's first full buffer) is paid back, and a job
attached late in its life has long paid for the first readings. A rank whose own CPU has nearly
stopped growing (waiting, stalled, sleeping) holds nothing back: a reading then takes nothing from
its work, and is not counted against it later. A rank on another host (a debug server's TCP
address) is not measured, and its readings keep the user's pace.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .workers import Worker

__all__ = ["COST_SHARE", "IDLE_SHARE", "SERVER_THREAD", "ReadingCost", "ThreadCpu", "server_pid", "thread_cpu"]

COST_SHARE = 0.004
"""The share of a rank's own CPU its readings may take (the line is 0.5 %: this leaves a margin for
the first reading, paid before its cost is known)."""

IDLE_SHARE = 0.02
"""Below this share of one core, a rank's own threads are taken as idle (waiting or stalled)."""

SERVER_THREAD = "pt_workerserver"
"""The name torch gives its worker server's threads (``/proc/PID/task/TID/comm``)."""

_UCRED = struct.Struct("3i")


@dataclass(frozen=True)
class ThreadCpu:
    """One rank's CPU time so far, in ns: its worker-server threads' and its other threads'."""

    server_ns: int
    own_ns: int


def thread_cpu(pid: int, proc: Path = Path("/proc")) -> ThreadCpu | None:
    """The CPU time of ``pid``'s threads, split as :class:`ThreadCpu`; None where the process is
    gone or cannot be read."""
    server = own = 0
    try:
        tasks = list((proc / str(pid) / "task").iterdir())
    except OSError:
        return None
    for task in tasks:
        try:
            name = (task / "comm").read_text().strip()
            ran_ns = int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended between the listing and the read
        if name == SERVER_THREAD:
            server += ran_ns
        else:
            own += ran_ns
    return ThreadCpu(server, own)


def server_pid(worker: Worker, timeout_s: float = 1.0) -> int | None:
    """The process id of a worker server listening on a Unix socket (its peer credentials, on a
    connection closed unused); None for a TCP address or where it cannot be told."""
    if worker.address.startswith("http://"):
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect(worker.address)
            pid, _, _ = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    except (OSError, AttributeError):  # AttributeError: no SO_PEERCRED on this platform
        return None
    return pid if pid > 0 else None


@dataclass
class _Account:
    """One rank's account: the largest reading it paid for, the last one's, the server CPU of
    readings taken while it was idle (not counted against it), and its last sample (when, what)."""

    largest_ns: int = 0
    last_cost_ns: int = 0
    idle_ns: int = 0
    at: float = 0.0
    last: ThreadCpu | None = None


@dataclass
class ReadingCost:
    """Measures each of ``pids`` (rank → process id) around each reading (:meth:`before`,
    :meth:`after`); see the module. ``share``: the most of a rank's own CPU its readings take."""

    pids: Mapping[int, int]
    share: float = COST_SHARE
    cpu: Callable[[int], ThreadCpu | None] = thread_cpu
    clock: Callable[[], float] = time.monotonic
    _before: dict[int, ThreadCpu] = field(default_factory=dict)
    _accounts: dict[int, _Account] = field(default_factory=dict)
    _exited: set[int] = field(default_factory=set)

    @classmethod
    def of(cls, workers: Sequence[Worker]) -> ReadingCost | None:
        """A meter for the ranks of ``workers`` that run on this host (None: none does)."""
        pids = {worker.rank: pid for worker in workers if (pid := server_pid(worker)) is not None
                and os.path.isdir(f"/proc/{pid}/task")}
        return cls(pids) if pids else None

    def newly_exited(self) -> bool:
        """Whether a measured rank's process has ended since this was last asked: the job's end
        (or a rank's) is to be read now, not after a hold its running ranks earned."""
        gone = {rank for rank, pid in self.pids.items() if not os.path.isdir(f"/proc/{pid}/task")}
        new, self._exited = gone - self._exited, self._exited | gone
        return bool(new)

    def before(self) -> None:
        """Note each rank's CPU as a reading starts."""
        self._before = {rank: found for rank, pid in self.pids.items() if (found := self.cpu(pid)) is not None}

    def after(self) -> float:
        """Note each rank's CPU as the reading ends: the seconds the next steady reading must wait
        so that each working rank's own CPU since it started, growing at its rate since the reading
        before, pays at ``share`` for all its worker server's CPU so far (readings taken while it
        was idle aside) and one more reading: as costly as the costliest yet, or as this one grown
        again by as much as it grew from the one before, up to twice (a young job's buffer still
        fills, and the eased pace doubles the time between readings), the larger (0: no rank holds
        it back)."""
        now = self.clock()
        hold = 0.0
        for rank, pid in self.pids.items():
            start, end = self._before.get(rank), self.cpu(pid)
            if start is None or end is None:
                continue
            cost = max(0, end.server_ns - start.server_ns)
            account = self._accounts.setdefault(rank, _Account())
            previous, since = account.last, now - account.at
            account.at, account.last = now, end
            grown = min(2.0, max(1.0, cost / account.last_cost_ns)) if account.last_cost_ns else 1.0
            account.largest_ns = max(account.largest_ns, cost)
            account.last_cost_ns = cost
            next_ns = max(account.largest_ns, cost * grown)  # a young job's buffer still grows
            if previous is None or since <= 0:
                continue
            own_rate = (end.own_ns - previous.own_ns) / (since * 1e9)
            if own_rate < IDLE_SHARE:
                account.idle_ns += cost  # waiting or stalled: this reading took nothing from its work
                continue
            owed_ns = (end.server_ns - account.idle_ns + next_ns) / self.share - end.own_ns
            hold = max(hold, owed_ns / (own_rate * 1e9))
        return hold
