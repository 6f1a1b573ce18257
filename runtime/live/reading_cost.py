"""What readings cost a job's ranks, measured per thread, and how long the next reading must wait
so that they stay under :data:`COST_SHARE` of each rank's own CPU.

torch 2.13's worker server builds its whole Flight Recorder answer at each request (its
``fr_trace_json`` handler takes no parameter: ``onlyactive`` and the rest are ignored), so what a
reading costs a rank is fixed by its buffer; only how often it is read is collviz's to choose. A
rank on this host (its worker server a Unix socket: its process id from the socket's peer
credentials) is measured as ``benchmarks/live_cost.py`` measures it: the CPU of its worker-server
threads (``pt_workerserver``) ÷ the CPU of its other threads, from ``/proc/PID/task/*/schedstat``
— read by collviz, from outside, costing the rank nothing.

After each reading a rank owes: its own CPU since it started must reach all its worker server's
CPU so far (readings taken while it was idle aside) and one more reading, ÷ the share — the next
reading as costly as the costliest yet, or as this one grown again by as much as it grew from the
one before, up to twice (a young job's buffer still fills), the larger. The next reading is due
once every working rank's own CPU, sampled as the loop waits, has reached that (:meth:`owed_s`:
a debt, not a projection made at the reading, so a loaded machine that runs the ranks less only
delays it, and the second reading is paid like the rest). A rank whose own CPU has nearly stopped
growing (waiting, stalled, sleeping) holds nothing back: a reading then takes nothing from its
work, and is not counted against it later. A rank on another host (a debug server's TCP address)
is not measured, and its readings keep the user's pace.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .workers import Worker

__all__ = ["COST_SHARE", "IDLE_SHARE", "SERVER_THREAD", "WINDOW_S", "OwnCpuPace", "OwnRate", "ReadingCost", "ThreadCpu",
           "server_pid", "thread_cpu"]

COST_SHARE = 0.004
"""The share of a rank's own CPU its readings may take (the line is 0.5 %: this leaves a margin for
the first reading, paid before its cost is known)."""

IDLE_SHARE = 0.02
"""Below this share of one core, a rank's own threads are taken as idle (waiting or stalled)."""

WINDOW_S = 1.0
"""A rank's CPU rate is measured over at least this long (a loaded machine may not run a rank for
a moment: a shorter window would take it for idle)."""

RESAMPLE_S = 0.25
"""The ranks' CPU is sampled at most this often while the loop waits (each sample reads every
thread's ``schedstat``: collviz's CPU, not the rank's)."""

SERVER_THREAD = "pt_workerserver"
"""The name torch gives its worker server's threads (``/proc/PID/task/TID/comm``)."""

_UCRED = struct.Struct("3i")
_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ThreadCpu:
    """One rank's CPU time so far, in ns: its worker-server threads' and its other threads'; and
    how long its process has run (None: not known)."""

    server_ns: int
    own_ns: int
    alive_s: float | None = None


