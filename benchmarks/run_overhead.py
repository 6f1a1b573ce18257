"""What ``collviz run`` costs a script: a training-like loop on 2 gloo ranks (``_run_loop.py``:
compute and 17 small collectives a step), timing its own loop, started three ways:

- *bare*: plain Python processes, one per rank, with the environment torchrun gives (RANK,
  WORLD_SIZE, MASTER_ADDR=127.0.0.1, …, OMP_NUM_THREADS=1) and torch's Flight Recorder at its
  defaults (on, 2,000 entries, in torch ≥ 2.11);
- *fork*: the same, but forked from one Python that imported torch once, as ``collviz run`` forks
  its ranks (``_fork_launch.py``): the launch alike, nothing of collviz's;
- *collviz*: ``collviz run --nproc 2 --headless``, the default: each rank's Flight Recorder (2,000
  entries) and worker server, its dump as it ends, read by the launcher;
- *observe*: ``collviz run --nproc 2 --headless --observe``, the detailed observer, for contrast.

Each round runs all four, in an order that rotates from round to round, so a shared machine's
noise reaches each alike. A run's figure is its slowest rank's loop wall time (start-up, the dump
and its import excluded: the script times its loop between two barriers), and the CPU time both
ranks' processes used during it (and of that, the CPU of threads other than the script's own:
gloo's, and collviz's where it runs any). Printed: each round (with the 1-minute load average), then per
variant the median and spread (min–max) of the loop time, and its ratios to bare and to fork,
paired per round. Also the whole command's wall time (start-up, dump and import included). Goal:
collviz ≤ 1.005 of fork (the same launch without collviz).

    python benchmarks/run_overhead.py [--rounds 5] [--steps 1000] [--quick]

``--quick``: one round of 20 steps, the same code path in seconds (the test suite runs it); its
figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOOP = HERE / "_run_loop.py"
RANKS = 2


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def bare(loop_args: list[str]) -> None:
    """The loop in plain processes, one per rank, with torchrun's environment."""
    common = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": str(RANKS),
              "LOCAL_WORLD_SIZE": str(RANKS)}
    ranks = [subprocess.Popen([sys.executable, str(LOOP), *loop_args], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**common, "RANK": str(rank), "LOCAL_RANK": str(rank)}) for rank in range(RANKS)]
    codes = [process.wait() for process in ranks]
    if any(codes):
        raise SystemExit(f"the bare loop failed: exit codes {codes}")


def fork(loop_args: list[str]) -> None:
    """The loop's ranks forked by a bare launcher that imported torch once."""
    subprocess.run([sys.executable, str(HERE / "_fork_launch.py"), str(RANKS), str(LOOP), *loop_args], check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def collviz(loop_args: list[str], *options: str) -> None:
    """The loop under ``collviz run --nproc 2 --headless`` with ``options``."""
    subprocess.run([sys.executable, "-m", "collviz.app.cli", "run", "--nproc", str(RANKS), "--headless", *options,
                    str(LOOP), *loop_args], check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


VARIANTS = {"bare": bare, "fork": fork, "collviz": collviz, "observe": lambda args: collviz(args, "--observe")}


def measure(name: str, steps: int, folder: Path) -> tuple[float, float, float, float]:
    """(slowest rank's loop wall s, both ranks' loop CPU s, the command's wall s, both ranks' CPU
    in threads other than the script's own s) of one run."""
    times = folder / name
    started = time.perf_counter()
    VARIANTS[name](["--times", str(times), "--steps", str(steps)])
    command = time.perf_counter() - started
    found = [json.loads(Path(f"{times}.{rank}").read_text()) for rank in range(RANKS)]
    for rank in range(RANKS):
        Path(f"{times}.{rank}").unlink()
    return (max(f["wall_s"] for f in found), sum(f["cpu_s"] for f in found), command,
            sum(f["other_threads_cpu_s"] for f in found))


def spread(values: list[float], digits: int = 3) -> str:
    """``median (min–max)``."""
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def main() -> None:
    """Rounds of the four variants, rotated; then medians, spreads and paired ratios."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1000, help="timed steps per run (about 10-20 s on 2 busy cores)")
    parser.add_argument("--quick", action="store_true", help="one round of 20 steps: a fast check that it runs")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.steps = 1, 20
    os.environ["OMP_NUM_THREADS"] = "1"  # what torchrun and collviz run set; the same for every variant
    names = list(VARIANTS)
    results: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in names}
    print(f"_run_loop.py, {RANKS} gloo ranks, {args.steps} steps of 17 collectives, {args.rounds} rounds, "
          f"{os.cpu_count()} cores")
    print("round  load  " + "  ".join(f"{name + ' loop s':>15} {name + ' cpu s':>14}" for name in names))
    with tempfile.TemporaryDirectory(prefix="collviz-run-overhead-") as tmp:
        for index in range(args.rounds):
            load = os.getloadavg()[0]
            order = names[index % len(names):] + names[:index % len(names)]
            for name in order:
                results[name].append(measure(name, args.steps, Path(tmp)))
            print(f"{index:>5}  {load:>4.1f}  " + "  ".join(f"{results[n][-1][0]:>15.3f} {results[n][-1][1]:>14.3f}"
                                                            for n in names), flush=True)
    print(f"\nmedian (min–max) over {args.rounds} rounds; ratios paired per round:")
    for name in names:
        walls, cpus, commands, others = (list(column) for column in zip(*results[name]))
        line = (f"  {name:>8}: loop {spread(walls)} s, CPU {spread(cpus)} s (threads but the script's "
                f"{spread(others)} s), command {spread(commands, 2)} s")
        print(line)
        for base_name in ("bare", "fork")[:names.index(name)]:
            base = results[base_name]
            print(f"  {'':>8}  loop ÷ {base_name} {spread([r[0] / b[0] for r, b in zip(results[name], base)], 4)}, "
                  f"CPU ÷ {base_name} {spread([r[1] / b[1] for r, b in zip(results[name], base)], 4)}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
