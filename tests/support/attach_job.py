"""A user's own 2-rank gloo job under plain ``torchrun`` that opens its worker servers both with
``worker_main`` (Unix sockets named after each rank) and ``start_debug_server()`` (TCP, addresses
in the job's store), does :data:`CALLS_BEFORE` all_reduces of :data:`ELEMENTS` float32 ones, then
stalls rank 1 in its own function (``slow_data_loader``) while rank 0 waits in the next all_reduce;
released, both finish that call and wait to be let go. What ``collviz attach`` reads in tests.

Expected values are written from the job script below (its calls and its own line numbers).
"""

from __future__ import annotations

import json
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

from collviz.runtime.live.workers import Answer, Worker, ask_all

__all__ = ["JOB", "SLOW_DATA_LOADER", "CALLS_BEFORE", "line_of", "ELEMENTS", "STALLED_LINE", "DEADLINE_S", "StalledJob", "stalled_job", "fr_answer",
           "WORKERS", "STACK", "asking", "KeptEvents"]

CALLS_BEFORE = 5
"""All_reduces every rank completes before rank 1 stalls."""

ELEMENTS = 4
"""Elements of each all_reduce's tensor (float32 ones)."""

SLOW_DATA_LOADER = """def slow_data_loader():
        (folder / "stalling").touch()
        while not (folder / "release").exists():
            time.sleep(0.05)  # the stalled line
"""
"""The stalled rank's own function, indented for a job's text at its top level (of ``folder``, the
job's first argument): it touches ``stalling``, then waits until the test touches ``release``."""

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

    {SLOW_DATA_LOADER}
    def main():
        start_debug_server(port=int(sys.argv[2]))
        (folder / "store").write_text(f"{{os.environ['MASTER_ADDR']}}:{{os.environ['MASTER_PORT']}}")
        dist.init_process_group("gloo")
        try:
            rank = dist.get_rank()
            for _ in range({CALLS_BEFORE}):
                dist.all_reduce(torch.ones({ELEMENTS}))
            if rank == 1:
                slow_data_loader()
            else:
                (folder / "waiting").touch()
            dist.all_reduce(torch.ones({ELEMENTS}))
            os.write(1, f"finished {{rank}}\\n".encode())  # one write: the ranks share torchrun's stdout
            (folder / f"done{{rank}}").touch()
            wait_for("exit")
        finally:
            dist.destroy_process_group()

    if __name__ == "__main__":
        with worker_main():
            main()