def _alive_s(pid: int, proc: Path) -> float | None:
    """How long ``pid`` has run: the machine's uptime less its start (``/proc/PID/stat``, field 22)."""
    try:
        started = int((proc / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[19]) * _TICK_S
        return float((proc / "uptime").read_text().split()[0]) - started
    except (OSError, ValueError, IndexError):
        return None


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
    return ThreadCpu(server, own, _alive_s(pid, proc))


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
class OwnRate:
    """One rank's recent samples (when, its own CPU), to tell the rate its own threads run at."""

    samples: deque[tuple[float, int]] = field(default_factory=deque)

    def note(self, at: float, found: ThreadCpu) -> float | None:
        """Note the sample ``found`` taken ``at``: the rank's own CPU rate (cores) over the last
        :data:`WINDOW_S` or more, else since it started (None: not known)."""
        while len(self.samples) > 1 and at - self.samples[1][0] >= WINDOW_S:
            self.samples.popleft()  # the newest sample a window old is all that is needed
        since = self.samples[0] if self.samples and at - self.samples[0][0] >= WINDOW_S else None
        self.samples.append((at, found.own_ns))
        if since is not None:
            return (found.own_ns - since[1]) / ((at - since[0]) * 1e9)
        return found.own_ns / (found.alive_s * 1e9) if found.alive_s else None


@dataclass
class _Account(OwnRate):
    """One rank's account: the largest reading it paid for, the last one's, the server CPU of
    readings taken while it was idle (not counted against it), the own CPU it must reach before
    the next reading, and its recent samples (its rate)."""

    largest_ns: int = 0
    last_cost_ns: int = 0
    idle_ns: int = 0
    owes_ns: int = 0


@dataclass
class ReadingCost:
    """Measures each of ``pids`` (rank → process id) around each reading (:meth:`before`,
    :meth:`after`) and as the loop waits (:meth:`owed_s`); see the module. ``share``: the most of a
    rank's own CPU its readings take."""

    pids: Mapping[int, int]
    share: float = COST_SHARE
    cpu: Callable[[int], ThreadCpu | None] = thread_cpu
    clock: Callable[[], float] = time.monotonic
    _before: dict[int, ThreadCpu] = field(default_factory=dict)
    _accounts: dict[int, _Account] = field(default_factory=dict)
    _exited: set[int] = field(default_factory=set)
    _owed: tuple[float, float] | None = None
    """The last :meth:`owed_s` (when, what), reused for :data:`RESAMPLE_S`."""

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

    def after(self) -> None:
        """Note each rank's CPU as the reading ends: what it cost each rank, and what each now owes
        (see the module)."""
        now = self.clock()
        self._owed = None
        for rank, pid in self.pids.items():
            start, end = self._before.get(rank), self.cpu(pid)
            if start is None or end is None:
                continue
            cost = max(0, end.server_ns - start.server_ns)
            account = self._accounts.setdefault(rank, _Account())
            rate = account.note(now, end)
            if rate is not None and rate < IDLE_SHARE:
                account.idle_ns += cost  # waiting or stalled: this reading took nothing from its work
            grown = min(2.0, max(1.0, cost / account.last_cost_ns)) if account.last_cost_ns else 1.0
            account.largest_ns = max(account.largest_ns, cost)
            account.last_cost_ns = cost
            next_ns = max(account.largest_ns, cost * grown)  # a young job's buffer still grows
            account.owes_ns = int((end.server_ns - account.idle_ns + next_ns) / self.share)

    def owed_s(self) -> float:
        """The seconds until every working rank's own CPU reaches what it owes, at its rate now
        (0: paid, or every rank that owes is idle; estimated where the rate is not yet known from
        a window, from the rank's whole life)."""
        now = self.clock()
        if self._owed is not None and now - self._owed[0] < RESAMPLE_S:
            return max(0.0, self._owed[1] - (now - self._owed[0]))
        owed = 0.0
        for rank, account in self._accounts.items():
            found = self.cpu(self.pids[rank])
            if found is None:
                continue
            rate = account.note(now, found)
            short_ns = account.owes_ns - found.own_ns
            if short_ns <= 0 or (rate is not None and rate < IDLE_SHARE):
                continue
            owed = max(owed, short_ns / (rate * 1e9) if rate is not None else WINDOW_S)
        self._owed = (now, owed)
        return owed


@dataclass
class OwnCpuPace:
    """A meter (:class:`~.pace.Meter`) for a request too small to be measured per rank (the groups'
    status, 0.2–0.4 ms of a rank's server: ``benchmarks/live_cost.py``): the next one is paid once
    every working rank of ``pids`` (rank → process id) has run ``cpu_s`` of its own CPU since the
    last (:meth:`asked`); a rank that does not work (it waits, is stalled) or has exited holds
    nothing back. So the request costs each rank a share of its own CPU, however little of a core
    a loaded machine gives it, while a stall is still read at once."""

    pids: Mapping[int, int]
    cpu_s: float
    cpu: Callable[[int], ThreadCpu | None] = thread_cpu
    clock: Callable[[], float] = time.monotonic
    _rates: dict[int, OwnRate] = field(default_factory=dict)
    _asked_ns: dict[int, int] = field(default_factory=dict)
    """Each rank's own CPU when the request was last made."""
    _owed: tuple[float, float] | None = None
    """The last :meth:`owed_s` (when, what), reused for :data:`RESAMPLE_S`."""

    def asked(self) -> None:
        """The request was just made: each rank pays for the next one from its own CPU now (a
        sample of its rate too)."""
        now, self._owed = self.clock(), None
        self._asked_ns = {}
        for rank, pid in self.pids.items():
            found = self.cpu(pid)
            if found is not None:
                self._rates.setdefault(rank, OwnRate()).note(now, found)
                self._asked_ns[rank] = found.own_ns

    def owed_s(self) -> float:
        """The seconds until every working rank has run ``cpu_s`` of its own CPU since the last
        request, at its rate now (0: paid, or every rank short of it is idle)."""
        now = self.clock()
        if self._owed is not None and now - self._owed[0] < RESAMPLE_S:
            return max(0.0, self._owed[1] - (now - self._owed[0]))
        owed = 0.0
        for rank, pid in self.pids.items():
            found = self.cpu(pid)
            if found is None:
                continue
            rate = self._rates.setdefault(rank, OwnRate()).note(now, found)
            short_ns = self._asked_ns.get(rank, 0) + self.cpu_s * 1e9 - found.own_ns
            if short_ns <= 0 or (rate is not None and rate < IDLE_SHARE):
                continue
            owed = max(owed, short_ns / (rate * 1e9) if rate is not None else WINDOW_S)
        self._owed = (now, owed)
        return owed
