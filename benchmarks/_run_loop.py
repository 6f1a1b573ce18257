"""A training-like loop on 2 (or more) gloo ranks that times itself, for ``run_overhead.py``: each
step a little compute (four 64×192 @ 192×192 matmuls) and 17 small collectives (15 all-reduces of
1-16 KiB, an all-gather and a broadcast). The loop's wall and CPU time (the rank's whole process,
every thread) and the CPU time of its threads but the script's own (gloo's, and any launcher's),
after a warm-up and between two barriers, go to ``TIMES.<rank>`` as JSON.

    torchrun --nproc-per-node 2 _run_loop.py --times FILE [--steps 1000]
    collviz run --nproc 2 --headless _run_loop.py --times FILE [--steps 1000]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.distributed as dist


def main() -> None:
    """Join the group, warm up, time the loop, write the times."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--times", required=True)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        torch.manual_seed(rank)
        weights, inputs = torch.randn(192, 192) / 14, torch.randn(64, 192)
        grads = [torch.randn(count) for count in (256, 1024, 4096) * 5]
        gathered = [torch.zeros(512) for _ in range(world)]
        shared = torch.zeros(2048)

        def step() -> None:
            hidden = inputs
            for _ in range(4):
                hidden = torch.tanh(hidden @ weights)
            for grad in grads:
                dist.all_reduce(grad)
                grad.mul_(1 / world)
            dist.all_gather(gathered, hidden.flatten()[:512].contiguous())
            dist.broadcast(shared, src=0)

        for _ in range(args.warmup):
            step()
        dist.barrier()
        wall, cpu, main_cpu = time.perf_counter(), time.process_time(), time.thread_time()
        for _ in range(args.steps):
            step()
        dist.barrier()
        wall, cpu, main_cpu = time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - main_cpu
        with open(f"{args.times}.{rank}", "w") as out:
            json.dump({"wall_s": wall, "cpu_s": cpu, "other_threads_cpu_s": cpu - main_cpu, "steps": args.steps}, out)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
