"""A short DDP training loop to copy: every rank holds the whole model, and each step's backward
all-reduces the gradients (DDP's buckets; this model's fit in one).

Runs as it is under torchrun, or under collviz to watch its collectives:

    torchrun --nproc-per-node 4 examples/ddp_train.py --steps 3
    collviz run --nproc 4 examples/ddp_train.py --steps 3

CPU with gloo when no GPU is visible; one GPU per rank with NCCL otherwise (the GPU path is
torch's own and has not been run by collviz's tests). ``collviz.step`` marks each training step
(one step in collviz's viewer) and ``collviz.watch`` names what its memory chart counts; without
collviz installed, or outside ``collviz run``, both do nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

try:
    from collviz import step, watch
except ImportError:  # collviz is not installed: the same script, unobserved
    step, watch = nullcontext, lambda *objects: None


def build_model(dim: int, layers: int) -> nn.Sequential:
    """``layers`` linear layers with ReLU between them."""
    parts: list[nn.Module] = []
    for index in range(layers):
        parts += [nn.Linear(dim, dim)] + ([nn.ReLU()] if index < layers - 1 else [])
    return nn.Sequential(*parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--times", help="write rank 0's step times (seconds, JSON list) to this file")
    args = parser.parse_args()

    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    rank = dist.get_rank()
    try:  # the process group ends however the training does: a rank that exits without it may abort
        torch.manual_seed(0)  # DDP broadcasts rank 0's weights anyway; this keeps runs repeatable
        model = DistributedDataParallel(build_model(args.dim, args.layers).to(device),
                                        device_ids=[local_rank] if device.type == "cuda" else None)
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
        watch(model, optimizer)
        data = torch.Generator(device=device).manual_seed(1000 + rank)  # each rank its own batches

        times = []
        for index in range(args.steps):
            started = time.perf_counter()
            with step(f"train step {index}"):
                x = torch.randn(args.batch, args.dim, device=device, generator=data)
                loss = model(x).pow(2).mean()
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            if device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - started)
            if rank == 0:
                print(f"step {index}: loss {loss.item():.4f}", flush=True)
        if args.times and rank == 0:
            with open(args.times, "w") as out:
                json.dump(times, out)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
