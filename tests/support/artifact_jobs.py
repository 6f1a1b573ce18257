"""Real artifacts of small 4-rank gloo jobs, made the way a user makes them in their own job.

Nothing here imports collviz. Each job forks 4 ranks (from a clean fork server) that meet through a file, set
``TORCH_FR_BUFFER_SIZE`` so torch's Flight Recorder records their calls, and write per rank:

- :func:`healthy`: Flight Recorder dumps as JSON (``fr/json/rank_<r>.json``) and as the pickle torch
  writes on a timeout (``fr/pickle/nccl_trace_rank_<r>``) after :data:`HEALTHY_CALLS`, all
  completed, the calls run under ``torch.profiler`` (``profile/trace_<r>.json``), and the wall time
  of each call as measured around it (``walls_<r>.json``);
- :func:`hang`: :data:`HANG_CALLS`, then every rank but :data:`SKIPPER` calls one more all_reduce,
  which never completes; a thread dumps both formats while the main thread is stuck in it (the
  pickle with each call's stack, as torch's own dump on a timeout);
- :func:`mismatch`: an all_reduce, a broadcast where rank :data:`BIG_RANK` passes twice the
  elements (gloo completes it), then rank :data:`ODD_RANK` broadcasts where the others all-reduce
  (it hangs); a thread dumps while they are stuck.

The expected calls are written out below, as the jobs make them, for the tests to compare with.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 4
ELEMENTS = 8
"""float32 elements of each rank's buffer."""

HEALTHY_CALLS = ("all_reduce", "all_gather", "broadcast", "reduce_scatter", "all_to_all")
"""The healthy job's calls on the default group, in order (each rank's input: ELEMENTS float32)."""

HANG_CALLS = ("all_reduce", "all_gather")
"""The hang job's calls on the default group before the one rank SKIPPER skips; between them,
ranks 0 and 1 all-reduce on their own group (SUBGROUP)."""

SUBGROUP = (0, 1)
SKIPPER = 2
BIG_RANK = 3
ODD_RANK = 2
DUMP_AFTER_S = 1.0
"""How long a stuck job's dumping thread waits before dumping (the main thread is stuck by then)."""


def _dump(out: Path, rank: int, stacks: bool = False) -> None:
    """Both Flight Recorder formats of this rank, each written whole before it is renamed into place.

    ``stacks``: the pickle carries each call's stack, as torch's own dump on a timeout does
    (``_dump_fr_trace(True, True)``); symbolising it takes seconds, so only the hang job asks.
    """
    from torch._C._distributed_c10d import _dump_fr_trace, _dump_fr_trace_json

    for folder, name, data in (("json", f"rank_{rank}.json", _dump_fr_trace_json(True, True)),
                               ("pickle", f"nccl_trace_rank_{rank}", _dump_fr_trace(True, stacks))):
        target = out / "fr" / folder
        target.mkdir(parents=True, exist_ok=True)
        (target / f".{name}.part").write_bytes(data)
        (target / f".{name}.part").rename(target / name)


