"""A user's own 2-rank gloo job under plain ``torchrun`` that opens its worker servers both with
``worker_main`` (Unix sockets named after each rank) and ``start_debug_server()`` (TCP, addresses
in the job's store), does :data:`CALLS_BEFORE` all_reduces of :data:`ELEMENTS` float32 ones, then
stalls rank 1 in its own function (``slow_data_loader``) while rank 0 waits in the next all_reduce;
released, both finish that call and wait to be let go. What ``collviz attach`` reads in tests.

Expected values are written from the job script below (its calls and its own line numbers).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["JOB", "CALLS_BEFORE", "ELEMENTS", "STALLED_LINE", "DEADLINE_S", "StalledJob", "stalled_job"]

CALLS_BEFORE = 5
"""All_reduces every rank completes before rank 1 stalls."""

ELEMENTS = 4
"""Elements of each all_reduce's tensor (float32 ones)."""

JOB = textwrap.dedent(f'''
    import os, sys, time, types
    from pathlib import Path
    import torch
    import torch.distributed as dist
    from torch.distributed.elastic.control_plane import worker_main
    try:
        import tabulate
    except ImportError:  # torch's HTML frontend (rank 0) imports it; collviz reads the workers, never the frontend
        sys.modules["tabulate"] = types.SimpleNamespace(tabulate=lambda *args, **kwargs: "")
    from torch.distributed.debug import start_debug_server

    folder = Path(sys.argv[1])
    os.environ["TORCH_WORKER_SERVER_SOCKET"] = str(folder / f"rank{{os.environ['RANK']}}.sock")

    def wait_for(name):
        while not (folder / name).exists():
            time.sleep(0.05)

    def slow_data_loader():
        (folder / "stalling").touch()
        while not (folder / "release").exists():
            time.sleep(0.05)  # the stalled line

    def main():
        start_debug_server(port=int(sys.argv[2]))
        (folder / "store").write_text(f"{{os.environ['MASTER_ADDR']}}:{{os.environ['MASTER_PORT']}}")
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        for _ in range({CALLS_BEFORE}):
            dist.all_reduce(torch.ones({ELEMENTS}))
        if rank == 1:
            slow_data_loader()
        else:
            (folder / "waiting").touch()
        dist.all_reduce(torch.ones({ELEMENTS}))
        print(f"finished {{rank}}", flush=True)
        (folder / f"done{{rank}}").touch()
        wait_for("exit")
        dist.destroy_process_group()

    if __name__ == "__main__":
        with worker_main():
            main()
''')

STALLED_LINE = next(number for number, line in enumerate(JOB.splitlines(), 1) if "the stalled line" in line)
DEADLINE_S = 60


def wait_for(*paths: Path, job: subprocess.Popen) -> None:
    """Wait until every path exists; fail if the job ends first or :data:`DEADLINE_S` passes."""
    deadline = time.monotonic() + DEADLINE_S
    while not all(path.exists() for path in paths):
        if job.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"the job did not reach {[p.name for p in paths]}: {job.poll()=}")
        time.sleep(0.05)


@dataclass
class StalledJob:
    """The running job: its folder (sockets ``rank0.sock``, ``rank1.sock``; ``store``: its
    ``MASTER_ADDR:MASTER_PORT``) and its torchrun process."""

    folder: Path
    process: subprocess.Popen

    def release(self) -> None:
        """Let rank 1 out of its stall; wait until both ranks completed the call after it."""
        (self.folder / "release").touch()
        wait_for(self.folder / "done0", self.folder / "done1", job=self.process)

    def finish(self) -> tuple[int, str, str]:
        """Let both ranks end; torchrun's exit status, stdout and stderr."""
        (self.folder / "exit").touch()
        out, err = self.process.communicate(timeout=DEADLINE_S)
        return self.process.returncode, out, err


@contextmanager
def stalled_job(folder: Path) -> Iterator[StalledJob]:
    """The job under ``torchrun --standalone --nproc-per-node 2`` in ``folder``, once rank 1 is in
    ``slow_data_loader`` and rank 0 in all_reduce #CALLS_BEFORE+1; killed at the end if still running."""
    script = folder / "job.py"
    script.write_text(JOB)
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    with socket.socket() as probe:  # a free port for torch's frontend, which collviz does not use
        probe.bind(("127.0.0.1", 0))
        frontend_port = probe.getsockname()[1]
    job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                            str(script), str(folder), str(frontend_port)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=environment, stdin=subprocess.DEVNULL)
    try:
        wait_for(folder / "stalling", folder / "waiting", folder / "rank0.sock", folder / "rank1.sock", job=job)
        time.sleep(0.3)  # rank 0 goes from its marker into the all_reduce
        yield StalledJob(folder, job)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
