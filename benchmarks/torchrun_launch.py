"""What launching through torch's own launcher costs ``collviz run`` beside its own fork launcher:
the whole command's wall time (start-up, the run, the summary) for a short loop on 2 gloo ranks
(``_run_loop.py``), started three ways in an order that rotates from round to round:

- *torchrun*: ``python -m torch.distributed.run --standalone --nproc-per-node 2`` alone;
- *collviz torchrun*: ``collviz run --headless --standalone --nproc-per-node 2``: torch's launcher
  and its elastic agent, each rank under collviz's observer, node 0 collecting;
- *collviz fork*: ``collviz run --headless --nproc 2``: collviz's own launcher (ranks forked after
  one ``import torch``, read from Flight Recorder).

Printed: each round, then per way the median and spread (min-max) of the wall time and its ratio
to torchrun's, paired per round. Each rank's loop also times itself (its slowest rank's loop, in
the last column): the launch is the rest.

    python benchmarks/torchrun_launch.py [--rounds 5] [--steps 200] [--quick]

``--quick``: one round of 5 steps, the same code path (the test suite runs it); its figures mean
nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOOP = HERE / "_run_loop.py"

WAYS = {
    "torchrun": [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"],
    "collviz torchrun": [sys.executable, "-m", "collviz.app.cli", "run", "--headless", "--standalone",
                         "--nproc-per-node", "2"],
    "collviz fork": [sys.executable, "-m", "collviz.app.cli", "run", "--headless", "--nproc", "2"],
}
"""Each way's command, before the loop script and its arguments."""


def one_run(way: str, steps: int, folder: Path) -> tuple[float, float]:
    """Run the loop ``way``: the whole command's wall time, and the slowest rank's loop time (s)."""
    times = folder / f"{way.replace(' ', '_')}.times"
    command = [*WAYS[way], str(LOOP), "--times", str(times), "--steps", str(steps), "--warmup", "5"]
    started = time.perf_counter()
    result = subprocess.run(command, cwd=folder, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    wall = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"{way}: exit {result.returncode}\n{result.stderr[-2000:]}")
    loops = [json.loads(Path(f"{times}.{rank}").read_text())["wall_s"] for rank in (0, 1)]
    return wall, max(loops)


def main() -> None:
    """Run the rounds, print each and the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="one round of 5 steps (figures mean nothing)")
    args = parser.parse_args()
    rounds, steps = (1, 5) if args.quick else (args.rounds, args.steps)
    ways = list(WAYS)
    walls: dict[str, list[float]] = {way: [] for way in ways}
    loops: dict[str, list[float]] = {way: [] for way in ways}
    print(f"# {rounds} round(s) of {steps} steps on 2 gloo ranks; whole command's wall time (s), slowest loop (s)")
    with tempfile.TemporaryDirectory(prefix="collviz-torchrun-bench-") as folder:
        for index in range(rounds):
            order = ways[index % len(ways):] + ways[:index % len(ways)]
            for way in order:
                wall, loop = one_run(way, steps, Path(folder))
                walls[way].append(wall)
                loops[way].append(loop)
            print(f"round {index + 1} (load {os.getloadavg()[0]:.1f}): " +
                  ", ".join(f"{way} {walls[way][-1]:.2f} s" for way in ways))
    print(f"\n{'way':<18} {'wall median':>12} {'min-max':>14} {'/ torchrun':>11} {'loop median':>12}")
    for way in ways:
        ratio = statistics.median(w / t for w, t in zip(walls[way], walls["torchrun"]))
        print(f"{way:<18} {statistics.median(walls[way]):>10.2f} s {min(walls[way]):>6.2f}-{max(walls[way]):<6.2f} "
              f"{ratio:>10.2f}x {statistics.median(loops[way]):>10.3f} s")


if __name__ == "__main__":
    main()
