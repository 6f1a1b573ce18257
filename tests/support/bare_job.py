"""A user's own 2-rank gloo job under plain ``torchrun`` that prepared nothing for collviz (no
worker server, no Flight Recorder settings): after :data:`CALLS_BEFORE` all_reduces, rank 1 stalls
in its own function (``slow_data_loader``, blocked opening a FIFO until the test writes to it)
while rank 0 waits in the next all_reduce. What ``collviz attach --pid`` reads in tests.

Expected lines are written from the job script below (its own line numbers); a job is known to be
stalled when py-spy itself (the reference, read here without collviz) shows rank 0 in
``all_reduce`` and rank 1 in ``slow_data_loader``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["JOB", "CALLS_BEFORE", "STALLED_LINE", "WAITING_LINE", "DEADLINE_S", "BareJob", "bare_job", "py_spy_dump"]

CALLS_BEFORE = 3
"""All_reduces every rank completes before rank 1 stalls."""

JOB = textwrap.dedent(f'''
    import os
    import sys
    import torch
    import torch.distributed as dist

    def slow_data_loader(release):
        with open(release) as fifo:  # the stalled line
            return torch.ones(4) * len(fifo.read())

    def main():
        release = sys.argv[1]
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        for _ in range({CALLS_BEFORE}):
            dist.all_reduce(torch.ones(4))
        batch = slow_data_loader(release) if rank == 1 else torch.ones(4)
        dist.all_reduce(batch)  # the waiting line
        os.write(1, f"finished {{rank}}\\n".encode())  # one write: the two ranks share torchrun's stdout
        dist.destroy_process_group()

    if __name__ == "__main__":
        main()
''')

STALLED_LINE = next(number for number, line in enumerate(JOB.splitlines(), 1) if "the stalled line" in line)
WAITING_LINE = next(number for number, line in enumerate(JOB.splitlines(), 1) if "the waiting line" in line)
DEADLINE_S = 120


def py_spy_dump(pid: int) -> tuple[int, list]:
    """py-spy's own JSON dump of ``pid`` (the reference): its exit status and threads."""
    py_spy = Path(sys.executable).parent / "py-spy"
    done = subprocess.run([str(py_spy), "dump", "--pid", str(pid), "--json", "--nonblocking"], capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)
    return done.returncode, json.loads(done.stdout) if done.returncode == 0 else [done.stderr or done.stdout]


def _functions(pid: int) -> set[str]:
    status, threads = py_spy_dump(pid)
    return {frame["name"] for thread in threads for frame in thread["frames"]} if status == 0 else set()


def _ranks(launcher: int) -> dict[int, int]:
    """rank → pid of the launcher's children, read from /proc here."""
    ranks = {}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "stat").read_text().rsplit(")", 1)[1].split()[1] == str(launcher):
                environ = dict(item.split("=", 1) for item in (entry / "environ").read_text().split("\0") if "=" in item)
                ranks[int(environ["RANK"])] = int(entry.name)
        except (OSError, KeyError):
            continue
    return ranks


@dataclass
class BareJob:
    """The running job: its torchrun process, each rank's pid and the FIFO that releases rank 1."""

    process: subprocess.Popen
    pids: dict[int, int]
    release_path: Path

    def finish(self) -> tuple[int, str, str]:
        """Release rank 1; torchrun's exit status, stdout and stderr once the job ended."""
        with open(self.release_path, "w") as fifo:
            fifo.write("go")
        out, err = self.process.communicate(timeout=DEADLINE_S)
        return self.process.returncode, out, err


@contextmanager
def bare_job(folder: Path) -> Iterator[BareJob]:
    """The job under ``python -m torch.distributed.run --standalone --nproc-per-node 2`` in
    ``folder``, once py-spy shows rank 0 in all_reduce and rank 1 in slow_data_loader (a condition,
    not a pause); killed at the end if still running."""
    script, release = folder / "job.py", folder / "release"
    script.write_text(JOB)
    os.mkfifo(release)
    job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                            str(script), str(release)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "OMP_NUM_THREADS": "1"}, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            pids = _ranks(job.pid)
            if pids and "Permission Denied" in str(py_spy_dump(pids[min(pids)])[1]):
                pytest.skip("py-spy may not read the job's processes here (no ptrace permission)")
            if len(pids) == 2 and "all_reduce" in _functions(pids[0]) and "slow_data_loader" in _functions(pids[1]):
                break
            if job.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the job never stalled: {job.poll()=}")
            time.sleep(0.2)
        yield BareJob(job, pids, release)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
