"""The example's FSDP2 (or DDP) training step, with one observer switched on for half of the
steps in this same process (order off, on, on, off, … so drift cancels): its marginal cost per
step, without process-to-process noise. Rank 0 writes {"off": [...], "on": [...], "cpu off":
[...], "cpu on": [...]} to the file named by ``--times``: each step's wall time and the CPU time
its process (every thread: the script's, gloo's, collviz's) used in it, in seconds.

    collviz run --nproc 4 _toggled_steps.py --toggle observer  [example options]   (collviz's observer)
    torchrun --nproc-per-node 4 _toggled_steps.py --toggle dispatch-mode  …        (an empty TorchDispatchMode)

Used by benchmarks/userjob_overhead.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import time
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.distributed as dist

from collviz import marks, step
from _empty_dispatch_mode import PassThrough

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def example(name: str):
    """The example script as a module (its ``build_model``)."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}_train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def switch(kind: str):
    """(turn on, turn off) for ``kind``: collviz's observer (already on: run under collviz) or an
    empty dispatch mode."""
    if kind == "observer":
        observer = marks._recorder  # the observer collviz run attached around this script
        if observer is None:
            raise SystemExit("--toggle observer runs under collviz run")
        return observer.__enter__, lambda: observer.__exit__(None, None, None)
    mode = PassThrough()
    return mode.__enter__, lambda: mode.__exit__(None, None, None)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--toggle", choices=("observer", "dispatch-mode"), required=True)
    parser.add_argument("--example", choices=("fsdp", "ddp"), default="fsdp")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--times", required=True)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = example(f"{args.example}").build_model(args.dim, args.layers)
    if args.example == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for block in model[:-1]:
            fully_shard(block)
        fully_shard(model)
    else:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.Generator().manual_seed(1000 + rank)
    turn_on, turn_off = switch(args.toggle)
    on = args.toggle == "observer"  # collviz run starts with its observer on
    times: dict[str, list[float]] = {"off": [], "on": [], "cpu off": [], "cpu on": []}
    for index in range(args.steps):
        wanted = index % 4 in (1, 2)
        if wanted != on:
            (turn_on if wanted else turn_off)()
            on = wanted
        dist.barrier()  # every rank starts the step together, whatever switching took
        started, cpu = time.perf_counter(), time.process_time()
        with step(f"train step {index}") if on else nullcontext():
            x = torch.randn(args.batch, args.dim, generator=data)
            model(x).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
        dist.barrier()  # the step's collectives have completed everywhere (the watcher's stamps included)
        if index >= 4:  # warm-up: the first cycle
            times["on" if on else "off"].append(time.perf_counter() - started)
            times["cpu on" if on else "cpu off"].append(time.process_time() - cpu)
    if on and args.toggle == "dispatch-mode":
        turn_off()
    if not on and args.toggle == "observer":
        turn_on()  # collviz run closes it after the script
    if rank == 0:
        Path(args.times).write_text(json.dumps(times))
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
