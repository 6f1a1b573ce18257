"""Instrumented collective time ÷ bare torch.distributed time, all-reduce on 4 gloo ranks.

Both sides use the same protocol per call (restore the input, barrier, time one all_reduce) and
report the slowest rank's median. The two are measured alternately in the same run so machine
noise hits both. Target: ratio ≤ 1.03 at ≥ 1 MiB.

    python benchmarks/overhead.py [--rounds 3] [--quick]

``--quick`` measures one round of 5 calls at 4 B and at 64 KiB: the same code path in seconds (the
test suite runs it so the benchmark cannot break silently); its figures mean nothing.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bare import all_reduce_loop, summarise  # noqa: E402

from collviz.runtime.wire.protocol import Collective  # noqa: E402
from collviz.runtime.wire.trace import read_trace  # noqa: E402

WORLD = 4
SIZES = [("4 B", 4, 400), ("64 KiB", 64 * 1024, 300), ("1 MiB", 1024**2, 100), ("16 MiB", 16 * 1024**2, 20)]


def instrumented(size: int, iters: int, workdir: Path) -> tuple[float, float]:
    """(median, best) all_reduce time in ns of the slowest rank, as collviz recorded it."""
    trace = workdir / "overhead.cvz"  # removed once read: --record refuses to overwrite a file
    subprocess.run(
        [sys.executable, "-m", "collviz.app.cli", "all-reduce", "--gpus", str(WORLD), "--backend", "gloo",
         "--size", str(size), "--iters", str(iters), "--headless", "--record", str(trace)],
        check=True, capture_output=True,
    )
    per_rank: dict[int, list[int]] = {}
    for event in read_trace(trace).events:
        if isinstance(event, Collective) and event.edge == "end":
            per_rank.setdefault(event.rank, []).append(event.duration_ns)
    trace.unlink()
    return summarise(list(per_rank.values()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="alternating measurements of each side")
    parser.add_argument("--quick", action="store_true", help="one round, 5 calls at 4 B and 64 KiB: a fast check that it runs")
    args = parser.parse_args()
    sizes = [(label, size, 5) for label, size, _ in SIZES[:2]] if args.quick else SIZES
    if args.quick:
        args.rounds = 1
    print(f"all_reduce, {WORLD} gloo ranks, float32; slowest rank's median per call; {args.rounds} alternating rounds")
    print(f"{'size':>8} {'iters':>6} {'bare median':>12} {'collviz median':>15} {'ratio':>6}"
          f" {'bare best':>10} {'collviz best':>13} {'ratio':>6}   (µs)")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for label, size, iters in sizes:
            bare, ours = [], []
            for _ in range(args.rounds):
                bare.append(all_reduce_loop(WORLD, size // 4, iters, tmp))
                ours.append(instrumented(size, iters, workdir))
            b, o = statistics.median(x[0] for x in bare), statistics.median(x[0] for x in ours)
            bb, ob = statistics.median(x[1] for x in bare), statistics.median(x[1] for x in ours)
            print(f"{label:>8} {iters:>6} {b / 1e3:>12.1f} {o / 1e3:>15.1f} {o / b:>6.3f}"
                  f" {bb / 1e3:>10.1f} {ob / 1e3:>13.1f} {ob / bb:>6.3f}", flush=True)


if __name__ == "__main__":
    main()
