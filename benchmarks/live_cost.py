"""What reading a running job live costs its ranks, per thread: the CPU of torch's worker-server
threads (``pt_workerserver``: building each answer) ÷ the CPU of the rank's own threads (its loop,
gloo's), each read from ``/proc/PID/task/*/schedstat``.

The job: 2 gloo ranks whose calls never stop (an all_reduce of 1,024 floats again and again, the
ranks ending after the same call), Flight Recorder at 2,000 calls. It runs for an amount of the
ranks' *own CPU* (``--cpu-seconds`` of its loop, either rank's), not of wall time, so that a loaded
machine, which gives the ranks less of a core, runs the same job and the same readings, only
slower. Measured side by side in one run:

- plain torchrun, its worker servers open, nobody reading (the floor: what an open server costs);
- the same while ``collviz attach --headless --watch`` reads it (its own pace: every --slowest
  seconds while no rank waits, once the ranks' CPU has paid for the next reading), and at
  ``--slowest 1``;
- ``collviz run --headless --nproc 2`` of the same script (its live readings of its own ranks).

While each job runs, this script samples every rank's threads from outside every 0.1 s (costing
the ranks nothing), so that a reading shows as a burst of its server threads' CPU: the first
burst is the first reading, the fixed cost of attaching (the whole buffer, paid before the ranks'
CPU could pay for it); what comes after is the steady cost, as a share of the rank's own CPU since
that first reading ended. Printed per case (the worse rank): the first reading's server CPU in ms,
the steady share, the whole share, the readings seen, and the ratio to the floor. The line to meet:
0.5 % of a rank's CPU.

    python benchmarks/live_cost.py [--cpu-seconds 20] [--quick]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

JOB = textwrap.dedent('''
    import os, sys, time
    from pathlib import Path
    import torch
    import torch.distributed as dist

    cpu_seconds, out = float(sys.argv[1]), Path(sys.argv[2])
    serve = os.environ.get("LIVE_COST_SOCKETS")
    (out / f"rank{os.environ['RANK']}.pid").write_text(str(os.getpid()))  # sampled from before its server opens

    def main():
        dist.init_process_group("gloo")
        tensor = torch.ones(1024)
        calls, end = 0, time.process_time() + cpu_seconds
        while True:  # element 0 carries each rank's "my CPU is spent": every rank stops after the same call
            tensor[0] = float(calls % 64 == 0 and time.process_time() >= end)
            dist.all_reduce(tensor)
            calls += 1
            if tensor[0] > 0:
                break
        (out / f"rank{dist.get_rank()}.calls").write_text(str(calls))
        dist.barrier()
        dist.destroy_process_group()

    if serve:
        from torch.distributed.elastic.control_plane import worker_main
        os.environ["TORCH_WORKER_SERVER_SOCKET"] = f"{serve}/rank{os.environ['RANK']}.sock"
        with worker_main():
            main()
    else:
        main()
''')

SERVER_THREAD = "pt_workerserver"
SAMPLE_S = 0.1
"""How often each rank's threads are sampled."""
QUIET_S = 0.5
"""A pause this long in the server threads' CPU ends one reading's burst."""
QUICK_CPU_S = 0.5
"""``--quick``'s loops, in seconds of a rank's own CPU: every case and every path of this script in
a few seconds (the test suite runs it; its figures mean nothing). 3 s loops made it the suite's
second costliest benchmark smoke run (2026-11-28)."""


def _threads(pid: int) -> tuple[int, int] | None:
    """(server threads' CPU, every other thread's CPU) of ``pid`` in ns; None once it is gone."""
    server = own = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tasks:
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            ran = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if name == SERVER_THREAD:
            server += ran
        else:
            own += ran
    return server, own


