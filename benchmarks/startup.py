"""Start-up: ``collviz all-reduce --gpus N --headless`` ÷ the fork floor, at several N, side by side.

The fork floor is the least a forking launcher can do: one Python that imports torch once, forks
N ranks that join a gloo group, run one all_reduce and leave with ``os._exit``, and ends the same
way (``_fork_floor.py``). The bare launcher (N fresh interpreters, each importing torch) is shown
beside it for scale. Also ``collviz --version`` (goal ≤ 0.3 s). Goal (issue 23): collviz ÷ floor
≤ 1.2 at 4 and 64 ranks. Rounds alternate the commands, so machine noise hits them alike.

    python benchmarks/startup.py [--ranks 4,64] [--rounds 5] [--quick]

``--quick`` is one round at 2 ranks (the test suite runs it so the benchmark cannot break silently).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bare import free_port  # noqa: E402

HERE = Path(__file__).resolve().parent
BARE = HERE / "_bare.py"
FLOOR = HERE / "_fork_floor.py"


def _seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
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


def collviz_headless(ranks: int) -> float:
    """Seconds for the whole ``collviz all-reduce --gpus N --headless`` command."""
    return _seconds([sys.executable, "-m", "collviz.app.cli", "all-reduce", "--gpus", str(ranks), "--backend", "gloo",
                     "--headless"])


def _row(label: str, times: list[float]) -> str:
    return f"{label:>34} {statistics.median(times):>10.2f}  {' '.join(f'{t:.2f}' for t in times)}"


def main() -> None:
    """Measure and print one table per rank count, then ``--version``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="4,64", help="rank counts, comma-separated (default 4,64)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one round at 2 ranks: a fast check that it runs")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.ranks = 1, "2"
    for ranks in (int(r) for r in args.ranks.split(",")):
        bare, floor, ours = [], [], []
        for _ in range(args.rounds):
            floor.append(fork_floor(ranks))
            ours.append(collviz_headless(ranks))
            if ranks <= 16:  # N fresh interpreters importing torch at once: a minute at 64 on 2 cores
                bare.append(bare_launcher(ranks))
        print(f"{ranks} ranks{'':>25} {'median (s)':>10}  all rounds")
        print(_row("fork floor (one import, N forks)", floor))
        print(_row("collviz --headless", ours))
        if bare:
            print(_row(f"bare launcher ({ranks} fresh)", bare))
        print(f"{'collviz ÷ fork floor':>34} {statistics.median(ours) / statistics.median(floor):>10.2f}  (goal ≤ 1.2)")
    version = [_seconds([sys.executable, "-m", "collviz.app.cli", "--version"]) for _ in range(args.rounds)]
    print(_row("collviz --version", version) + "  (goal ≤ 0.3)")


if __name__ == "__main__":
    main()
