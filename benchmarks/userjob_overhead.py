"""What watching a script costs: the example's training step with and without collviz, 4 gloo ranks
(2 with ``--quick``).

Two measurements, each repeated ``--rounds`` times:

1. *In one process* (``_toggled_steps.py``): the example's model and step, with an observer
   switched on for half of the steps (off, on, on, off, …) in the same ranks, so machine noise
   hits both halves alike. ``observer``: collviz's own, the script run by ``collviz run``;
   ``dispatch mode``: an empty ``TorchDispatchMode`` (every tensor op through Python and straight
   on), the least any dispatch-mode observer would cost, the script run by torchrun. Each run's
   figure is the median on-step ÷ the median off-step, for wall time and for the CPU time the
   rank's process used (every thread's).
2. *End to end*: the example itself (``examples/fsdp_train.py``, or ddp) run plainly by torchrun,
   then by ``collviz run --headless --observe``; each run's figure is its median step after the warm-up.

Printed: every run's figures, then the median over rounds with the spread (min–max), and where
the observer's CPU goes: rank 0's CPU per step by thread, observed minus not (the script's own
thread, each of collviz's, and the threads Python did not start: gloo's, ZeroMQ's). Goal: the
observer's wall ratio ≤ 1.03.

``--baseline PYTHON`` compares two trees instead: PYTHON is an interpreter whose ``collviz`` is
the other tree (a copy of the starting tree with its own editable install). Each round runs
measurement 1 for the observer with both, in alternating order (this tree first in even rounds),
so that both see the same stretch of a shared machine; printed per round with the 1-minute load
average, and as paired ratios, this tree ÷ the baseline, per round. Dispatch mode and end to end
are skipped (neither depends on the tree).

    python benchmarks/userjob_overhead.py [--rounds 5] [--example fsdp|ddp] [--steps 100] [--quick]
                                          [--baseline PYTHON]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RANKS = 4
"""Ranks of every run (``--quick``: :data:`QUICK_RANKS`)."""
QUICK_RANKS = 2
"""``--quick``'s ranks: the same code paths at half the processes (its four launches of 4 ranks were
the test suite's costliest benchmark smoke run, 55 s of CPU on 2026-11-28)."""


def torchrun(python: str = sys.executable, ranks: int = RANKS) -> list[str]:
    """torchrun's command line with ``python``, ``ranks`` ranks."""
    return [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks)]


def collviz_run(python: str = sys.executable, ranks: int = RANKS) -> list[str]:
    """``collviz run --headless --observe``'s command line with ``python`` (and the collviz it
    imports), ``ranks`` ranks: the observer this benchmark measures (without ``--observe`` a run
    reads Flight Recorder instead: ``run_overhead.py``)."""
    return [python, "-m", "collviz.app.cli", "run", "--nproc", str(ranks), "--headless", "--observe"]


def run_for_times(command: list[str], tries: int = 2) -> dict:
    """Run ``command`` (it is given ``--times FILE``) with one thread per rank; what it wrote. A
    launch that fails is said with its last lines of stderr and tried again, ``tries`` times in all
    (the bare ``torchrun --standalone`` of the unchanged example failed now and then on the shared
    machine, nothing of collviz's in it; the cause is not known yet)."""
    with tempfile.TemporaryDirectory() as folder:
        times, errors = Path(folder) / "times.json", Path(folder) / "stderr.txt"
        env = {**os.environ, "OMP_NUM_THREADS": "1"}  # what torchrun sets; the same for every variant
        for attempt in range(1, tries + 1):
            with errors.open("w") as stderr:
                done = subprocess.run([*command, "--times", str(times)], env=env, cwd=HERE, stdout=subprocess.DEVNULL,
                                      stderr=stderr, stdin=subprocess.DEVNULL)
            if done.returncode == 0:
                return json.loads(times.read_text())
            tail = errors.read_text(errors="replace").strip().splitlines()[-5:]
            print(f"launch {attempt} of {tries} exited {done.returncode}: {' '.join(command[:4])} …\n  "
                  + "\n  ".join(tail), file=sys.stderr)
        raise SystemExit(f"{' '.join(command)} failed {tries} times")


def toggled(kind: str, model_args: list[str], python: str = sys.executable,
            ranks: int = RANKS) -> tuple[float, float, dict[str, float]]:
    """(wall ratio, CPU ratio, each thread's CPU per step on minus off in seconds) of one
    in-process A/B run of ``kind`` with ``python`` on ``ranks`` ranks."""
    launcher = collviz_run(python, ranks) if kind == "observer" else torchrun(python, ranks)
    found = run_for_times([*launcher, "_toggled_steps.py", "--toggle", kind, *model_args])
    threads = found.pop("threads")
    median = {key: statistics.median(values) for key, values in found.items()}
    extra = {name: threads["on"].get(name, 0.0) - threads["off"].get(name, 0.0)
             for name in {*threads["on"], *threads["off"]}}
    return median["on"] / median["off"], median["cpu on"] / median["cpu off"], extra


def end_to_end(launcher: list[str], script: Path, model_args: list[str], warmup: int) -> float:
    """Median step time (s, rank 0) of the example after ``warmup`` steps."""
    return statistics.median(run_for_times([*launcher, str(script), *model_args])[warmup:])


def spread(values: list[float], scale: float = 1.0, digits: int = 3) -> str:
    """``median (min–max)``."""
    return (f"{statistics.median(values) * scale:.{digits}f} ({min(values) * scale:.{digits}f}–"
            f"{max(values) * scale:.{digits}f})")


