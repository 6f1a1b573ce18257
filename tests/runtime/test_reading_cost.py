"""What readings cost a job's ranks, and how the live loop paces them: the per-thread meter
(``runtime/live/reading_cost.py``) on a /proc tree written here and on this process, the hold it
asks for computed by hand, and the loop reading again soon only for a wait that has lasted."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from collviz.runtime.live.feed import Feed
from collviz.runtime.live.loop import LiveLoop
from collviz.runtime.live.pace import Pace
from collviz.runtime.live.reading import RankRead, Reading
from collviz.runtime.live.reading_cost import ReadingCost, ThreadCpu, server_pid, thread_cpu
from collviz.runtime.live.workers import Worker
from collviz.runtime.sources.run import Call

S = 1_000_000_000
MS = 1_000_000


def _task(proc: Path, pid: int, tid: int, name: str, ran_ns: int) -> None:
    task = proc / str(pid) / "task" / str(tid)
    task.mkdir(parents=True)
    (task / "comm").write_text(name + "\n")
    (task / "schedstat").write_text(f"{ran_ns} 12 34\n")


def test_a_ranks_cpu_is_split_between_its_worker_server_threads_and_the_rest(tmp_path):
    _task(tmp_path, 41, 41, "python", 500)
    _task(tmp_path, 41, 42, "pt_workerserver", 70)
    _task(tmp_path, 41, 43, "pt_workerserver", 5)
    _task(tmp_path, 41, 44, "gloo", 30)
    assert thread_cpu(41, tmp_path) == ThreadCpu(server_ns=75, own_ns=530)
    assert thread_cpu(99, tmp_path) is None  # a process gone
    mine = thread_cpu(os.getpid())
    assert mine is not None and mine.own_ns > 0


def test_a_unix_socket_servers_pid_is_its_listeners_and_a_tcp_address_has_none(tmp_path):
    path = tmp_path / "rank0.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(1)
        assert server_pid(Worker(0, str(path))) == os.getpid()
    assert server_pid(Worker(1, "http://127.0.0.1:1")) is None
    assert server_pid(Worker(2, str(tmp_path / "none.sock"))) is None


@dataclass
class _Ranks:
    """Each rank's CPU as the test sets it, and a clock."""

    cpu: dict[int, ThreadCpu]
    now: float = 0.0

    def read(self, pid: int) -> ThreadCpu | None:
        return self.cpu.get(pid)