''')


def line_of(job: str, marker: str, occurrence: int = 0) -> int:
    """The number of the line of ``job`` holding ``marker`` (its ``occurrence``-th, from 0)."""
    return [number for number, line in enumerate(job.splitlines(), 1) if marker in line][occurrence]


STALLED_LINE = line_of(JOB, "the stalled line")
DEADLINE_S = 60


Inside = dict[Path, tuple[str, int]]
"""A rank's worker server socket → the call (its group's name, its number) that rank must be inside."""


def wait_for(*paths: Path, job: subprocess.Popen, inside: Inside | None = None) -> None:
    """Wait until every path exists (and, with ``inside``, until the worker server at each socket
    records the call given for it: that rank is inside it); fail if the job ends first or
    :data:`DEADLINE_S` passes."""
    deadline = time.monotonic() + DEADLINE_S
    while not (all(path.exists() for path in paths)
               and all(_in_the_call(path, *call) for path, call in (inside or {}).items())):
        if job.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"the job did not reach {[p.name for p in paths]}: {job.poll()=}")
        time.sleep(0.05)


def _in_the_call(socket_path: Path, group: str, seq: int) -> bool:
    """Whether the Flight Recorder of the rank at ``socket_path`` holds call #``seq`` of group
    ``group`` (entered; a stalled peer keeps it from completing)."""
    answer = ask_all([Worker(0, str(socket_path))], "fr_trace_json", timeout_s=5)[0]
    entries = json.loads(answer.body).get("entries", []) if answer.body else []
    return any(entry.get("collective_seq_id") == seq and (entry.get("process_group") or [None])[0] == group
               for entry in entries)


@dataclass
class StalledJob:
    """The running job: its folder (sockets ``rank0.sock``, ``rank1.sock``; ``store``: its
    ``MASTER_ADDR:MASTER_PORT``) and its torchrun process."""

    folder: Path
    process: subprocess.Popen
    ranks: int = 2

    def release(self) -> None:
        """Let the stalled rank out of its stall; wait until every rank completed its calls after it."""
        (self.folder / "release").touch()
        wait_for(*(self.folder / f"done{r}" for r in range(self.ranks)), job=self.process)

    def finish(self) -> tuple[int, str, str]:
        """Let both ranks end; torchrun's exit status, stdout and stderr."""
        (self.folder / "exit").touch()
        out, err = self.process.communicate(timeout=DEADLINE_S)
        return self.process.returncode, out, err


@contextmanager
def stalled_job(folder: Path, job_text: str = JOB, nproc: int = 2, stalled: int = 1,
                inside: dict[int, tuple[str, int]] | None = None) -> Iterator[StalledJob]:
    """``job_text`` (:data:`JOB` unless given) under ``torchrun --standalone --nproc-per-node
    nproc`` in ``folder``, once rank ``stalled`` is in ``slow_data_loader``, every other rank has
    touched ``waiting<r>`` (``waiting`` for :data:`JOB`'s rank 0) and each rank of ``inside`` is
    inside its call by its own recorder (default: rank 0 in all_reduce #CALLS_BEFORE+1 on the
    default group) — a condition, not a pause: on a loaded machine a rank may take any time to get
    there; killed at the end if still running."""
    script = folder / "job.py"
    script.write_text(job_text)
    waiting = ["waiting"] if job_text is JOB else [f"waiting{r}" for r in range(nproc) if r != stalled]
    inside = inside if inside is not None else {0: ("0", CALLS_BEFORE + 1)}
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    with socket.socket() as probe:  # a free port for torch's frontend, which collviz does not use
        probe.bind(("127.0.0.1", 0))
        frontend_port = probe.getsockname()[1]
    job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                            str(nproc), str(script), str(folder), str(frontend_port)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=environment, stdin=subprocess.DEVNULL)
    try:
        wait_for(folder / "stalling", *(folder / name for name in waiting),
                 *(folder / f"rank{r}.sock" for r in range(nproc)), job=job,
                 inside={folder / f"rank{r}.sock": call for r, call in inside.items()})
        yield StalledJob(folder, job, nproc)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()


# ---- hand-made answers of worker servers ----------------------------------------------------------


def fr_answer(calls: int, inside: bool, backend: str = "gloo") -> bytes:
    """A Flight Recorder answer of ``calls`` all_reduces on the default group, the last one not
    completed when ``inside``."""
    entries = [{"collective_seq_id": seq, "profiling_name": f"{backend}:all_reduce", "process_group": ["0", "default_pg"],
                "input_sizes": [[4]], "output_sizes": [[4]], "input_dtypes": ["Float"], "output_dtypes": ["Float"],
                "time_created_ns": 1000 * seq, "retired": not (inside and seq == calls), "state": "scheduled",
                "is_p2p": False} for seq in range(1, calls + 1)]
    return json.dumps({"version": "2.10", "pg_config": {"": {"name": "", "desc": "", "ranks": "[0, 1]"}},
                       "pg_status": {}, "entries": entries}).encode()


EMPTY_RECORDER = b'{"comm_lib_version": "", "nccl_comm_state": {}, "pg_config": {}, "pg_status": {}, "version": "2.10"}'
"""A recorder that holds no call yet, answered as torch 2.11.0+cu130 answered it on an NVIDIA H200
(2026-11-28; ``_dump_nccl_trace_json`` of a rank before its first call, keys as printed by the
probe): no ``entries`` key at all, and empty groups. On an NCCL job, torch's ``fr_trace_json``
(the recorder of every backend but NCCL) answers this for the whole run."""

WORKERS = [Worker(0, "rank0.sock"), Worker(1, "rank1.sock")]
STACK = '''Current thread 0x00007f74a613b6c0 (most recent call first):
  <no Python frame>

Thread 0x00007f74c71eab80 (most recent call first):
  File "/usr/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252 in all_reduce
  File "/home/me/train.py", line 16 in step
  File "/home/me/train.py", line 30 in <module>
'''


def asking(readings: list[dict[int, bytes | None]], recorder: str = "fr_trace_json"):
    """An ``ask`` that gives each reading's Flight Recorder answers in turn from ``recorder``
    (the other recorder answers as an empty one does for gloo's, 404 for NCCL's: a torch without
    NCCL), and
    STACK for stacks."""
    asked: list[tuple[str, list[int]]] = []

    def ask(workers, handler, timeout_s):
        asked.append((handler, [w.rank for w in workers]))
        if handler == "dump_traceback":
            return {w.rank: Answer(w.rank, STACK.encode(), status=200) for w in workers}
        if handler != recorder:
            if handler == "dump_nccl_trace_json":
                return {w.rank: Answer(w.rank, None, "dump_nccl_trace_json answered 404", status=404) for w in workers}
            return {w.rank: Answer(w.rank, EMPTY_RECORDER, status=200) for w in workers}
        bodies = readings[min(len([h for h, _ in asked if h == recorder]), len(readings)) - 1]
        return {w.rank: Answer(w.rank, bodies[w.rank], "" if bodies[w.rank] else "no answer within 2 s",
                               status=200 if bodies[w.rank] else None) for w in workers}

    return ask, asked


class KeptEvents:
    """A feed's sink (:class:`~collviz.runtime.live.feed.Sink`) that keeps the events, its own
    stamped as rank -1."""

    def __init__(self) -> None:
        self.events: list = []

    def take(self, event) -> None:
        """Keep a rank's event."""
        self.events.append(event)

    def emit(self, event_type, **fields) -> None:
        """Keep an event of the session's own."""
        self.events.append(event_type(run="t", rank=-1, seq=len(self.events), t_ns=0, **fields))