def print_threads(extra_cpu: list[dict[str, float]]) -> None:
    """Each thread's CPU per step, observed minus not, over runs: median (min–max), ms."""
    for name in sorted({name for run in extra_cpu for name in run}):
        print(f"  {name}: {spread([run.get(name, 0.0) for run in extra_cpu], 1e3, 2)}")


def against_baseline(baseline: str, rounds: int, toggled_args: list[str], ranks: int = RANKS) -> None:
    """Measurement 1 for the observer with this tree and with ``baseline``'s on ``ranks`` ranks,
    alternated, paired per round (see the module's docstring)."""
    print("round  load  baseline wall  baseline cpu  this wall  this cpu  paired wall  paired cpu")
    this_rows, base_rows, threads = [], [], {"baseline": [], "this": []}
    for index in range(rounds):
        load = os.getloadavg()[0]
        order = [("this", sys.executable), ("baseline", baseline)]
        found = dict((name, toggled("observer", toggled_args, python, ranks)) for name, python in
                     (order if index % 2 == 0 else order[::-1]))
        this, base = found["this"], found["baseline"]
        this_rows.append(this[:2])
        base_rows.append(base[:2])
        threads["this"].append(this[2])
        threads["baseline"].append(base[2])
        print(f"{index:>5}  {load:>4.1f}  {base[0]:>13.3f}  {base[1]:>12.3f}  {this[0]:>9.3f}  {this[1]:>8.3f}  "
              f"{this[0] / base[0]:>11.3f}  {this[1] / base[1]:>10.3f}", flush=True)
    print()
    print(f"in one process, on-step ÷ off-step, median (min–max) over {rounds} rounds:")
    for name, rows in (("baseline", base_rows), ("this tree", this_rows)):
        print(f"  {name}: wall {spread([r[0] for r in rows])}, CPU {spread([r[1] for r in rows])}")
    print("  paired, this ÷ baseline: wall "
          f"{spread([t[0] / b[0] for t, b in zip(this_rows, base_rows)])}, CPU "
          f"{spread([t[1] / b[1] for t, b in zip(this_rows, base_rows)])}")
    for name in ("baseline", "this"):
        print(f"{name}: rank 0's CPU per step by thread, observed minus not, ms, median (min–max):")
        print_threads(threads[name])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--example", choices=("fsdp", "ddp"), default="fsdp")
    parser.add_argument("--steps", type=int, default=100, help="steps per in-process run (half of them observed)")
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--quick", action="store_true",
                        help=f"one round, 12 steps of a small model on {QUICK_RANKS} ranks (seconds)")
    parser.add_argument("--baseline", metavar="PYTHON", help="compare the observer with another tree's, alternated")
    args = parser.parse_args()
    ranks = RANKS
    if args.quick:
        args.rounds, args.steps, args.dim, args.layers, args.batch, ranks = 1, 12, 64, 2, 32, QUICK_RANKS
    model_args = ["--dim", str(args.dim), "--layers", str(args.layers), "--batch", str(args.batch)]
    toggled_args = ["--example", args.example, "--steps", str(args.steps), *model_args]
    script = ROOT / "examples" / f"{args.example}_train.py"
    e2e_steps, warmup = max(8, args.steps // 4), 3
    e2e_args = ["--steps", str(e2e_steps), *model_args]
    print(f"{args.example} example, {' '.join(model_args)}, {ranks} gloo ranks, {args.rounds} rounds")
    if args.baseline:
        against_baseline(args.baseline, args.rounds, toggled_args, ranks)
        return
    print("round  observer wall  observer cpu  dispatch-mode wall  dispatch-mode cpu  torchrun ms  collviz run ms")
    rows = []
    extra_cpu: list[dict[str, float]] = []
    for index in range(args.rounds):
        *observer, observer_threads = toggled("observer", toggled_args, ranks=ranks)
        *mode, _ = toggled("dispatch-mode", toggled_args, ranks=ranks)
        bare = end_to_end(torchrun(ranks=ranks), script, e2e_args, warmup)
        watched = end_to_end(collviz_run(ranks=ranks), script, e2e_args, warmup)
        rows.append((*observer, *mode, bare, watched))
        extra_cpu.append(observer_threads)
        print(f"{index:>5}  {observer[0]:>13.3f}  {observer[1]:>12.3f}  {mode[0]:>18.3f}  {mode[1]:>17.3f}  "
              f"{bare * 1e3:>11.1f}  {watched * 1e3:>14.1f}", flush=True)
    columns = list(zip(*rows))
    print()
    print(f"in one process, on-step ÷ off-step, median (min–max) over {args.rounds} runs:")
    print(f"  collviz's observer: wall {spread(list(columns[0]))}, CPU {spread(list(columns[1]))}")
    print(f"  empty dispatch mode: wall {spread(list(columns[2]))}, CPU {spread(list(columns[3]))}")
    print(f"end to end, median step ({e2e_steps} steps, {warmup} warm-up), ms:")
    print(f"  torchrun {spread(list(columns[4]), 1e3, 1)}; collviz run {spread(list(columns[5]), 1e3, 1)}; "
          f"ratio {spread([w / b for b, w in zip(columns[4], columns[5])])}")
    print("collviz's observer: rank 0's CPU per step by thread, observed minus not, ms, median (min–max):")
    print_threads(extra_cpu)


if __name__ == "__main__":
    main()
