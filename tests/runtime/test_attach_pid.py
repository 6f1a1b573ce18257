"""``collviz attach --pid``: a job that prepared nothing, read by pid — every rank's Python stack
read with py-spy. A real job under plain torchrun (:mod:`support.bare_job`: rank 1 stalled in its
own ``slow_data_loader`` while rank 0 waits in all_reduce), read through torchrun's pid; and the
reader's rules on hand-made stacks of four ranks in two calls.

Expected lines are written from the job script (its own line numbers) and from the hand-made
stacks; py-spy's JSON and messages are as py-spy 0.4.3 wrote them for a gloo rank here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collviz.runtime.errors import UsageError
from collviz.runtime.live.pace import Pace
from collviz.runtime.live.pid_reader import PidReader
from collviz.runtime.live.pids import RankProcess, find_ranks
from collviz.runtime.live.py_spy import PTRACE_FIX, PtraceDenied, dump_threads
from collviz.runtime.live.snapshot import take_snapshot
from collviz.runtime.live.stacks import Frame, place_of
from collviz.runtime.live.unprepared import see_more
from collviz.runtime.sessions.live import pid_session
from collviz.runtime.wire.protocol import Phase, Stall

from support.bare_job import STALLED_LINE, WAITING_LINE, bare_job
from support.fr_dumps import hang_and_mismatch
from support.pid_stacks import IN_ALL_REDUCE, IN_BROADCAST, LOADING, stack_reader
from support.cli import run_cli

STACKS_ONLY = ("stacks only: start the job with torch's worker server next time (TORCH_WORKER_SERVER_SOCKET="
               "/tmp/job/rank$RANK.sock under worker_main, or start_debug_server()) and collviz attach reads every "
               "rank's Flight Recorder too (its last TORCH_FR_BUFFER_SIZE calls)")


def test_torchruns_pid_names_the_stalled_rank_its_function_and_the_call_the_other_waits_in(tmp_path):
    with bare_job(tmp_path) as job:
        started = time.monotonic()
        attached = run_cli("attach", "--headless", "--pid", str(job.process.pid), timeout=60)
        took_s = time.monotonic() - started
        document = run_cli("attach", "--headless", "--json", "--pid", str(job.pids[0]), str(job.pids[1]), timeout=60)
        status, out, err = job.finish()
    assert attached.returncode == 1, attached.stderr
    assert took_s < 60
    assert attached.stdout.splitlines() == [
        f"collviz attach: the stacks of 2 ranks (rank:pid 0:{job.pids[0]}, 1:{job.pids[1]}), read with py-spy",
        f"rank 0: now in all_reduce at job.py:{WAITING_LINE} in main",
        f"rank 1: in no collective, at job.py:{STALLED_LINE} in slow_data_loader",
        f"waiting: all_reduce at job.py:{WAITING_LINE} in main: rank 0 waits for rank 1",
        f"  rank 1 is missing from the call, at job.py:{STALLED_LINE} in slow_data_loader",
        STACKS_ONLY,
    ]
    assert document.returncode == 1, document.stderr
    assert document.stderr == STACKS_ONLY + "\n"
    found = json.loads(document.stdout)
    assert found["waits"] == [{"call": f"all_reduce at job.py:{WAITING_LINE} in main", "waiting": [0], "missing": [1],
                               "stacks": {"1": f"job.py:{STALLED_LINE} in slow_data_loader"}}]
    assert [rank.get("at") for rank in found["ranks"]] == [None, f"job.py:{STALLED_LINE} in slow_data_loader"]
    assert (status, sorted(out.split())) == (0, ["0", "1", "finished", "finished"]), err  # the job went on


def test_ranks_in_two_calls_wait_for_every_rank_not_in_theirs_each_named_at_its_own_line(monkeypatch):
    monkeypatch.setattr(Path, "exists", lambda self: True)  # the hand-made pids are running
    stuck = {0: IN_ALL_REDUCE, 1: LOADING, 2: IN_ALL_REDUCE, 3: IN_BROADCAST}
    reader, reads = stack_reader([stuck])
    snapshot = take_snapshot(reader, 0.0, sleep=lambda s: None)
    assert snapshot.text().splitlines() == [
        "rank 0: now in all_reduce at train.py:30 in step",
        "rank 1: in no collective, at train.py:12 in load_batch",
        "rank 2: now in all_reduce at train.py:30 in step",
        "rank 3: now in broadcast at train.py:41 in sync",
        "waiting: all_reduce at train.py:30 in step: ranks 0, 2 wait for ranks 1, 3",
        "  rank 1 is missing from the call, at train.py:12 in load_batch",
        "  rank 3 is missing from the call, at train.py:41 in sync, inside broadcast (distributed_c10d.py:2801)",
        "waiting: broadcast at train.py:41 in sync: rank 3 waits for ranks 0–2",
        "  rank 0 is missing from the call, at train.py:30 in step, inside all_reduce (distributed_c10d.py:3252)",
        "  rank 1 is missing from the call, at train.py:12 in load_batch",
        "  rank 2 is missing from the call, at train.py:30 in step, inside all_reduce (distributed_c10d.py:3252)",
    ]
    assert snapshot.exit_status == 1
    assert sorted(reads) == sorted([100, 101, 102, 103] * 2)  # every rank read twice, never a third time for stacks


def test_a_call_every_rank_left_is_one_step_and_entering_it_again_is_the_next(monkeypatch):
    monkeypatch.setattr(Path, "exists", lambda self: True)
    waiting = {0: IN_ALL_REDUCE, 1: LOADING, 2: IN_ALL_REDUCE, 3: IN_ALL_REDUCE}
    everyone = {rank: IN_ALL_REDUCE for rank in range(4)}
    apart = {rank: LOADING for rank in range(4)}
    reader, _ = stack_reader([waiting, waiting, everyone, apart, apart, waiting])
    session = pid_session(reader, pace=Pace(0.0, 0.0))
    session.start()
    events = [event for _ in range(6) for event in session.poll(0.0)]
    session.stop()
    steps = [(event.index, event.edge, event.rank) for event in events if isinstance(event, Phase)]
    assert steps == ([(0, "begin", rank) for rank in (0, 2, 3)] + [(0, "begin", 1)]
                     + [(0, "end", rank) for rank in range(4)] + [(1, "begin", rank) for rank in (0, 2, 3)])
    names = {event.name for event in events if isinstance(event, Phase) and event.edge == "begin"}
    assert names == {"all_reduce at train.py:30 in step"}
    stalls = [event for event in events if isinstance(event, Stall)]
    assert [(stall.waiting, stall.elsewhere) for stall in stalls][:1] == [
        ([0, 2, 3], ["rank 1 is missing from the call, at train.py:12 in load_batch"])]


def test_native_frames_name_where_the_rank_waits_in_cpp():
    frames = [("0x7f81a02a3f16", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0),
              ("pthread_cond_wait", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0),
              ("std::condition_variable::wait", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30", 0),
              ("c10d::Work::wait", "/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so", 0)]
    native = [Frame(file, line, name, native=True) for name, file, line in frames]
    place = place_of([native + IN_ALL_REDUCE[0]])
    assert place.collective is not None and place.collective.name == "all_reduce"
    assert place.line == "train.py:30 in step, inside c10d::Work::wait (libtorch_cpu.so)"


def _fake_py_spy(tmp_path: Path, said: str, status: int) -> str:
    script = tmp_path / "py-spy"
    script.write_text(f"#!/bin/sh\necho '{said}'\nexit {status}\n")
    script.chmod(0o755)
    return str(script)


def test_py_spys_refusal_is_the_ptrace_fix_in_one_line(tmp_path):
    py_spy = _fake_py_spy(tmp_path, "Permission Denied: Try running again with elevated permissions by going "
                                    "'sudo env \"PATH=$PATH\" !!'", 1)
    with pytest.raises(PtraceDenied) as denied:
        dump_threads(os.getpid(), py_spy=py_spy)
    assert str(denied.value) == PTRACE_FIX
    assert "SYS_PTRACE" in PTRACE_FIX and "/proc/sys/kernel/yama/ptrace_scope" in PTRACE_FIX
    reader = PidReader([RankProcess(0, os.getpid(), {"RANK": "0"})],
                       dump=lambda pid, native, timeout_s: dump_threads(pid, native, timeout_s, py_spy))
    with pytest.raises(UsageError) as refused:
        reader.check()
    assert str(refused.value) == f"pid {os.getpid()} (rank 0): {PTRACE_FIX}"


@pytest.mark.parametrize("pid, expected", [
    ("999999999", "collviz: error: pid 999999999: no such process"),
    ("0", "collviz: error: pid 0: no such process"),
])
def test_a_pid_that_is_no_process_is_one_line_and_exit_2(pid, expected):
    done = run_cli("attach", "--headless", "--pid", pid)
    assert (done.returncode, done.stderr.strip(), done.stdout) == (2, expected, "")


def test_a_pid_without_ranks_and_two_pids_of_one_rank_are_refused():
    lone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.DEVNULL,
                            env={k: v for k, v in os.environ.items() if k != "RANK"})
    twins = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.DEVNULL,
                              env={**os.environ, "RANK": "3"}) for _ in range(2)]
    try:
        with pytest.raises(UsageError, match=rf"^pid {lone.pid}: neither a rank \(no RANK in its environment\) nor a "
                                             r"launcher with ranks among its child processes"):
            find_ranks([lone.pid])
        with pytest.raises(UsageError, match=rf"^pids {twins[0].pid} and {twins[1].pid} are both rank 3"):
            find_ranks([twins[0].pid, twins[1].pid])
        assert [(p.rank, p.pid) for p in find_ranks([twins[0].pid])] == [(3, twins[0].pid)]
    finally:
        for process in [lone, *twins]:
            process.kill()
            process.wait()


def test_dumps_torch_wrote_since_the_ranks_started_are_read_and_named_for_replay(tmp_path):
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.DEVNULL)
    try:
        prefix = tmp_path / "fr_rank_"
        ranks = [RankProcess(r, rank.pid, {"RANK": str(r), "TORCH_FR_DUMP_TEMP_FILE": str(prefix)}) for r in range(4)]
        assert see_more(ranks) == STACKS_ONLY
        written = hang_and_mismatch(tmp_path / "written")
        for r in range(4):
            Path(f"{prefix}{r}").write_bytes((written / f"rank_{r}.json").read_bytes())
        listed = " ".join(f"{prefix}{r}" for r in range(4))
        assert see_more(ranks) == (
            "torch dumped the Flight Recorder of ranks 0–3 on a timeout: they say collective mismatch at call #3 on "
            "group 0 (default_pg): rank 3 called broadcast(float32 ×8), where ranks 0–2 called all_reduce(float32 ×8); "
            f"collviz replay {listed} shows every call")
        for r in range(4):
            os.utime(f"{prefix}{r}", (0, 0))  # dumps of an earlier job, older than the ranks
        assert see_more(ranks) == STACKS_ONLY
    finally:
        rank.kill()
        rank.wait()


ONE_SOURCE = ("attach reads one of: TARGET (the job's sockets or store), --pid PID … (a job that prepared nothing), "
              "--listen HOST:PORT (its relays)")
"""What attach says when it is given no source, or more than one."""


@pytest.mark.parametrize("args, expected", [
    (["--headless"], ONE_SOURCE),
    (["--headless", "/tmp/job", "--pid", "1"], ONE_SOURCE),
    (["--headless", "--native", "/tmp/job"], "--native adds C++ frames to the stacks of --pid"),
])
def test_target_and_pid_are_one_or_the_other(args, expected, capsys):
    from collviz.app.cli import main

    assert main(["attach", *args]) == 2
    assert capsys.readouterr().err.strip() == f"collviz: error: {expected}"
