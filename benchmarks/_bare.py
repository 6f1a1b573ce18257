"""Bare torch.distributed baselines the benchmarks compare collviz against (no collviz imports)."""

from __future__ import annotations

import datetime
import json
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


Setup = Callable[[int, int], Callable[[], Any]]
"""``setup(rank, numel)`` runs in the rank before the process group exists and returns a function
that makes the input tensor (benchmarks/overhead_ab.py switches collviz's additions on with it)."""


def _plain_input(rank: int, numel: int) -> Callable[[], Any]:
    import torch

    return lambda: torch.arange(numel, dtype=torch.float32) + rank


def _rank_loop(rank: int, world: int, port: int, numel: int, iters: int, out_dir: str, setup: Setup) -> None:
    import torch
    import torch.distributed as dist

    # One intra-op thread: with 4 ranks × 2 OpenMP threads on 2 cores, idle OpenMP threads spin
    # against gloo and double the bare time (measured), which would flatter collviz's ratio.
    torch.set_num_threads(1)
    make_input = setup(rank, numel)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    tensor = make_input()
    pristine = tensor.clone()
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


def all_reduce_loop(world: int, numel: int, iters: int, out_dir: str,
                    setup: Setup = _plain_input) -> tuple[float, float]:
    """(median, best) all_reduce time in ns of the slowest rank; same protocol as collviz:
    restore the input, barrier, time one call.

    Ranks are forked from this process after one ``import torch``, as collviz forks its workers.
    """
    import torch  # noqa: F401  (imported once, before forking, like collviz)

    port = free_port()
    pids = []
    for rank in range(world):
        pid = os.fork()
        if pid == 0:
            try:
                _rank_loop(rank, world, port, numel, iters, out_dir, setup)
            finally:
                os._exit(1)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    per_rank = []
    for rank in range(world):
        with open(os.path.join(out_dir, f"rank{rank}.json")) as f:
            per_rank.append(json.load(f))
    return summarise(per_rank)


def summarise(per_rank: list[list[int]]) -> tuple[float, float]:
    """(slowest rank's median, slowest rank's best) of per-rank call times."""
    return max(statistics.median(t) for t in per_rank), max(min(t) for t in per_rank)


if __name__ == "__main__":  # one fresh-interpreter rank of the bare startup floor
    import torch
    import torch.distributed as dist

    rank, world, port = (int(x) for x in sys.argv[1:4])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    t = torch.ones(1)
    dist.all_reduce(t)
    os._exit(0)
