"""``collviz bench all-reduce --gpus 4`` busbw ÷ a bare torch.distributed loop's busbw, same sizes, same run.

Both sides time one all_reduce per iteration the same way (restore the input, barrier, time the
call) on 4 gloo ranks forked after one ``import torch``, one intra-op thread per rank, and report
the slowest rank's median (and best); busbw uses the nccl-tests factor 2(n−1)/n on both, so the ratio of
busbw is the inverse ratio of times. Rounds alternate (bare at every size, then one collviz bench
sweep) so machine noise hits both; the table shows the median over rounds, the median of the
per-round (paired) ratios, and the ratio of best calls. Target: ≥ 0.97 at ≥ 1 MiB.

    python benchmarks/bench_vs_bare.py [--rounds 5] [--iters 20] [--min-size 1048576]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bare import all_reduce_loop, summarise  # noqa: E402

from collviz.runtime.protocol import Collective  # noqa: E402
from collviz.runtime.trace import read_trace  # noqa: E402

WORLD = 4
FACTOR = 2 * (WORLD - 1) / WORLD
SIZES = [64 * 1024 * 2**k for k in range(9)]  # 64 KiB … 16 MiB, doubling like the sweep


def collviz_sweep(sizes: list[int], iters: int, warmup: int, workdir: Path) -> dict[int, tuple[float, float]]:
    """size → (median, best) all_reduce ns of the slowest rank, from one recorded ``collviz bench`` run.

    The table's own figure is the median (its ``time_us``); both are computed here from the trace
    with the same function as the bare side's.
    """
    trace = workdir / "bench.cvz"
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
    times = {size: summarise(list(ranks.values())) for size, ranks in per_size.items()}
    for row in rows:  # the table's median is the trace's median
        assert abs(row["time_us"] * 1e3 - times[row["size"]][0]) < 1, row
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of both sides")
    parser.add_argument("--iters", type=int, default=20, help="timed calls per size on each side")
    parser.add_argument("--warmup", type=int, default=0,
                        help="collviz bench's untimed calls per size (default 0: the bare loop has none either)")
    parser.add_argument("--min-size", type=int, default=SIZES[0], help="smallest size in bytes (a power of 2)")
    args = parser.parse_args()
    sizes = [size for size in SIZES if size >= args.min_size]
    bare: dict[int, list[tuple[float, float]]] = {size: [] for size in sizes}
    ours: dict[int, list[tuple[float, float]]] = {size: [] for size in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for size in sizes:
                bare[size].append(all_reduce_loop(WORLD, size // 4, args.iters, tmp))
            for size, times in collviz_sweep(sizes, args.iters, args.warmup, Path(tmp)).items():
                ours[size].append(times)
            print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(f"all_reduce, {WORLD} gloo ranks, float32, {args.iters} timed calls per size; slowest rank's median "
          f"(and best); median over {args.rounds} alternating rounds; busbw = S/t × {FACTOR:g}, GB/s; "
          f"ratio = collviz busbw ÷ bare busbw")
    print(f"{'size':>10} {'bare µs':>9} {'collviz µs':>10} {'bare busbw':>10} {'collviz busbw':>13} {'ratio':>6}"
          f" {'paired':>7} {'best ratio':>10}   per-round ratios")
    for size in sizes:
        b = statistics.median(t[0] for t in bare[size]) / 1e3
        o = statistics.median(t[0] for t in ours[size]) / 1e3
        paired = [bt[0] / ot[0] for bt, ot in zip(bare[size], ours[size])]
        best = statistics.median(t[1] for t in bare[size]) / statistics.median(t[1] for t in ours[size])
        print(f"{size:>10} {b:>9.1f} {o:>10.1f} {size / b / 1e3 * FACTOR:>10.3f} {size / o / 1e3 * FACTOR:>13.3f}"
              f" {b / o:>6.3f} {statistics.median(paired):>7.3f} {best:>10.3f}   "
              + " ".join(f"{r:.2f}" for r in paired), flush=True)


if __name__ == "__main__":
    main()
