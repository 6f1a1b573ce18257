"""Which of collviz's per-rank additions costs time? The bare all-reduce loop, A/B.

Runs the bare loop of ``_bare.py`` (barrier, time one all_reduce; 4 gloo ranks forked after one
``import torch``; one intra-op thread each) with each thing a collviz worker adds switched on:
``gen`` collviz's generated inputs, ``zmq`` the background event sender and its socket, ``tracker``
the storage tracker entered and suspended around the loop, and all three. Prints the slowest
rank's median per variant and round (µs, 1 MiB).

    python benchmarks/overhead_ab.py [--rounds 3] [--quick]

``--quick`` runs one round of 5 calls of the bare loop and of all three additions together (the test
suite runs it so the benchmark cannot break silently).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bare import MakeInput, all_reduce_loop  # noqa: E402

VARIANTS = ("bare", "gen", "zmq", "tracker", "gen+zmq+tracker")
NUMEL = 262_144  # 1 MiB of float32


def _setup(variant: str, rank: int) -> MakeInput:
    """Switch on the variant's collviz additions in this rank; return how to make its input."""
    import torch

    if "zmq" in variant:
        from collviz.runtime.wire.transport import EventEmitter

        EventEmitter(f"ipc://{tempfile.mkdtemp()}/events", "ab", rank)  # idle sender thread + socket
    if "tracker" in variant:
        from collviz.runtime.observation.memory import StorageTracker

        tracker = StorageTracker()
        tracker.__enter__()
        tracker.suspended().__enter__()
    if "gen" in variant:
        return lambda source, numel: (torch.arange(numel, dtype=torch.float64) + source * numel + 1).to(torch.float32)
    return lambda source, numel: torch.arange(numel, dtype=torch.float32) + source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=150)
    parser.add_argument("--quick", action="store_true", help="one round of 5 calls, bare and all three: a fast check")
    args = parser.parse_args()
    variants = (VARIANTS[0], VARIANTS[-1]) if args.quick else VARIANTS
    if args.quick:
        args.rounds, args.iters = 1, 5
    print("round  " + "  ".join(f"{v:>16}" for v in variants) + "   (µs, 1 MiB all_reduce, 4 ranks)")
    for round_index in range(args.rounds):
        medians = []
        for variant in variants:
            with tempfile.TemporaryDirectory() as out_dir:
                median, _ = all_reduce_loop(4, NUMEL, args.iters, out_dir, setup=partial(_setup, variant))
            medians.append(median / 1e3)
        print(f"{round_index:>5}  " + "  ".join(f"{m:>16.0f}" for m in medians), flush=True)


if __name__ == "__main__":
    main()
