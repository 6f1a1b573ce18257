"""Start-up: ``collviz all-reduce --gpus N --headless`` ÷ the fork floor, at several N, side by side.

The fork floor is the least a forking launcher can do: one Python that imports torch once, forks
N ranks that join a gloo group, run one all_reduce and leave with ``os._exit``, and ends the same
way (``_fork_floor.py``). The bare launcher (N fresh interpreters, each importing torch) is shown
beside it for scale. Also ``collviz --version`` (goal ≤ 0.3 s). Goal (issue 23): collviz ÷ floor
≤ 1.2 at 4 and 64 ranks. Rounds alternate the commands, so machine noise hits them alike.

Every command runs once untimed before the rounds, with bytecode writing allowed: no round pays
for compiling collviz's modules, as no start of an installed collviz does (pip compiles them at
install). A checkout run with ``PYTHONDONTWRITEBYTECODE=1`` compiles about 100 of them on every
start (0.2 s on 2 cores): that is the checkout's cost, not collviz's.

``--timeline`` records each collviz round's trace and says where its time went, from the
command's start (the events' ``t_ns`` and this script share CLOCK_MONOTONIC): the forks done
(RunStart), every rank in the process group (RankStart), the scenario over (RankEnd), every
worker reaped (RunEnd), the command's exit.

    python benchmarks/startup.py [--ranks 4,64] [--rounds 5] [--timeline] [--quick]

``--quick`` is one round at 2 ranks (the test suite runs it so the benchmark cannot break silently).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bare import free_port  # noqa: E402

HERE = Path(__file__).resolve().parent
BARE = HERE / "_bare.py"
FLOOR = HERE / "_fork_floor.py"


ENVIRONMENT = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
"""The commands' environment: this one, with bytecode writing allowed (see the module's docstring)."""


def _seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=ENVIRONMENT)
    return time.perf_counter() - start


def bare_launcher(ranks: int) -> float:
    """Seconds for N fresh interpreters: import torch, init gloo, one all_reduce, exit."""
    start = time.perf_counter()
    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, str(BARE), str(rank), str(ranks), port]) for rank in range(ranks)]
    for proc in procs:
        assert proc.wait() == 0
    return time.perf_counter() - start


def fork_floor(ranks: int) -> float:
    """Seconds for one Python that imports torch once and forks N gloo ranks (one all_reduce)."""
    return _seconds([sys.executable, str(FLOOR), str(ranks)])


def _collviz_command(ranks: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "collviz.app.cli", "all-reduce", "--gpus", str(ranks), "--backend", "gloo",
            "--headless", *extra]


def collviz_headless(ranks: int) -> float:
    """Seconds for the whole ``collviz all-reduce --gpus N --headless`` command."""
    return _seconds(_collviz_command(ranks))


MARKS = ("forked (RunStart)", "last RankStart", "last RankEnd", "reaped (RunEnd)", "exit")
"""The moments :func:`collviz_timeline` reports, in order."""


def collviz_timeline(ranks: int) -> dict[str, float]:
    """The same command, recording its trace: seconds from its start to each of :data:`MARKS`."""
    from collviz.runtime.wire.trace import read_trace

    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder, "startup.cvz")
        start = time.monotonic_ns()
        subprocess.run(_collviz_command(ranks, "--record", str(trace)), check=True, capture_output=True,
                       env=ENVIRONMENT)
        end = time.monotonic_ns()
        events = [event for event in read_trace(trace).events if hasattr(event, "t_ns")]

    def last(kind: str) -> float:
        return (max(e.t_ns for e in events if type(e).__name__ == kind) - start) / 1e9

    return {"forked (RunStart)": last("RunStart"), "last RankStart": last("RankStart"),
            "last RankEnd": last("RankEnd"), "reaped (RunEnd)": last("RunEnd"), "exit": (end - start) / 1e9}


def _row(label: str, times: list[float]) -> str:
    return f"{label:>34} {statistics.median(times):>10.2f}  {' '.join(f'{t:.2f}' for t in times)}"


def main() -> None:
    """Measure and print one table per rank count, then ``--version``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="4,64", help="rank counts, comma-separated (default 4,64)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--timeline", action="store_true",
                        help="also say where each collviz round's time went (it records a trace, then)")
    parser.add_argument("--quick", action="store_true", help="one round at 2 ranks: a fast check that it runs")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.ranks, args.timeline = 1, "2", True
    fork_floor(2)  # untimed: bytecode written, files cached (see the module's docstring)
    collviz_headless(2)
    for ranks in (int(r) for r in args.ranks.split(",")):
        bare, floor, ours = [], [], []
        timelines: list[dict[str, float]] = []
        for _ in range(args.rounds):
            floor.append(fork_floor(ranks))
            if args.timeline:
                timelines.append(collviz_timeline(ranks))
                ours.append(timelines[-1]["exit"])
            else:
                ours.append(collviz_headless(ranks))
            if ranks <= 16:  # N fresh interpreters importing torch at once: a minute at 64 on 2 cores
                bare.append(bare_launcher(ranks))
        print(f"{ranks} ranks{'':>25} {'median (s)':>10}  all rounds")
        print(_row("fork floor (one import, N forks)", floor))
        print(_row("collviz --headless", ours))
        if bare:
            print(_row(f"bare launcher ({ranks} fresh)", bare))
        print(f"{'collviz ÷ fork floor':>34} {statistics.median(ours) / statistics.median(floor):>10.2f}  (goal ≤ 1.2)")
        for mark in MARKS if timelines else ():
            print(_row(f"collviz: {mark}", [timeline[mark] for timeline in timelines]))
    version = [_seconds([sys.executable, "-m", "collviz.app.cli", "--version"]) for _ in range(args.rounds)]
    print(_row("collviz --version", version) + "  (goal ≤ 0.3)")


if __name__ == "__main__":
    main()
