"""Wall time of ``collviz all-reduce --gpus 4 --headless`` ÷ a bare launcher, same run.

The bare launcher starts 4 fresh interpreters that each import torch, join a gloo group, do one
all_reduce and exit — the floor for "4 processes with torch.distributed". collviz imports torch
once and forks its workers, so it can beat that floor. Target ≤ 1.0.

    python benchmarks/startup.py [--rounds 5] [--quick]

``--quick`` is one round (the test suite runs it so the benchmark cannot break silently).
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

BARE = Path(__file__).resolve().parent / "_bare.py"


def bare_launcher() -> float:
    """Seconds for 4 fresh interpreters: import torch, init gloo, one all_reduce, exit."""
    start = time.perf_counter()
    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, str(BARE), str(rank), "4", port]) for rank in range(4)]
    for proc in procs:
        assert proc.wait() == 0
    return time.perf_counter() - start


def collviz_headless() -> float:
    """Seconds for the whole ``collviz all-reduce --gpus 4 --headless`` command."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "collviz.app.cli", "all-reduce", "--gpus", "4", "--backend", "gloo",
                    "--headless"], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one round: a fast check that it runs")
    args = parser.parse_args()
    if args.quick:
        args.rounds = 1
    bare, ours = [], []
    for _ in range(args.rounds):
        bare.append(bare_launcher())
        ours.append(collviz_headless())
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"{'':>28} {'median (s)':>10}  all rounds")
    print(f"{'bare launcher (4 fresh)':>28} {b:>10.2f}  {' '.join(f'{x:.2f}' for x in bare)}")
    print(f"{'collviz --headless':>28} {o:>10.2f}  {' '.join(f'{x:.2f}' for x in ours)}")
    print(f"{'ratio collviz / bare':>28} {o / b:>10.2f}")


if __name__ == "__main__":
    main()
