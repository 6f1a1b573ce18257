"""α's error from collviz's α–β fit (rows weighted by 1/t) against an unweighted fit, on synthetic sweeps.

Each sweep is what ``collviz bench all-reduce --algo ring,recursive-doubling,tree,direct`` gives on
4 ranks over 1 KiB … 16 MiB (15 sizes, 4 algorithms: their hops and bytes sent per rank from
collviz's own plans), every time ``α·hops + β·bytes`` with α and β known, times (1 + N(0, noise)).
Both fits see the same rows; the table shows |fitted α / α − 1| over the sweeps. Nothing is run on
ranks: this measures the estimator.

    python benchmarks/alpha_beta_fit.py [--sweeps 300] [--noise 0.1] [--seed 0] [--quick]
"""

from __future__ import annotations

import argparse
import random
import statistics

import numpy as np

from collviz.runtime.reports.alpha_beta import fit_alpha_beta
from collviz.runtime.reports.bench_table import BenchRow
from collviz.runtime.programs.algorithms.plans import ALGORITHMS, plan

WORLD = 4
SIZES = [1024 * 2**k for k in range(15)]
MACHINES = [(50.0, 0.0005), (30.0, 0.001), (100.0, 0.0002)]
"""(α µs per hop, β µs per byte): gloo-like latencies, 1 to 5 GB/s."""


def shapes() -> dict[str, tuple[int, float]]:
    """algorithm → (hops, bytes the busiest rank sends per byte of S), from collviz's plans."""
    count = 1024
    result = {}
    for algo in ALGORITHMS["all_reduce"]:
        steps = plan("all_reduce", algo, WORLD, count)
        result[algo] = (len(steps.hops), max(steps.sent(r) for r in range(WORLD)) / count)
    return result


def sweep(rng: random.Random, alpha: float, beta: float, noise: float, algos: dict) -> list[BenchRow]:
    rows = []
    for size in SIZES:
        for algo, (hops, per_byte) in algos.items():
            sent = int(per_byte * size)
            rows.append(BenchRow(op="all_reduce", size=size, count=size // 4, dtype="float32", iters=1,
                                 time_us=(alpha * hops + beta * sent) * (1 + rng.gauss(0, noise)), algbw_gbps=0.0,
                                 busbw_gbps=0.0, bus_factor=1.5, bus_factor_text="", wrong=0, algo=algo, hops=hops,
                                 sent_bytes=sent))
    return rows


def unweighted_alpha(rows: list[BenchRow]) -> float:
    """α of ordinary least squares, every row's absolute error counted alike."""
    design = np.array([[r.hops, r.sent_bytes] for r in rows], dtype=float)
    return float(np.linalg.lstsq(design, np.array([r.time_us for r in rows]), rcond=None)[0][0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweeps", type=int, default=300)
    parser.add_argument("--noise", type=float, default=0.1, help="relative noise of each time (σ)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="10 sweeps of one machine: the same code path, fast")
    args = parser.parse_args()
    sweeps, machines = (10, MACHINES[:1]) if args.quick else (args.sweeps, MACHINES)
    algos = shapes()
    print(f"all_reduce on {WORLD} ranks, {', '.join(f'{a} ({h} hops, {k:g}·S sent)' for a, (h, k) in algos.items())}; "
          f"{len(SIZES)} sizes 1 KiB … 16 MiB; {sweeps} sweeps, noise {args.noise:.0%}; |α error|")
    print("| α (µs) | β (ns/B) | unweighted median | p90 | weighted 1/t median | p90 |\n|---|---|---|---|---|---|")
    rng = random.Random(args.seed)
    for alpha, beta in machines:
        weighted, unweighted = [], []
        for _ in range(sweeps):
            rows = sweep(rng, alpha, beta, args.noise, algos)
            weighted.append(abs(fit_alpha_beta(rows).alpha_us / alpha - 1))
            unweighted.append(abs(unweighted_alpha(rows) / alpha - 1))
        cells = []
        for errors in (unweighted, weighted):
            errors.sort()
            cells += [f"{statistics.median(errors):.1%}", f"{errors[int(0.9 * (len(errors) - 1))]:.1%}"]
        print(f"| {alpha:g} | {beta * 1e3:g} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
