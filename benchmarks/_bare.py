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


MakeInput = Callable[[int, int], Any]
"""``make_input(rank, numel)``: rank ``rank``'s float32 input tensor of ``numel`` elements."""

Setup = Callable[[int], MakeInput]
"""``setup(rank)`` runs once in each rank before the process group exists and returns how inputs
are made (benchmarks/overhead_ab.py switches collviz's additions on with it)."""


def _plain_input(rank: int) -> MakeInput:
    import torch

    return lambda source_rank, numel: torch.arange(numel, dtype=torch.float32) + source_rank


def _rank_loop(rank: int, world: int, port: int, numels: list[int], iters: int, warmup: int, out_dir: str,
               setup: Setup) -> None:
    import torch
    import torch.distributed as dist

    # One intra-op thread: with 4 ranks × 2 OpenMP threads on 2 cores, idle OpenMP threads spin
    # against gloo and double the bare time (measured), which would flatter collviz's ratio.
    torch.set_num_threads(1)
    make_input = setup(rank)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    times: dict[int, list[int]] = {}
    try:
        for numel in numels:  # one process sweeps every size, as collviz bench does
            tensor = make_input(rank, numel)
            pristine = tensor.clone()
            for _ in range(warmup):
                dist.all_reduce(tensor)
            times[numel] = []
            for iteration in range(iters):
                if warmup or iteration:
                    tensor.copy_(pristine)
                dist.barrier()
                start = time.perf_counter_ns()
                dist.all_reduce(tensor)
                times[numel].append(time.perf_counter_ns() - start)
            expected = sum(make_input(source, numel) for source in range(world))
            if not torch.equal(tensor, expected):
                raise AssertionError(f"bare all_reduce of {numel} elements gave a wrong result on rank {rank}")
            del tensor, pristine, expected
    finally:
        dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(times, f)
    os._exit(0)


def all_reduce_sweep(world: int, numels: list[int], iters: int, out_dir: str, warmup: int = 0,
                     setup: Setup = _plain_input) -> dict[int, tuple[float, float]]:
    """numel → (median, best) all_reduce time in ns of the slowest rank, every size in one launch.

    Same protocol as collviz: per size, make the input, run ``warmup`` untimed calls, then restore
    the input, barrier and time one call, ``iters`` times; then check the result. Ranks are forked
    from this process after one ``import torch``, as collviz forks its workers.
    """
    import torch  # noqa: F401  (imported once, before forking, like collviz)

    port = free_port()
    pids = []
    for rank in range(world):
        pid = os.fork()
        if pid == 0:
            try:
                _rank_loop(rank, world, port, numels, iters, warmup, out_dir, setup)
            finally:
                os._exit(1)
        pids.append(pid)
    failed = [pid for pid in pids if os.waitpid(pid, 0)[1] != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} bare rank(s) failed")
    per_rank = []
    for rank in range(world):
        with open(os.path.join(out_dir, f"rank{rank}.json")) as f:
            per_rank.append({int(numel): calls for numel, calls in json.load(f).items()})
    return {numel: summarise([calls[numel] for calls in per_rank]) for numel in numels}


def all_reduce_loop(world: int, numel: int, iters: int, out_dir: str,
                    setup: Setup = _plain_input) -> tuple[float, float]:
    """(median, best) all_reduce time in ns of the slowest rank at one size, no warm-up."""
    return all_reduce_sweep(world, [numel], iters, out_dir, setup=setup)[numel]


def summarise(per_rank: list[list[int]]) -> tuple[float, float]:
    """(slowest rank's median, slowest rank's best) of per-rank call times."""
    return max(statistics.median(t) for t in per_rank), max(min(t) for t in per_rank)


if __name__ == "__main__":  # one fresh-interpreter rank of the bare startup floor
    import torch
    import torch.distributed as dist

    rank, world, port = (int(x) for x in sys.argv[1:4])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        dist.all_reduce(torch.ones(1))
    finally:
        dist.destroy_process_group()
    os._exit(0)
