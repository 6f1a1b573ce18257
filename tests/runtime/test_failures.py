"""A dead rank or an interrupt: every process gone within seconds, the trace still readable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collviz.runtime.wire.protocol import Collective, ProcessExit, RankEnd, RankStart, RunEnd
from collviz.runtime.wire.trace import read_trace

from support.paths import SCENARIOS
from support.processes import alive, wait_for_collectives


LONG_RUN = ["all-reduce", "--gpus", "4", "--backend", "gloo", "--size", "4MiB", "--iters", "2000", "--headless"]


def _start(trace_path, tmpdir: Path | None = None) -> subprocess.Popen:
    """Start the long run; ``tmpdir`` (TMPDIR) is where its run folder is made."""
    env = None if tmpdir is None else {**os.environ, "TMPDIR": str(tmpdir)}
    return subprocess.Popen(
        [sys.executable, "-m", "collviz.app.cli", *LONG_RUN, "--record", str(trace_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, env=env,
    )


def _communicate_or_dump_stacks(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """``proc.communicate(timeout)``; past the timeout, fail with every thread's stack of the
    launcher (collviz dumps them on SIGUSR1), so a rare hang says where it hung."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(1.0)
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"still running {timeout:g} s after the signal; its threads:\n{err[-6000:]}\n{out[-2000:]}")


def _children_of(pid: int) -> list[int]:
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().split(")")[-1].split()[1]) == pid:
                        children.append(int(entry))
            except (FileNotFoundError, ProcessLookupError):
                continue
    return children


def test_sigkill_of_one_worker_ends_the_run_and_keeps_the_trace(tmp_path):
    trace_path = tmp_path / "killed.cvz"
    proc = _start(trace_path)
    pids = wait_for_collectives(trace_path, proc)
    os.kill(pids[2], signal.SIGKILL)
    killed_at = time.monotonic()
    out, err = proc.communicate(timeout=10)
    assert time.monotonic() - killed_at < 10
    assert proc.returncode != 0
    assert "rank 2 was killed by SIGKILL" in err
    assert not [pid for pid in pids.values() if alive(pid)]
    assert not _children_of(proc.pid)
    events = read_trace(trace_path).events
    assert any(isinstance(e, ProcessExit) and e.target == 2 and e.signal == "SIGKILL" for e in events)
    end = events[-1]
    assert isinstance(end, RunEnd) and end.status == "failed" and "rank 2" in end.detail


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_stop_signals_end_the_run_like_ctrl_c(tmp_path, signum):
    """Ctrl-C, and what timeout/systemd/SLURM send: workers gone within seconds, the summary and
    a RunEnd naming the signal, status 128 + signal, and no run folder left behind."""
    trace_path, run_folders = tmp_path / "interrupted.cvz", tmp_path / "tmp"
    run_folders.mkdir()
    proc = _start(trace_path, run_folders)
    pids = wait_for_collectives(trace_path, proc)
    proc.send_signal(signum)
    interrupted_at = time.monotonic()
    out, err = _communicate_or_dump_stacks(proc, timeout=10)
    assert time.monotonic() - interrupted_at < 3
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum
    assert not [pid for pid in pids.values() if alive(pid)]
    assert f"interrupted by {name}" in err and "result: interrupted" in out
    events = read_trace(trace_path).events
    assert isinstance(events[-1], RunEnd) and events[-1].status == "interrupted" and name in events[-1].detail
    assert list(run_folders.iterdir()) == []


def test_ctrl_c_works_even_when_started_with_sigint_ignored(tmp_path):
    """A parent that ignores SIGINT (this test runner, at times; a script's background job) passes
    the ignoring on; collviz installs its own handler, so SIGINT still stops the run."""
    trace_path = tmp_path / "ignored.cvz"
    proc = subprocess.Popen(
        [sys.executable, "-m", "collviz.app.cli", *LONG_RUN, "--record", str(trace_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    wait_for_collectives(trace_path, proc)
    proc.send_signal(signal.SIGINT)
    _, err = _communicate_or_dump_stacks(proc, timeout=10)
    assert proc.returncode == 128 + signal.SIGINT and "interrupted by SIGINT" in err


def test_an_exception_in_one_rank_is_named_and_ends_the_run(tmp_path):
    """The desync scenario with fault "raise": rank 2 raises while the others enter all_reduce."""
    desync = (SCENARIOS / "desync.toml").read_text()
    crash = tmp_path / "crash.toml"
    crash.write_text(desync.replace('name = "desync"', 'name = "crash"').replace('fault = "swap"', 'fault = "raise"')
                     .replace('swap_with = "all_gather"\n', ""))
    trace_path = tmp_path / "crash.cvz"
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "collviz.app.cli", str(crash), "--gpus", "4", "--backend", "gloo", "--headless",
         "--record", str(trace_path)], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert time.monotonic() - started < 30
    assert result.returncode == 1
    assert "rank 2 failed during phase 2" in result.stderr
    assert "RuntimeError: injected failure: rank 2 raises" in result.stderr
    events = read_trace(trace_path).events
    pids = [e.pid for e in events if isinstance(e, RankStart)]
    assert len(pids) == 4 and not [pid for pid in pids if alive(pid)]
    [error] = [e for e in events if isinstance(e, RankEnd) and e.status == "error" and e.rank == 2]
    assert error.phase == 2 and "injected failure" in error.error
    assert {e.rank for e in events if isinstance(e, Collective) and e.group_seq == 1 and e.edge == "end"} == {0, 1, 2, 3}
    assert isinstance(events[-1], RunEnd) and events[-1].status == "failed"