def test_the_next_steady_reading_waits_until_the_working_ranks_cpu_since_it_started_pays_for_one_more():
    # rank 0 had worked 4 s and its server 3 ms (another reader) before the first reading
    ranks = _Ranks({10: ThreadCpu(3 * MS, 4 * S), 11: ThreadCpu(0, 0)})
    cost = ReadingCost({0: 10, 1: 11}, share=0.004, cpu=ranks.read, clock=lambda: ranks.now)
    cost.before()
    ranks.cpu = {10: ThreadCpu(4 * MS, 4 * S), 11: ThreadCpu(1 * MS, 0)}
    assert cost.after() == 0.0  # the first reading: no rate known yet
    ranks.now = 10.0  # rank 0 works at half a core; rank 1 at 1 % of one (it waits)
    cost.before()
    ranks.cpu = {10: ThreadCpu(24 * MS, 9 * S), 11: ThreadCpu(21 * MS, S // 10)}
    # rank 0: its server's 24 ms and one more reading, this one's 20 ms grown again as it grew from
    # the 1 ms before, up to twice: 40 ms; at 0.4 % 64 ms / 0.004 = 16 s of its own CPU; it has 9 s:
    # 7 s more at 0.5 s a second = 14 s.
    assert abs(cost.after() - 14.0) < 1e-9
    ranks.now = 30.0
    cost.before()
    ranks.cpu = {10: ThreadCpu(44 * MS, 19 * S), 11: ThreadCpu(41 * MS, S // 5)}
    # 20 ms again, no growth: (44 + 20) ms / 0.004 = 16 s, and it has 19 s: paid for; rank 1 still waits
    assert cost.after() == 0.0


def test_a_rank_gone_or_idle_holds_nothing_back_and_readings_while_idle_are_not_counted_against_it():
    ranks = _Ranks({10: ThreadCpu(0, 0)})
    cost = ReadingCost({0: 10, 1: 11}, share=0.004, cpu=ranks.read, clock=lambda: ranks.now)  # pid 11: gone
    cost.before()
    assert cost.after() == 0.0
    ranks.now = 10.0
    cost.before()
    ranks.cpu = {10: ThreadCpu(50 * MS, S // 10)}  # 1 % of a core: below IDLE_SHARE
    assert cost.after() == 0.0
    ranks.now = 20.0
    cost.before()
    ranks.cpu = {10: ThreadCpu(60 * MS, S // 10 + 10 * S)}  # one core
    # its server's 60 ms less the 50 ms read while it was idle, plus the costliest (50 ms): 60 ms /
    # 0.004 = 15 s; it has 10.1 s: 4.9 s more at one core
    assert abs(cost.after() - 4.9) < 1e-9


def _call(rank: int, seq: int, issued_ns: int, completed: bool) -> Call:
    return Call(rank, "0", (0, 1, 2, 3), seq, "all_reduce", "float32", 4, 16, 16, issued_ns, completed=completed)


@dataclass
class _Job:
    """Four ranks; ranks 0-2 inside all_reduce #2, issued ``issued_ns`` (one per reading, the last
    repeated); rank 3 still at #1. ``waits``: False, every rank at #1 and none waiting;
    ``on_read``: what a reading does to the ranks (their CPU)."""

    issued_ns: list[int]
    waits: bool = True
    on_read: Callable[[], None] = lambda: None
    readings: int = 0
    stacks_asked: list[tuple[int, ...]] = field(default_factory=list)

    def read(self) -> Reading:
        self.on_read()
        issued = self.issued_ns[min(self.readings, len(self.issued_ns) - 1)]
        self.readings += 1
        calls = [_call(rank, 1, 0, True) for rank in range(4)]
        calls += [_call(rank, 2, issued, False) for rank in range(3)] if self.waits else []
        return Reading({rank: RankRead(rank) for rank in range(4)}, calls, 4, "gloo")

    def stacks(self, ranks):
        self.stacks_asked.append(tuple(ranks))
        return {rank: "job.py:9 in main" for rank in ranks}

    def run_start(self, reading):
        return None

    def rank_start(self, rank, reading):
        return dict(device="cpu", backend="gloo", host="here", pid=0)

    def ended(self, reading):
        return None


class _Sink:
    def take(self, event) -> None:
        pass

    def emit(self, event_type, **fields) -> None:
        pass


def _loop(job: _Job, now_ns: int, cost: ReadingCost | None = None) -> LiveLoop:
    return LiveLoop(job, Feed(_Sink(), "r", job, now_ns=lambda: now_ns), Pace(1.0, 10.0), cost=cost)


def test_a_wait_younger_than_the_fastest_interval_at_the_readings_start_is_read_at_the_steady_pace():
    now = 100 * S
    young = _loop(_Job([now - S // 2]), now)  # ranks 0-2 issued #2 half a second before the reading
    young.step()
    assert (young.busy, young.interval, young.feed.confirmed) == (False, 10.0, {})
    job = _Job([now - 3 * S])  # 3 s before: read again in a second, to confirm it
    lasting = _loop(job, now)
    lasting.step()
    assert (lasting.busy, lasting.interval, lasting.feed.confirmed) == (True, 1.0, {})
    lasting.step()  # the same wait again: confirmed, and read every second while it lasts
    assert list(lasting.feed.confirmed) == [("0", 2)] and (lasting.busy, lasting.interval) == (True, 1.0)
    assert job.stacks_asked == [(3,)]  # the missing rank's stack, once for the wait


def test_a_steady_reading_waits_as_long_as_the_measured_cost_asks():
    ranks = _Ranks({10: ThreadCpu(0, 0)})
    cost = ReadingCost({0: 10}, share=0.004, cpu=ranks.read, clock=lambda: ranks.now)
    job = _Job([0], waits=False)
    loop = _loop(job, 0, cost)
    loop.step()
    assert loop.interval == 2.0  # no rate known yet: the steady pace eased in, twice the fastest
    loop.step()
    assert loop.interval == 4.0
    ranks.now, ranks.cpu = 10.0, {10: ThreadCpu(0, 2 * S)}  # the rank worked at 0.2 of a core

    def server_answers() -> None:
        ranks.cpu = {10: ThreadCpu(40 * MS, 2 * S)}

    job.on_read = server_answers
    loop.step()
    # paid 40 ms; one more: 80 ms / 0.004 = 20 s of own CPU, it has 2 s: 18 s at 0.2 s a second = 90 s
    assert abs(loop.interval - 90.0) < 1e-9


def test_a_rank_whose_process_ended_makes_the_next_reading_due_at_once_once():
    """A job released from its last steady reading ends while its held-back next reading waits:
    a rank's ended process makes the reading due now (so the end is read, not found a hold later),
    and only once per ended rank (a rank that crashed early does not make every poll read)."""
    import subprocess
    import sys

    from collviz.runtime.live.reading_cost import ReadingCost

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    meter = ReadingCost({0: ended.pid, 1: os.getpid()})
    assert meter.newly_exited() is True
    assert meter.newly_exited() is False, "said once"
