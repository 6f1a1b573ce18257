"""Independent expectations: the eight collectives run with plain torch.distributed on gloo.

Nothing here imports collviz; inputs are built by the tests from the scenario files (read with
tomllib) or from the documented generation rule.
"""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

REDUCE_OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX,
              "min": dist.ReduceOp.MIN, "product": dist.ReduceOp.PRODUCT}


def _plain(op: str, inp: torch.Tensor | None, rank: int, n: int, root: int, reduce_op: str) -> torch.Tensor | None:
    """What ``rank`` holds after ``op`` — the in-place buffer or the output buffer."""
    red = REDUCE_OPS[reduce_op]
    if op == "broadcast":
        dist.broadcast(inp, src=root)
        return inp
    if op == "reduce":
        dist.reduce(inp, dst=root, op=red)
        return inp
    if op == "all_reduce":
        dist.all_reduce(inp, op=red)
        return inp
    if op == "gather":
        outs = [torch.empty_like(inp) for _ in range(n)] if rank == root else None
        dist.gather(inp, gather_list=outs, dst=root)
        return torch.cat(outs) if outs else None
    if op == "all_gather":
        outs = [torch.empty_like(inp) for _ in range(n)]
        dist.all_gather(outs, inp)
        return torch.cat(outs)
    if op == "reduce_scatter":
        out = torch.empty(inp.numel() // n, dtype=inp.dtype)
        dist.reduce_scatter(out, list(inp.chunk(n)), op=red)
        return out
    if op == "all_to_all":
        outs = [torch.empty(inp.numel() // n, dtype=inp.dtype) for _ in range(n)]
        dist.all_to_all(outs, list(inp.chunk(n)))
        return torch.cat(outs)
    raise ValueError(op)


def _scatter(inputs: list, rank: int, n: int, root: int, dtype: torch.dtype) -> torch.Tensor:
    full = torch.tensor(inputs[root], dtype=dtype).reshape(-1)
    out = torch.empty(full.numel() // n, dtype=dtype)
    dist.scatter(out, scatter_list=list(full.chunk(n)) if rank == root else None, src=root)
    return out


def _worker(rank: int, n: int, port: int, cases: list, results) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)
    for name, op, inputs, dtype_name, root, reduce_op in cases:
        dtype = getattr(torch, dtype_name)
        if op == "scatter":
            after = _scatter(inputs, rank, n, root, dtype)
        else:
            inp = torch.tensor(inputs[rank], dtype=dtype).reshape(-1)
            after = _plain(op, inp, rank, n, root, reduce_op)
        results.put((name, rank, None if after is None else after.tolist()))
    dist.barrier()
    results.put(("done", rank, None))
    results.close()
    results.join_thread()  # the queue's feeder thread must flush before os._exit
    os._exit(0)


def run_reference(cases: list, n: int = 4) -> dict[str, dict[int, list | None]]:
    """Run every case ``(name, op, per-rank inputs, dtype, root, reduce_op)`` on ``n`` gloo ranks.

    Returns name → rank → the flattened buffer the rank holds afterwards (None: no output).
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(r, n, port, cases, results)) for r in range(n)]
    for p in procs:
        p.start()
    out: dict[str, dict[int, list | None]] = {}
    done = 0
    while done < n:
        name, rank, values = results.get(timeout=120)
        if name == "done":
            done += 1
        else:
            out.setdefault(name, {})[rank] = values
    for p in procs:
        p.join(30)
    return out
