"""The performance rows (``gpu_check.py --perf``, a second, optional command): the observer's cost
at 4 ranks (collviz's all-reduce time per call ÷ a bare ``torch.distributed`` loop's, same
protocol: barrier, synchronise, time one call, synchronise; 1 and 16 MiB) and ``collviz bench
all-reduce`` latency and busbw at 2 and 4 ranks (ranks share the GPU where there are fewer GPUs).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from .context import Context, free_port
from .report import Finding
from .running import tail

__all__ = ["observer_cost", "latency"]

BARE = """
import datetime, json, os, sys, time
import torch, torch.distributed as dist
from collviz.runtime.backends import choose_backend
rank, world, port, numel, iters, backend, out = sys.argv[1:]
rank, world, numel, iters = int(rank), int(world), int(numel), int(iters)
placement = choose_backend(backend, world).placement(rank)
os.environ.update(placement.environment)
cuda = placement.device_index is not None
device = torch.device("cuda", placement.device_index) if cuda else torch.device("cpu")
if cuda:
    torch.cuda.set_device(device)
dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=120), **({"device_id": device} if cuda else {}))
sync = torch.cuda.synchronize if cuda else (lambda device: None)
tensor = torch.ones(numel, device=device)
times = []
for _ in range(iters + 2):
    dist.barrier()
    sync(device)
    started = time.perf_counter_ns()
    dist.all_reduce(tensor)
    sync(device)
    times.append(time.perf_counter_ns() - started)
open(os.path.join(out, f"bare{rank}.json"), "w").write(json.dumps(times[2:]))
dist.destroy_process_group()
"""
"""One rank of the bare loop: collviz's placement, then plain timed all_reduces (two warm-ups)."""


def _bare(context: Context, world: int, numel: int, iters: int) -> float:
    """The slowest rank's median bare all-reduce time (ns)."""
    port = free_port()
    codes = context.run_ranks("bare", world, lambda rank: [sys.executable, "-c", BARE, str(rank), str(world), str(port),
                                                           str(numel), str(iters), context.backend, context.work])
    if any(codes):
        raise RuntimeError(f"a bare rank failed: exit statuses {codes}")
    return max(statistics.median(json.loads(Path(context.work, f"bare{r}.json").read_text())) for r in range(world))


def observer_cost(context: Context) -> Finding:
    """collviz's per-call all-reduce time ÷ the bare loop's, at ``context.ranks`` ranks."""
    from collviz.runtime.wire.protocol import Collective, RunStart
    from collviz.runtime.wire.trace import read_trace

    iters = 5 if context.quick else 50
    lines, on_nccl = ["| size | collviz (µs) | bare (µs) | ratio |", "|---:|---:|---:|---:|"], True
    for size in [2**20] if context.quick else [2**20, 16 * 2**20]:
        trace = context.work / f"ar-{size}.cvz"
        ran = context.collviz("all-reduce", "--gpus", str(context.ranks), "--backend", context.backend, "--size",
                              str(size), "--iters", str(iters), "--headless", "--record", trace)
        if ran.code:
            return Finding(False, False, lines + [f"exit status {ran.code}:", *tail(ran.output)])
        events = read_trace(trace).events
        start = next(e for e in events if isinstance(e, RunStart))
        on_nccl = on_nccl and start.backend == "nccl" and start.device_kind == "cuda"
        per_rank: dict[int, list[int]] = {}
        for event in events:
            if isinstance(event, Collective) and event.edge == "end" and event.duration_ns:
                per_rank.setdefault(event.rank, []).append(event.duration_ns)
        ours = max(statistics.median(times) for times in per_rank.values())
        bare = _bare(context, context.ranks, size // 4, iters)
        lines.append(f"| {size // 2**20} MiB | {ours / 1e3:.1f} | {bare / 1e3:.1f} | {ours / bare:.3f} |")
    return Finding(True, on_nccl, lines)


def latency(context: Context) -> Finding:
    """``collviz bench all-reduce`` at 2 and 4 ranks, 4 B to 16 MiB (4 B to 1 KiB with ``--quick``)."""
    from collviz.runtime.reports.bench_table import parse_table

    lines: list[str] = []
    held, on_nccl = True, True
    for ranks in (2, 4):
        ran = context.collviz("bench", "all-reduce", "--gpus", str(ranks), "--backend", context.backend, "--sizes",
                              "4:1K" if context.quick else "4:16M", "--iters", "2" if context.quick else "20",
                              "--warmup", "0" if context.quick else "5")
        rows = parse_table(ran.output)
        if ran.code or not rows:
            return Finding(False, False, lines + [f"{ranks} ranks: exit status {ran.code}:", *tail(ran.output)])
        banner = next((line for line in ran.output.splitlines() if line.lstrip("# ").startswith("collviz bench")), "")
        on_nccl = on_nccl and "nccl" in banner.lower() and context.backend == "nccl"
        lines += [banner, "", "| size (B) | time (µs) | busbw (GB/s) | NCCL algo/proto | wrong |",
                  "|---:|---:|---:|---|---:|"]
        lines += [f"| {r.size} | {r.time_us:.1f} | {r.busbw_gbps:.3f} | {r.nccl or '—'} | {r.wrong} |" for r in rows]
        lines.append("")
        held = held and not any(r.wrong for r in rows)
    return Finding(held, on_nccl, lines)
