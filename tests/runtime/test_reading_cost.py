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
from collviz.runtime.live.pace import Pace, Schedule
from collviz.runtime.live.reading import RankRead, Reading
from collviz.runtime.live.reading_cost import OwnCpuPace, ReadingCost, ThreadCpu, server_pid, thread_cpu
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


def test_after_a_reading_each_working_rank_owes_its_servers_cpu_and_one_more_reading_at_the_share():
    # rank 0 is young (1 s of its own CPU in 2 s of life) and its first reading cost it 20 ms; rank 1 has
    # done nothing (it waits): the same reading is not counted against it
    ranks = _Ranks({10: ThreadCpu(0, 1 * S, 2.0), 11: ThreadCpu(0, 0, 2.0)})
    cost = ReadingCost({0: 10, 1: 11}, share=0.004, cpu=ranks.read, clock=lambda: ranks.now)
    cost.before()
    ranks.cpu = {10: ThreadCpu(20 * MS, 1 * S, 2.0), 11: ThreadCpu(20 * MS, 0, 2.0)}
    cost.after()
    # rank 0 owes (20 ms + one more of 20 ms) / 0.004 = 10 s of its own CPU; it has 1 s, and works at
    # 0.5 of a core over its life (no window of samples yet): 9 s / 0.5 = 18 s
    assert abs(cost.owed_s() - 18.0) < 1e-9
    ranks.now, ranks.cpu[10] = 2.0, ThreadCpu(20 * MS, 2 * S, 4.0)
    # a window now: (2 - 1) s of CPU in 2 s, 0.5 of a core; 8 s short: 16 s
    assert abs(cost.owed_s() - 16.0) < 1e-9
    ranks.now, ranks.cpu[10] = 4.0, ThreadCpu(20 * MS, 2 * S + S // 2, 6.0)
    # a loaded machine runs it at 0.25 of a core: the same debt (7.5 s) takes longer, 30 s
    assert abs(cost.owed_s() - 30.0) < 1e-9
    ranks.now, ranks.cpu[10] = 40.0, ThreadCpu(20 * MS, 10 * S, 42.0)
    assert cost.owed_s() == 0.0, "paid: 10 s of its own CPU"
    cost.before()
    ranks.cpu[10] = ThreadCpu(50 * MS, 10 * S, 42.0)
    cost.after()
    # the second reading cost 30 ms, 1.5 times the first: the next one 45 ms; (50 + 45) ms / 0.004 =
    # 23.75 s, 13.75 s short at (10 - 2.5) s / 36 s of CPU a second
    assert abs(cost.owed_s() - 13.75 / (7.5 / 36)) < 1e-9


def test_a_rank_gone_or_idle_holds_nothing_back_and_readings_while_idle_are_not_counted_against_it():
    ranks = _Ranks({10: ThreadCpu(0, S // 10, 10.0)})
    cost = ReadingCost({0: 10, 1: 11}, share=0.004, cpu=ranks.read, clock=lambda: ranks.now)  # pid 11: gone
    cost.before()
    ranks.cpu = {10: ThreadCpu(50 * MS, S // 10, 10.0)}  # 1 % of a core over its life: below IDLE_SHARE
    cost.after()
    assert cost.owed_s() == 0.0, "idle: it holds nothing back"
    ranks.now, ranks.cpu = 10.0, {10: ThreadCpu(50 * MS, S // 10 + 10 * S, 20.0)}  # one core since
    # its server's 50 ms less the 50 ms read while it was idle, plus the costliest (50 ms): 12.5 s of
    # its own CPU; it has 10.1 s: 2.4 s more at one core
    assert abs(cost.owed_s() - 2.4) < 1e-9
    cost.before()
    ranks.cpu = {10: ThreadCpu(60 * MS, S // 10 + 10 * S, 20.0)}
    cost.after()
    # working now: its 10 ms counts: (60 - 50 + 50) ms / 0.004 = 15 s, 4.9 s more at one core
    assert abs(cost.owed_s() - 4.9) < 1e-9


def test_a_small_request_is_paid_by_a_second_of_each_working_ranks_own_cpu_since_the_last():
    """The groups' status of ``collviz run``: rank 0 runs at 0.25 of a core (a loaded machine), rank
    1 waits (its CPU does not move), rank 2 has exited (pid 12: gone)."""
    ranks = _Ranks({10: ThreadCpu(0, 4 * S, 16.0), 11: ThreadCpu(0, 3 * S, 16.0)})
    pace = OwnCpuPace({0: 10, 1: 11, 2: 12}, cpu_s=1.0, cpu=ranks.read, clock=lambda: ranks.now)
    pace.asked()
    ranks.now, ranks.cpu[10] = 2.0, ThreadCpu(0, 4 * S + S // 2, 18.0)
    # rank 0: 0.5 s of its 1 s since the request, at 0.5 s / 2 s = 0.25 of a core: 0.5 s / 0.25 = 2 s more;
    # rank 1 has run 0 of its second, but it is idle (0 cores over the last 2 s): it holds nothing back
    assert abs(pace.owed_s() - 2.0) < 1e-9
    ranks.now = 2.1
    assert abs(pace.owed_s() - 1.9) < 1e-9, "within RESAMPLE_S the last answer, counted down"
    ranks.now, ranks.cpu[10] = 4.0, ThreadCpu(0, 5 * S, 20.0)
    assert pace.owed_s() == 0.0, "rank 0 has run its second"
    pace.asked()
    ranks.now, ranks.cpu[10] = 6.0, ThreadCpu(0, 5 * S + 2 * S // 10, 22.0)
    # 0.2 s of its own CPU in 2 s since (0.1 of a core): 0.8 s short, 8 s
    assert abs(pace.owed_s() - 8.0) < 1e-9


@dataclass
class _Meter:
    """A meter that owes what the test sets."""

    owed: float = 0.0

    def owed_s(self) -> float:
        return self.owed


def test_the_next_reading_is_due_after_the_paces_interval_and_once_the_meter_is_paid_but_the_first_and_a_confirming_one():
    meter, now = _Meter(owed=30.0), [100.0]
    schedule = Schedule(Pace(1.0, 10.0), meter, clock=lambda: now[0])
    assert schedule.next_in() == 0.0, "the first reading at once, whatever the meter says"
    schedule.read(busy=False)
    assert schedule.next_in() == 30.0, "the second is paid like the rest: no free reading after the first"
    now[0], meter.owed = 112.0, 0.0
    assert schedule.next_in() == 0.0, "paid, 12 s later: past the slowest pace too"
    meter.owed = 5.0
    schedule.read(busy=False)
    assert schedule.next_in() == 10.0, "paid before the pace's slowest: the pace"
    schedule.read(busy=True, confirming=True)
    assert (schedule.next_in(), schedule.held_s()) == (1.0, 0.0), "a new wait is confirmed at the fastest pace"
    schedule.read(busy=True)
    assert schedule.next_in() == 5.0, "a confirmed wait on a working rank: the fastest pace, held by the meter"
    meter.owed = 0.0
    assert schedule.next_in() == 1.0, "every rank that owes is idle (a stall): the fastest pace"
    meter.owed = 50.0
    schedule.now()
    assert schedule.next_in() == 0.0, "a rank's process ended: its end is read at once"
    assert Schedule(Pace(1.0, 10.0), clock=lambda: now[0]).held_s() == 0.0, "no meter: the pace alone"


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


def test_watch_waits_for_the_pace_then_for_the_meter_re_measured_and_shows_when_the_next_reading_comes():
    from collviz.runtime.live.snapshot import watch

    # rank 0: 1 s of its own CPU in 2 s of life, working at half a core; its first reading costs 20 ms
    ranks = _Ranks({10: ThreadCpu(0, 1 * S, 2.0)})
    cost = ReadingCost({0: 10}, share=0.004, cpu=ranks.read, clock=lambda: ranks.now)
    job = _Job([0], waits=False)
    served = iter([20 * MS, 50 * MS])

    def server_answers() -> None:
        ranks.cpu[10] = ThreadCpu(next(served), ranks.cpu[10].own_ns, ranks.cpu[10].alive_s)

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        ranks.now += seconds
        found = ranks.cpu[10]
        ranks.cpu[10] = ThreadCpu(found.server_ns, found.own_ns + int(seconds * S / 2), (found.alive_s or 0) + seconds)

    job.on_read = server_answers
    slept: list[float] = []
    shown: list[float] = []
    watch(job, lambda snapshot, next_s: shown.append(next_s), Pace(1.0, 10.0), readings=2, sleep=sleep, cost=cost)
    # it owes (20 + 20) ms / 0.004 = 10 s of its own CPU, has 1 s, at half a core: 18 s; the pace's 10 s,
    # then 4 s of CPU more at half a core (re-measured): 8 s
    assert [round(s, 9) for s in shown] == [18.0] and slept == [10.0, 8.0]
    assert job.readings == 2


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
