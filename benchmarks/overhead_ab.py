"""Which of collviz's per-rank additions costs time? The bare all-reduce loop, A/B.

Runs the bare loop of ``_bare.py`` (barrier, time one all_reduce; 4 gloo ranks forked after one
``import torch``; one intra-op thread each) with each thing a collviz worker adds switched on:
``gen`` collviz's generated inputs, ``zmq`` the background event sender and its socket, ``tracker``
the storage tracker entered and suspended around the loop, and all three. Prints the slowest
rank's median per variant and round (µs, 1 MiB).

    python benchmarks/overhead_ab.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bare import free_port  # noqa: E402

VARIANTS = ("bare", "gen", "zmq", "tracker", "gen+zmq+tracker")
NUMEL = 262_144  # 1 MiB of float32


def _rank(rank: int, port: int, iters: int, out_dir: str, variant: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    if "zmq" in variant:
        from collviz.runtime.transport import EventEmitter

        EventEmitter(f"ipc://{tempfile.mkdtemp()}/events", "ab", rank)  # idle sender thread + socket
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=4)
    if "gen" in variant:
        tensor = (torch.arange(NUMEL, dtype=torch.float64) + rank * NUMEL + 1).to(torch.float32)
    else:
        tensor = torch.arange(NUMEL, dtype=torch.float32) + rank
    pristine = tensor.clone()
    if "tracker" in variant:
        from collviz.runtime.memory import StorageTracker

        tracker = StorageTracker()
        tracker.__enter__()
        tracker.suspended().__enter__()
    times = []
    for _ in range(iters):
        tensor.copy_(pristine)
        dist.barrier()
        start = time.perf_counter_ns()
        dist.all_reduce(tensor)
        times.append(time.perf_counter_ns() - start)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(times, f)
    os._exit(0)


def measure(variant: str, iters: int) -> float:
    """Slowest rank's median all_reduce time in µs for one variant."""
    import torch  # noqa: F401  (once, before forking)

    port, out_dir, pids = free_port(), tempfile.mkdtemp(), []
    for rank in range(4):
        pid = os.fork()
        if pid == 0:
            try:
                _rank(rank, port, iters, out_dir, variant)
            finally:
                os._exit(1)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    medians = []
    for rank in range(4):
        with open(os.path.join(out_dir, f"rank{rank}.json")) as f:
            medians.append(statistics.median(json.load(f)))
    return max(medians) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=150)
    args = parser.parse_args()
    print("round  " + "  ".join(f"{v:>16}" for v in VARIANTS) + "   (µs, 1 MiB all_reduce, 4 ranks)")
    for round_index in range(args.rounds):
        print(f"{round_index:>5}  " + "  ".join(f"{measure(v, args.iters):>16.0f}" for v in VARIANTS), flush=True)


if __name__ == "__main__":
    main()
