"""``collviz bench all-reduce --gpus 4`` busbw ÷ a bare torch.distributed loop's busbw, same sizes, same run.

Both sides sweep every size in one launch of 4 gloo ranks forked after one ``import torch``, one
intra-op thread per rank, and per size do the same thing: make the input, run the same number of
untimed warm-up calls, then restore the input, barrier and time one all_reduce per iteration, then
check the result. Each reports the slowest rank's median; busbw uses the nccl-tests factor 2(n−1)/n
on both, so the ratio of busbw is the inverse ratio of times. Each round runs a bare sweep (A), one
collviz bench sweep, and a bare sweep again (B), so machine noise hits both sides; the table shows
the ratio of the medians over rounds, the geometric mean of the per-round (paired) ratios with a
bootstrap 95 % interval, and A÷B: the bare loop measured against itself, which is how far apart two
identical programs land on this machine. Target: ≥ 0.97 at ≥ 1 MiB.

    python benchmarks/bench_vs_bare.py [--rounds 24] [--iters 20] [--warmup 5] [--min-size 1048576] [--quick]

``--quick`` runs two rounds of 3 calls at 64 KiB: the same code path in seconds (the test suite
runs it so the benchmark cannot break silently); its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bare import all_reduce_sweep, summarise  # noqa: E402

from collviz.runtime.wire.protocol import Collective  # noqa: E402
from collviz.runtime.wire.trace import read_trace  # noqa: E402

WORLD = 4
FACTOR = 2 * (WORLD - 1) / WORLD
SIZES = [64 * 1024 * 2**k for k in range(9)]  # 64 KiB … 16 MiB, doubling like the sweep


def collviz_sweep(sizes: list[int], iters: int, warmup: int, workdir: Path) -> dict[int, tuple[float, float]]:
    """size → (median, best) all_reduce ns of the slowest rank, from one recorded ``collviz bench`` run.

    The table's own figure is the median (its ``time_us``); both are computed here from the trace
    with the same function as the bare side's.
    """
    trace = workdir / "bench.cvz"  # removed once read: --record refuses to overwrite a file
    result = subprocess.run(
        [sys.executable, "-m", "collviz.app.cli", "bench", "all-reduce", "--gpus", str(WORLD), "--backend", "gloo",
         "--sizes", f"{sizes[0]}:{sizes[-1]}", "--iters", str(iters), "--warmup", str(warmup), "--json",
         "--record", str(trace)],
        check=True, capture_output=True, text=True,
    )
    rows = json.loads(result.stdout)["rows"]
    assert all(row["wrong"] == 0 for row in rows), "collviz bench reported wrong results"
    per_size: dict[int, dict[int, list[int]]] = {}
    for event in read_trace(trace).events:
        if isinstance(event, Collective) and event.edge == "end":
            per_size.setdefault(event.algo_bytes, {}).setdefault(event.rank, []).append(event.duration_ns)
    trace.unlink()
    times = {size: summarise(list(ranks.values())) for size, ranks in per_size.items()}
    for row in rows:  # the table's median is the trace's median
        assert abs(row["time_us"] * 1e3 - times[row["size"]][0]) < 1, row
    return times


def bare_sweep(sizes: list[int], iters: int, warmup: int, workdir: Path) -> dict[int, tuple[float, float]]:
    """size → (median, best) all_reduce ns of the slowest rank, from one launch of the bare loop."""
    times = all_reduce_sweep(WORLD, [size // 4 for size in sizes], iters, str(workdir), warmup=warmup)
    return {numel * 4: result for numel, result in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=24, help="rounds of bare, collviz, bare again")
    parser.add_argument("--iters", type=int, default=20, help="timed calls per size on each side")
    parser.add_argument("--warmup", type=int, default=5,
                        help="untimed calls per size on both sides (default 5, collviz bench's own default)")
    parser.add_argument("--min-size", type=int, default=SIZES[0], help="smallest size in bytes (a power of 2)")
    parser.add_argument("--quick", action="store_true", help="two rounds of 3 calls at 64 KiB: a fast check that it runs")
    args = parser.parse_args()
    sizes = [size for size in SIZES if size >= args.min_size]
    if args.quick:
        args.rounds, args.iters, args.warmup, sizes = 2, 3, 1, SIZES[:1]
    runs: dict[str, dict[int, list[tuple[float, float]]]] = {side: {size: [] for size in sizes}
                                                            for side in ("bare A", "collviz", "bare B")}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for side, sweep in (("bare A", bare_sweep), ("collviz", collviz_sweep), ("bare B", bare_sweep)):
                for size, times in sweep(sizes, args.iters, args.warmup, Path(tmp)).items():
                    runs[side][size].append(times)
            print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(f"all_reduce, {WORLD} gloo ranks, float32, {args.warmup} warm-up and {args.iters} timed calls per size; "
          f"slowest rank's median; {args.rounds} rounds of bare A, collviz, bare B; busbw = S/t × {FACTOR:g}, GB/s; "
          f"ratio = collviz busbw ÷ bare busbw (medians over rounds, A and B pooled); paired = geometric mean of the "
          f"per-round ratios with a bootstrap 95 % interval; A÷B = the same for the bare loop against itself")
    print(f"{'size':>10} {'bare µs':>9} {'collviz µs':>10} {'bare busbw':>10} {'collviz busbw':>13} {'ratio':>6}"
          f" {'paired':>7} {'interval':>12} {'A÷B':>6} {'interval':>12}")
    for size in sizes:
        bare = [t[0] for t in runs["bare A"][size] + runs["bare B"][size]]
        ours = [t[0] for t in runs["collviz"][size]]
        b, o = statistics.median(bare) / 1e3, statistics.median(ours) / 1e3
        paired = [(a[0] + c[0]) / 2 / t[0] for a, c, t in zip(runs["bare A"][size], runs["bare B"][size],
                                                              runs["collviz"][size])]
        self_paired = [c[0] / a[0] for a, c in zip(runs["bare A"][size], runs["bare B"][size])]
        (gm, low, high), (self_gm, self_low, self_high) = geomean_interval(paired), geomean_interval(self_paired)
        print(f"{size:>10} {b:>9.1f} {o:>10.1f} {size / b / 1e3 * FACTOR:>10.3f} {size / o / 1e3 * FACTOR:>13.3f}"
              f" {b / o:>6.3f} {gm:>7.3f} {low:>5.3f}–{high:<6.3f} {self_gm:>6.3f} {self_low:>5.3f}–{self_high:<6.3f}",
              flush=True)


def geomean_interval(ratios: list[float], resamples: int = 10_000) -> tuple[float, float, float]:
    """Geometric mean of ``ratios`` and its bootstrap 95 % interval (fixed seed: reruns print the same)."""
    logs = [math.log(r) for r in ratios]
    rng = random.Random(0)
    means = sorted(statistics.fmean(rng.choices(logs, k=len(logs))) for _ in range(resamples))
    return (math.exp(statistics.fmean(logs)), math.exp(means[int(0.025 * resamples)]),
            math.exp(means[int(0.975 * resamples) - 1]))

if __name__ == "__main__":
    main()
