"""The example's FSDP2 (or DDP) training step, with one observer switched on for half of the
steps in this same process (order off, on, on, off, … so drift cancels): its marginal cost per
step, without process-to-process noise. Rank 0 writes {"off": [...], "on": [...], "cpu off":
[...], "cpu on": [...], "threads": {...}} to the file named by ``--times``: each step's wall time
and the CPU time its process (every thread: the script's, gloo's, collviz's) used in it, in
seconds; and, under "threads", each thread's mean CPU per step, on and off (``{"on": {name: s},
"off": …}``: the script's thread is ``script``, collviz's are named ``collviz-…``, and the threads
Python did not start — gloo's, ZeroMQ's — are together ``other``).

    collviz run --nproc 4 --observe _toggled_steps.py --toggle observer  [example options]   (collviz's observer)
    torchrun --nproc-per-node 4 _toggled_steps.py --toggle dispatch-mode  …        (an empty TorchDispatchMode)

Used by benchmarks/userjob_overhead.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import threading
import time
from collections import Counter
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


def thread_cpu() -> Counter:
    """CPU seconds each thread of this process has used so far, by thread name (see the module's
    docstring), from /proc (Linux); empty elsewhere. Called on the script's thread."""
    names = {thread.native_id: thread.name for thread in threading.enumerate()}
    names[threading.get_native_id()] = "script"  # a forked worker's MainThread keeps its parent's native id
    used: Counter = Counter()
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return used
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/schedstat") as stat:
                on_cpu_ns = int(stat.read().split()[0])  # ns precision (stat's utime counts 10 ms ticks)
        except OSError:  # the thread ended meanwhile
            continue
        used[names.get(int(task), "other")] += on_cpu_ns / 1e9
    return used


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
    try:
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
        by_thread = {"on": Counter(), "off": Counter()}
        for index in range(args.steps):
            wanted = index % 4 in (1, 2)
            if wanted != on:
                (turn_on if wanted else turn_off)()
                on = wanted
            dist.barrier()  # every rank starts the step together, whatever switching took
            threads_before = thread_cpu()
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
                by_thread["on" if on else "off"].update(thread_cpu() - threads_before)
        if on and args.toggle == "dispatch-mode":
            turn_off()
        if not on and args.toggle == "observer":
            turn_on()  # collviz run closes it after the script
        if rank == 0:
            steps = {half: len(times[half]) for half in ("on", "off")}
            threads = {half: {name: used / steps[half] for name, used in by_thread[half].items()} for half in steps}
            Path(args.times).write_text(json.dumps({**times, "threads": threads}))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