def _call(op: str, tensor: torch.Tensor, group=None) -> None:
    if op == "all_reduce":
        dist.all_reduce(tensor, group=group)
    elif op == "all_gather":
        dist.all_gather_into_tensor(torch.empty(ELEMENTS * WORLD), tensor, group=group)
    elif op == "broadcast":
        dist.broadcast(tensor, 0, group=group)
    elif op == "reduce_scatter":
        dist.reduce_scatter_tensor(torch.empty(ELEMENTS // WORLD), tensor, group=group)
    elif op == "all_to_all":
        dist.all_to_all_single(torch.empty(ELEMENTS), tensor, group=group)
    else:
        raise ValueError(op)


def healthy(rank: int, out: Path) -> None:
    """Every call completes; dumps, a profiler trace and the calls' wall times are written."""
    from torch.profiler import ProfilerActivity, profile

    walls = []
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for op in HEALTHY_CALLS:
            start = time.perf_counter_ns()
            _call(op, torch.full((ELEMENTS,), float(rank + 1)))
            walls.append(time.perf_counter_ns() - start)
    (out / "profile").mkdir(exist_ok=True)
    prof.export_chrome_trace(str(out / "profile" / f"trace_{rank}.json"))
    (out / f"walls_{rank}.json").write_text(json.dumps(walls))
    time.sleep(0.5)  # gloo's Flight Recorder retires a call a moment after it returns
    _dump(out, rank)
    dist.barrier()  # after the dump (which does not record it): no rank leaves while a peer still reads


def _dump_later(out: Path, rank: int, stacks: bool = False) -> None:
    """Dump from a thread once the main thread is stuck, then end the process once every rank has
    dumped (a rank leaving earlier would break its peers' stuck calls before they dump)."""
    def dump_and_leave() -> None:
        time.sleep(DUMP_AFTER_S)
        _dump(out, rank, stacks)
        deadline = time.monotonic() + 20
        while len(list((out / "fr" / "pickle").glob("nccl_trace_rank_*"))) < WORLD and time.monotonic() < deadline:
            time.sleep(0.05)
        os._exit(0)

    threading.Thread(target=dump_and_leave, daemon=True).start()


def hang(rank: int, out: Path) -> None:
    """Rank SKIPPER skips the last all_reduce; the others wait in it."""
    pair = dist.new_group(list(SUBGROUP))
    t = torch.ones(ELEMENTS)
    _call(HANG_CALLS[0], t)
    if rank in SUBGROUP:
        dist.all_reduce(t, group=pair)
    for op in HANG_CALLS[1:]:
        _call(op, t)
    _dump_later(out, rank, stacks=True)
    if rank == SKIPPER:
        time.sleep(60)  # doing something else: it never calls the all_reduce the others wait in
    else:
        dist.all_reduce(t)


def mismatch(rank: int, out: Path) -> None:
    """A size mismatch gloo lets through, then an op mismatch that hangs."""
    t = torch.ones(ELEMENTS)
    dist.all_reduce(t)
    dist.broadcast(torch.ones(2 * ELEMENTS) if rank == BIG_RANK else t, 0)
    _dump_later(out, rank)
    if rank == ODD_RANK:
        dist.broadcast(t, 0)
    else:
        dist.all_reduce(t)


def _rank_main(job: Callable[[int, Path], None], rank: int, meeting: str, out: Path) -> None:
    os.environ["TORCH_FR_BUFFER_SIZE"] = "2000"
    try:
        dist.init_process_group("gloo", init_method=f"file://{meeting}", rank=rank, world_size=WORLD)
        job(rank, out)
    except Exception as exc:  # noqa: BLE001 - a stuck call that gloo ends with an error: the dump is still due
        (out / f"error_{rank}.txt").write_text(repr(exc))
        time.sleep(DUMP_AFTER_S + 5)  # the dumping thread, if started, dumps and ends the process
    finally:
        os._exit(0)  # never the C++ teardown of a group whose peers may be stuck


def run_job(job: Callable[[int, Path], None], out: Path, timeout_s: float = 60) -> Path:
    """Fork WORLD ranks running ``job(rank, out)``; wait for them (killing any left after ``timeout_s``).

    The ranks fork from a fork server, a fresh process that has never made a process group: forked
    from the test process they would inherit its Flight Recorder, holding the calls of any group a
    test made there (a one-rank group of a unit test), and dump those as the job's."""
    out.mkdir(parents=True, exist_ok=True)
    os.environ["TORCH_FR_BUFFER_SIZE"] = "2000"
    ctx = mp.get_context("forkserver")
    # torch.profiler imports torch._inductor.config as it starts: once in the server, not in 4 ranks at once
    ctx.set_forkserver_preload(["torch", "torch.distributed", "torch._inductor.config", "support.artifact_jobs"])
    with tempfile.TemporaryDirectory(prefix="collviz-artifacts-") as meeting:
        procs = [ctx.Process(target=_rank_main, args=(job, r, os.path.join(meeting, "store"), out)) for r in range(WORLD)]
        for proc in procs:
            proc.start()
        deadline = time.monotonic() + timeout_s
        for proc in procs:
            proc.join(max(0.1, deadline - time.monotonic()))
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join()
    return out
