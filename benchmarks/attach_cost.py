"""What reading a rank costs the rank: the bytes and the rank's CPU per request to torch's worker
server, and per second at attach's paces, measured side by side in one run.

A real gloo rank (``_fr_rank.py``: a process group of one whose Flight Recorder holds N real
all_reduce calls, idle otherwise, so every CPU tick it spends while being read is the reading's)
is asked K times for ``fr_trace_json`` (its whole Flight Recorder: torch 2.13's handler takes no
parameter, so this is the least it can send) and for ``dump_traceback`` (the stack attach asks of
a rank others wait on). The rank's CPU is read from ``/proc/PID/stat`` around the requests, less
the same span idle. Done for the default buffer (2,000 calls) and a smaller one
(``TORCH_FR_BUFFER_SIZE=200``), the knob a job can turn to make each reading cheaper.

Printed: per request, bytes and rank CPU; per second, the rank's CPU share when read every second
(what polling the whole buffer once a second costs) and at ``--watch``'s steady pace (every 10 s
by default), and their ratio.

    python benchmarks/attach_cost.py [--requests 40] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from collviz.runtime.live.pace import Pace
from collviz.runtime.live.workers import Worker, ask_all

RANK = Path(__file__).with_name("_fr_rank.py")
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """The process's user and system CPU so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S


def _measure(worker: Worker, pid: int, handler: str, requests: int) -> tuple[int, float, float]:
    """(bytes per answer, the rank's CPU per request in s, the attacher's wall time per request in s)."""
    sizes, walls = [], []
    before = _cpu_s(pid)
    start = time.monotonic()
    for _ in range(requests):
        answer = ask_all([worker], handler, 30.0)[worker.rank]
        if answer.body is None:
            raise SystemExit(f"attach_cost: {handler}: {answer.error}")
        sizes.append(len(answer.body))
        walls.append(answer.took_s)
    busy = _cpu_s(pid) - before
    span = time.monotonic() - start
    idle_before = _cpu_s(pid)
    time.sleep(span)
    idle = _cpu_s(pid) - idle_before
    return int(statistics.median(sizes)), max(0.0, busy - idle) / requests, statistics.median(walls)


def _rank(entries: int, folder: Path) -> tuple[subprocess.Popen, Worker]:
    sock = folder / f"rank{entries}.sock"
    child = subprocess.Popen([sys.executable, str(RANK), str(entries), str(sock)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
    if child.stdout is None or child.stdout.readline().strip() != "ready":
        raise SystemExit(f"attach_cost: the rank with {entries} calls did not start")
    return child, Worker(0, str(sock))


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=40, help="requests per measurement (default 40)")
    parser.add_argument("--quick", action="store_true", help="8 requests per measurement (seconds)")
    args = parser.parse_args()
    requests = 8 if args.quick else args.requests
    steady = Pace().slowest_s
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for entries in (2000, 200):
            child, worker = _rank(entries, Path(folder))
            try:
                for handler in ("fr_trace_json", "dump_traceback"):
                    times = requests * (10 if handler == "dump_traceback" else 1)  # a cheap one: more, for the clock's ticks
                    rows.append((entries, handler, *_measure(worker, child.pid, handler, times)))
            finally:
                child.communicate("")
    print(f"attach_cost: one idle gloo rank, {requests} requests of fr_trace_json, {requests * 10} of dump_traceback "
          "(rank CPU from /proc, less the same span idle)")
    print(f"{'buffer':>7}  {'handler':<15}{'bytes':>10}{'rank CPU/req':>14}{'wall/req':>10}"
          f"{'CPU share @1 s':>16}{f'@{steady:g} s steady':>15}{'ratio':>7}")
    for entries, handler, size, cpu, wall in rows:
        print(f"{entries:>7}  {handler:<15}{size:>10,}{cpu * 1e3:>11.1f} ms{wall * 1e3:>7.1f} ms"
              f"{cpu * 100:>15.2f}%{cpu / steady * 100:>14.3f}%{steady:>6.0f}x")
    full, small = rows[0], rows[2]
    if small[3] > 0:
        print(f"a 200-call buffer: {full[2] / small[2]:.1f}x fewer bytes and {full[3] / small[3]:.1f}x less rank CPU "
              "per reading than 2,000")


if __name__ == "__main__":
    main()
