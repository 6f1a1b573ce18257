"""What reading a running job live costs its ranks, per thread: the CPU of torch's worker-server
threads (``pt_workerserver``: building each answer) ÷ the CPU of the rank's own threads (its loop,
gloo's), each read from ``/proc/self/task/*/schedstat`` by the rank itself as its loop ends.

The job: 2 gloo ranks whose calls never stop (an all_reduce of 1,024 floats again and again for
D seconds, the ranks ending after the same call), Flight Recorder at 2,000 calls. Measured side by side in one run:

- plain torchrun, its worker servers open, nobody reading (the floor: what an open server costs);
- the same while ``collviz attach --headless --watch`` reads it (its own pace: every --slowest
  seconds while no rank waits), and at ``--slowest 1`` (a reading a second: what the old pace did
  while calls moved);
- ``collviz run --headless --nproc 2`` of the same script (its live readings of its own ranks).

Printed per case: readings' cost as a share of the rank's own CPU (the worse rank), the worker
servers' CPU in ms, and the ratio to the floor. The line to meet: 0.5 %.

    python benchmarks/live_cost.py [--seconds 30] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

JOB = textwrap.dedent('''
    import json, os, sys, time
    from contextlib import nullcontext
    from pathlib import Path
    import torch
    import torch.distributed as dist

    seconds, out = float(sys.argv[1]), Path(sys.argv[2])
    serve = os.environ.get("LIVE_COST_SOCKETS")

    def cpu_by_thread():
        per = {}
        for tid in os.listdir("/proc/self/task"):
            try:
                name = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
                ns = int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[0])
            except OSError:
                continue
            per[name] = per.get(name, 0) + ns
        return per

    def main():
        dist.init_process_group("gloo")
        tensor = torch.ones(1024)
        calls, end = 0, time.monotonic() + seconds
        while True:  # element 0 carries each rank's "my time is up": every rank stops after the same call
            tensor[0] = float(time.monotonic() >= end)
            dist.all_reduce(tensor)
            calls += 1
            if tensor[0] > 0:
                break
        (out / f"rank{dist.get_rank()}.json").write_text(json.dumps({"calls": calls, "cpu": cpu_by_thread()}))
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


def _share(out: Path) -> tuple[float, float, int]:
    """(the worse rank's worker-server CPU ÷ its own threads' CPU, that rank's server CPU in ms,
    calls per rank) from the ranks' reports in ``out``."""
    worst = (0.0, 0.0, 0)
    for report in sorted(out.glob("rank*.json")):
        found = json.loads(report.read_text())
        server = sum(ns for name, ns in found["cpu"].items() if name == SERVER_THREAD)
        own = sum(ns for name, ns in found["cpu"].items() if name != SERVER_THREAD)
        worst = max(worst, (server / own, server / 1e6, found["calls"]))
    return worst


def _torchrun(script: Path, seconds: float, out: Path, sockets: Path) -> subprocess.Popen:
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "TORCH_FR_BUFFER_SIZE": "2000",
                   "LIVE_COST_SOCKETS": str(sockets)}
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                             str(script), str(seconds), str(out)], env=environment, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _attached(script: Path, seconds: float, folder: Path, slowest: float | None) -> tuple[float, float, int]:
    """The job under torchrun, read by ``collviz attach --watch`` at ``--slowest slowest`` (None:
    not read)."""
    out, sockets = folder / "out", folder / "sockets"
    out.mkdir()
    sockets.mkdir()
    job = _torchrun(script, seconds, out, sockets)
    watch = None
    try:
        if slowest is not None:
            deadline = time.monotonic() + 60
            while len(list(sockets.glob("rank*.sock"))) < 2:
                if time.monotonic() > deadline or job.poll() is not None:
                    raise SystemExit("live_cost: the job's worker servers did not open")
                time.sleep(0.05)
            watch = subprocess.Popen([sys.executable, "-m", "collviz.app.cli", "attach", "--headless", "--watch",
                                      "--json", "--slowest", f"{slowest:g}", str(sockets)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        _, err = job.communicate(timeout=seconds + 120)
        if job.returncode != 0:
            raise SystemExit(f"live_cost: the job failed: {err[-1000:]}")
    finally:
        for process in (job, watch):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGINT)
                process.wait(timeout=30)
    return _share(out)


def _run(script: Path, seconds: float, folder: Path) -> tuple[float, float, int]:
    """The job as ``collviz run --headless --nproc 2``."""
    out = folder / "out"
    out.mkdir()
    result = subprocess.run([sys.executable, "-m", "collviz.app.cli", "run", "--headless", "--nproc", "2",
                             str(script), str(seconds), str(out)], capture_output=True, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=seconds + 180, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise SystemExit(f"live_cost: collviz run failed: {result.stderr[-1000:]}")
    return _share(out)


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="each job's loop, in seconds (default 30)")
    parser.add_argument("--quick", action="store_true", help="8-second loops")
    args = parser.parse_args()
    seconds = 8.0 if args.quick else args.seconds
    rows = []
    with tempfile.TemporaryDirectory() as name:
        script = Path(name, "job.py")
        script.write_text(JOB)
        cases = [("plain torchrun, servers open, not read", lambda f: _attached(script, seconds, f, None)),
                 ("attach --watch (its pace, --slowest 10)", lambda f: _attached(script, seconds, f, 10.0)),
                 ("attach --watch --slowest 1 (the old pace)", lambda f: _attached(script, seconds, f, 1.0)),
                 ("collviz run --headless --nproc 2", lambda f: _run(script, seconds, f))]
        for number, (label, measure) in enumerate(cases):
            folder = Path(name, f"case{number}")
            folder.mkdir()
            rows.append((label, *measure(folder)))
    floor = rows[0][1]
    print(f"live_cost: 2 gloo ranks whose calls never stop, {seconds:g} s loops, Flight Recorder 2,000 calls; "
          "per thread from /proc/self/task/*/schedstat (the worse rank)")
    print(f"{'case':<44}{'server/own CPU':>15}{'server CPU':>12}{'calls/rank':>12}{'ratio':>8}")
    for label, share, server_ms, calls in rows:
        ratio = f"{share / floor:.1f}x" if floor > 0 else "-"
        print(f"{label:<44}{share * 100:>14.3f}%{server_ms:>9.1f} ms{calls:>12,}{ratio:>8}")
    print("the line: 0.5 % (" + ", ".join(f"{label.split(' (')[0]}: {'met' if share <= 0.005 else 'NOT met'}"
                                     for label, share, *_ in rows[1:]) + ")")


if __name__ == "__main__":
    main()
