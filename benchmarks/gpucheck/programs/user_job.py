"""A user's own job, as the GPU check starts it: ``user_job.py MODE [FOLDER]`` under ``collviz
run`` (modes ``hang``, ``raise``, ``steps``) or under plain torchrun (mode ``attach``).

Like a user's script, it picks its own backend: NCCL on CUDA when torch sees a GPU (rank on GPU
``LOCAL_RANK`` mod the GPUs; where ranks outnumber GPUs, each its own ``NCCL_HOSTID`` and NCCL's
socket transport over loopback unless already set, as collviz sets them), else gloo on CPU; each
rank prints ``rank <r>: backend <name> on <device>``, which the check reads.

- ``hang``: one all_reduce, then rank 1 sleeps in ``slow_loader`` while the others wait in the next;
- ``raise``: one all_reduce, then the last rank raises ``RuntimeError: rank <r> gives up``;
- ``steps``: three steps (``collviz.step``), each an all_reduce, an all_gather and a
  reduce_scatter of whole numbers, each result checked here against sums computed in Python;
- ``attach``: each rank serves torch's worker server on FOLDER/rank<r>.sock; :data:`CALLS_BEFORE`
  all_reduces, then rank 1 stalls in ``slow_data_loader`` (marker FOLDER/stalling) until
  FOLDER/release exists while rank 0 waits in the next all_reduce (marker FOLDER/waiting, written
  once the call is issued); both then finish it (FOLDER/done<r>) and wait for FOLDER/exit.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

CALLS_BEFORE = 3
"""All_reduces every rank completes before the attach mode's stall."""


def join() -> torch.device:
    """Join the job's group on NCCL (a GPU is visible) or gloo; say which, on which device."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if torch.cuda.is_available():
        gpus = torch.cuda.device_count()
        if gpus < world:
            os.environ.setdefault("NCCL_HOSTID", f"user-job-rank{rank}")
            os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
            os.environ.setdefault("NCCL_NET", "Socket")
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]) % gpus)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    print(f"rank {rank}: backend {dist.get_backend()} on {device}", flush=True)
    return device


def slow_loader() -> None:
    """Where rank 1 stalls in the hang mode."""
    print("stalling", flush=True)
    time.sleep(600)  # the hang's stalled line


def hang(device: torch.device) -> None:
    """One all_reduce; then rank 1 stalls while the others wait in all_reduce #2."""
    dist.all_reduce(torch.ones(4, device=device))
    if dist.get_rank() == 1:
        slow_loader()
    tensor = torch.ones(8, device=device)
    dist.all_reduce(tensor)
    print(f"sum {tensor.sum().item()}", flush=True)


def give_up(device: torch.device) -> None:
    """One all_reduce; then the last rank raises while the others go on to the next call."""
    tensor = torch.ones(4, device=device)
    dist.all_reduce(tensor)
    if dist.get_rank() == dist.get_world_size() - 1:
        raise RuntimeError(f"rank {dist.get_rank()} gives up")
    dist.all_reduce(tensor)
    print(f"sum {tensor.sum().item()}", flush=True)


def steps(device: torch.device) -> None:
    """Three steps of three checked calls, marked with ``collviz.step``."""
    import collviz

    rank, world = dist.get_rank(), dist.get_world_size()
    for index in range(3):
        with collviz.step(f"train step {index}"):
            mine = [10 * (rank + 1) + index + i for i in range(world)]
            reduced = torch.tensor(mine, dtype=torch.float32, device=device)
            dist.all_reduce(reduced)
            gathered = torch.empty(world * world, dtype=torch.float32, device=device)
            dist.all_gather_into_tensor(gathered, torch.tensor(mine, dtype=torch.float32, device=device))
            scattered = torch.empty(1, dtype=torch.float32, device=device)
            dist.reduce_scatter_tensor(scattered, torch.tensor(mine, dtype=torch.float32, device=device))
            everyone = [[10 * (r + 1) + index + i for i in range(world)] for r in range(world)]
            sums = [sum(column) for column in zip(*everyone)]
            assert reduced.tolist() == sums, (reduced.tolist(), sums)
            assert gathered.tolist() == [value for row in everyone for value in row], gathered.tolist()
            assert scattered.tolist() == [sums[rank]], (scattered.tolist(), sums[rank])
    print(f"values exact on rank {rank}", flush=True)


def slow_data_loader(folder: Path) -> None:
    """Where rank 1 stalls in the attach mode, until FOLDER/release exists."""
    (folder / "stalling").touch()
    while not (folder / "release").exists():
        time.sleep(0.05)  # the attach's stalled line


def attached(device: torch.device, folder: Path) -> None:
    """The attach mode's calls, stall and markers (the worker server is opened by ``main``)."""
    rank = dist.get_rank()
    for _ in range(CALLS_BEFORE):
        dist.all_reduce(torch.ones(4, device=device))
    if rank == 1:
        slow_data_loader(folder)
    work = dist.all_reduce(torch.ones(4, device=device), async_op=True)
    if rank == 0:
        (folder / "waiting").touch()
    work.wait()
    torch.ones(1, device=device).sum().item()  # rank 0 waits here, on the GPU, until rank 1 arrives
    (folder / f"done{rank}").touch()
    while not (folder / "exit").exists():
        time.sleep(0.05)


def main(mode: str, folder: Path | None) -> None:
    """Run ``mode``; end the process group."""
    if mode == "attach":
        from torch.distributed.elastic.control_plane import worker_main

        assert folder is not None
        os.environ["TORCH_WORKER_SERVER_SOCKET"] = str(folder / f"rank{os.environ['RANK']}.sock")
        with worker_main():
            device = join()
            attached(device, folder)
            dist.destroy_process_group()
        return
    device = join()
    {"hang": hang, "raise": give_up, "steps": steps}[mode](device)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]) if len(sys.argv) > 2 else None)
