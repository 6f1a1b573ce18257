"""Independent expectations: the eight collectives run with plain torch.distributed on gloo.

Nothing here imports collviz; inputs are built by the tests from the scenario files (read with
tomllib) or from the documented generation rule.
"""

from __future__ import annotations

import os
import queue
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable

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
    if op == "all_to_all":  # the single-tensor form: gloo lacks the list form before 2.13 (2.8, 2.11)
        out = torch.empty_like(inp)
        dist.all_to_all_single(out, inp)
        return out
    raise ValueError(op)


def _scatter(inputs: list, rank: int, n: int, root: int, dtype: torch.dtype) -> torch.Tensor:
    full = torch.tensor(inputs[root], dtype=dtype).reshape(-1)
    out = torch.empty(full.numel() // n, dtype=dtype)
    dist.scatter(out, scatter_list=list(full.chunk(n)) if rank == root else None, src=root)
    return out


def _reference_cases(rank: int, n: int, cases: list):
    """Yield ``(name, flattened buffer or None)`` for every case, as this rank holds it afterwards."""
    for name, op, inputs, dtype_name, root, reduce_op in cases:
        dtype = getattr(torch, dtype_name)
        if op == "scatter":
            after = _scatter(inputs, rank, n, root, dtype)
        else:
            inp = torch.tensor(inputs[rank], dtype=dtype).reshape(-1)
            after = _plain(op, inp, rank, n, root, reduce_op)
        yield name, None if after is None else after.tolist()


def run_reference(cases: list, n: int = 4) -> dict[str, dict[int, list | None]]:
    """Run every case ``(name, op, per-rank inputs, dtype, root, reduce_op)`` on ``n`` gloo ranks.

    Returns name → rank → the flattened buffer the rank holds afterwards (None: no output).
    """
    out: dict[str, dict[int, list | None]] = {}
    for rank, (name, values) in run_on_gloo_ranks(_reference_cases, n, cases):
        out.setdefault(name, {})[rank] = values
    return out


def _rank_main(body: Callable[..., Iterable], rank: int, n: int, init_method: str, args: tuple, results) -> None:
    """One forked rank: join the group, send every record ``body`` yields, then ``done`` (or the error)."""
    try:
        dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=n)
        for record in body(rank, n, *args):
            results.put(("record", rank, record))
        dist.barrier()
        dist.destroy_process_group()  # after the barrier: every peer is there (a finally could wait on a stuck one)
        results.put(("done", rank, None))
    except BaseException:  # noqa: BLE001 - the parent reports it; a forked child has nowhere else to say it
        results.put(("error", rank, traceback.format_exc()))
    finally:
        results.close()
        results.join_thread()  # the queue's feeder thread must flush before os._exit, or records are lost
        os._exit(0)


def run_on_gloo_ranks(body: Callable[..., Iterable], n: int, *args, timeout_s: float = 120) -> list[tuple[int, object]]:
    """Fork ``n`` gloo ranks, each running ``body(rank, n, *args)``; return every ``(rank, record)`` it yields.

    The group meets through a fresh file (no port to race for). A rank that raises fails the caller
    with its traceback; a rank that dies or a group that runs past ``timeout_s`` fails it naming the ranks.
    """
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="collviz-ref-") as meeting:
        init_method = f"file://{os.path.join(meeting, 'store')}"
        procs = [ctx.Process(target=_rank_main, args=(body, r, n, init_method, args, results)) for r in range(n)]
        for proc in procs:
            proc.start()
        records: list[tuple[int, object]] = []
        done: set[int] = set()
        deadline = time.monotonic() + timeout_s
        try:
            while len(done) < n:
                try:
                    kind, rank, payload = results.get(timeout=1)
                except queue.Empty:
                    dead = [r for r, proc in enumerate(procs) if r not in done and proc.exitcode is not None]
                    if dead or time.monotonic() > deadline:
                        missing = sorted(set(range(n)) - done)
                        raise AssertionError(f"{n} gloo ranks: ranks {missing} did not finish "
                                             f"({'died: ' + str(dead) if dead else f'over {timeout_s:g} s'})") from None
                    continue
                if kind == "error":
                    raise AssertionError(f"rank {rank} of {n} failed:\n{payload}")
                if kind == "done":
                    done.add(rank)
                else:
                    records.append((rank, payload))
        finally:
            for proc in procs:
                proc.join(5)
                if proc.exitcode is None:
                    proc.kill()
                    proc.join()
    return records