@dataclass
class _Rank:
    """One rank's samples: (monotonic s, server ns, own ns)."""

    pid: int
    samples: list[tuple[float, int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class Cost:
    """One rank's cost, in ns: the first reading's server CPU, the server and own CPU as it ended,
    and at the loop's end; the readings seen, the calls made."""

    first_ns: int
    server_at_first_ns: int
    own_at_first_ns: int
    server_ns: int
    own_ns: int
    readings: int
    calls: int

    @property
    def steady(self) -> float:
        """Server CPU after the first reading ÷ own CPU after it."""
        own = self.own_ns - self.own_at_first_ns
        return (self.server_ns - self.server_at_first_ns) / own if own > 0 else 0.0

    @property
    def whole(self) -> float:
        """All server CPU ÷ all own CPU."""
        return self.server_ns / self.own_ns if self.own_ns else 0.0


def cost_of(samples: list[tuple[float, int, int]], calls: int, floor_ns: int = 0) -> Cost:
    """The bursts of server CPU in ``samples`` (a burst: growth, ended by :data:`QUIET_S` without
    any; growth of at most ``floor_ns`` a sample is the open server's own, not a reading), from the
    first sample holding a server thread (its start is no reading)."""
    bursts: list[tuple[int, int, int]] = []  # server ns as it began, server and own ns as it ended
    open_since: float | None = None
    last_growth = 0.0
    served = [sample for sample in samples if sample[1] > 0] or samples[-1:]
    for (_, s0, _), (t1, s1, o1) in zip(served, served[1:]):
        if s1 - s0 > floor_ns:
            if open_since is None:
                open_since = t1
                bursts.append((s0, s1, o1))
            else:
                bursts[-1] = (bursts[-1][0], s1, o1)
            last_growth = t1
        elif open_since is not None and t1 - last_growth >= QUIET_S:
            open_since = None
    _, server, own = samples[-1]
    began, server_at_first, own_at_first = bursts[0] if bursts else (0, 0, 0)
    return Cost(server_at_first - began, server_at_first, own_at_first, server, own, len(bursts), calls)


class _Sampler(threading.Thread):
    """Samples the ranks whose pids appear in ``out`` every :data:`SAMPLE_S` until stopped."""

    def __init__(self, out: Path) -> None:
        super().__init__(daemon=True)
        self.out = out
        self.ranks: dict[int, _Rank] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(SAMPLE_S):
            for found in self.out.glob("rank*.pid"):
                rank = int(found.stem.removeprefix("rank"))
                if rank not in self.ranks and found.read_text().strip():
                    self.ranks[rank] = _Rank(int(found.read_text()))
            for number, rank in self.ranks.items():
                if (self.out / f"rank{number}.calls").exists():
                    continue  # its loop ended: what follows (its threads ending) is not the loop's
                sample = _threads(rank.pid)
                if sample is not None:
                    rank.samples.append((time.monotonic(), *sample))

    def costs(self) -> list[Cost]:
        """Each rank's cost, once stopped."""
        self.done.set()
        self.join()
        costs = []
        for rank, sampled in sorted(self.ranks.items()):
            calls = int((self.out / f"rank{rank}.calls").read_text())
            if len(sampled.samples) < 2:
                raise SystemExit(f"live_cost: rank {rank} was sampled fewer than twice")
            costs.append(cost_of(sampled.samples, calls, floor_ns=50_000))
        return costs


def _torchrun(script: Path, cpu_s: float, out: Path, sockets: Path) -> subprocess.Popen:
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "TORCH_FR_BUFFER_SIZE": "2000",
                   "LIVE_COST_SOCKETS": str(sockets)}
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                             str(script), str(cpu_s), str(out)], env=environment, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _attached(script: Path, cpu_s: float, folder: Path, slowest: float | None) -> list[Cost]:
    """The job under torchrun, read by ``collviz attach --watch`` at ``--slowest slowest`` (None:
    not read)."""
    out, sockets = folder / "out", folder / "sockets"
    out.mkdir()
    sockets.mkdir()
    sampler = _Sampler(out)
    sampler.start()
    job = _torchrun(script, cpu_s, out, sockets)
    watch = None
    try:
        if slowest is not None:
            deadline = time.monotonic() + 120
            while len(list(sockets.glob("rank*.sock"))) < 2:
                if time.monotonic() > deadline or job.poll() is not None:
                    raise SystemExit("live_cost: the job's worker servers did not open")
                time.sleep(0.05)
            watch = subprocess.Popen([sys.executable, "-m", "collviz.app.cli", "attach", "--headless", "--watch",
                                      "--json", "--slowest", f"{slowest:g}", str(sockets)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        _, err = job.communicate(timeout=cpu_s * 40 + 300)
        if job.returncode != 0:
            raise SystemExit(f"live_cost: the job failed: {err[-1000:]}")
    finally:
        for process in (job, watch):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGINT)
                process.wait(timeout=30)
    return sampler.costs()


def _run(script: Path, cpu_s: float, folder: Path) -> list[Cost]:
    """The job as ``collviz run --headless --nproc 2``."""
    out = folder / "out"
    out.mkdir()
    sampler = _Sampler(out)
    sampler.start()
    result = subprocess.run([sys.executable, "-m", "collviz.app.cli", "run", "--headless", "--nproc", "2",
                             str(script), str(cpu_s), str(out)], capture_output=True, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=cpu_s * 40 + 300,
                            stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise SystemExit(f"live_cost: collviz run failed: {result.stderr[-1000:]}")
    return sampler.costs()


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu-seconds", type=float, default=20.0,
                        help="each job's loop, in seconds of either rank's own CPU (default 20)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_CPU_S:g}-second loops")
    args = parser.parse_args()
    cpu_s = QUICK_CPU_S if args.quick else args.cpu_seconds
    rows: list[tuple[str, Cost]] = []
    with tempfile.TemporaryDirectory() as name:
        script = Path(name, "job.py")
        script.write_text(JOB)
        cases = [("plain torchrun, servers open, not read", lambda f: _attached(script, cpu_s, f, None)),
                 ("attach --watch (its pace, --slowest 10)", lambda f: _attached(script, cpu_s, f, 10.0)),
                 ("attach --watch --slowest 1", lambda f: _attached(script, cpu_s, f, 1.0)),
                 ("collviz run --headless --nproc 2", lambda f: _run(script, cpu_s, f))]
        for number, (label, measure) in enumerate(cases):
            folder = Path(name, f"case{number}")
            folder.mkdir()
            started = time.monotonic()
            worst = max(measure(folder), key=lambda cost: cost.whole)
            print(f"  measured: {label} ({time.monotonic() - started:.0f} s wall)", file=sys.stderr, flush=True)
            rows.append((label, worst))
    floor = rows[0][1].whole
    print(f"live_cost: 2 gloo ranks whose calls never stop, {cpu_s:g} s of a rank's own CPU in its loop, Flight "
          "Recorder 2,000 calls; per thread from /proc/PID/task/*/schedstat (the worse rank)")
    print(f"{'case':<42}{'first reading':>14}{'steady/own CPU':>16}{'whole/own CPU':>15}{'readings':>10}"
          f"{'own CPU':>9}{'calls':>9}{'ratio':>8}")
    for label, cost in rows:
        ratio = f"{cost.whole / floor:.1f}x" if floor > 0 else "-"
        print(f"{label:<42}{cost.first_ns / 1e6:>11.1f} ms{cost.steady * 100:>15.3f}%{cost.whole * 100:>14.3f}%"
              f"{cost.readings:>10}{cost.own_ns / 1e9:>7.1f} s{cost.calls:>9,}{ratio:>8}")
    if args.quick:  # a first reading weighs ~0.7 % of a 0.5-s loop: no verdict from a smoke run
        print("the line, 0.5 % of the whole: not judged with --quick (its loops are too short); run without it")
        return
    print("the line, 0.5 % of the whole: " + ", ".join(
        f"{label.split(' (')[0]}: {'met' if cost.whole <= 0.005 else 'NOT met'}" for label, cost in rows[1:]))


if __name__ == "__main__":
    main()
