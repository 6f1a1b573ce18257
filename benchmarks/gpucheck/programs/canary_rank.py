"""One rank of the canary: ``python canary_rank.py RANK WORLD PORT BACKEND OUT``.

It takes its place as collviz places ranks (``runtime/backends.py``: its device, and where ranks
share a GPU its own ``NCCL_HOSTID`` and NCCL's socket transport over loopback), joins a WORLD-rank
group on BACKEND, runs all_reduce, all_gather and reduce_scatter on the whole numbers of
:func:`inputs`, and writes OUT/rank<RANK>.json: the backend the group reports, the device its
tensors were on, the environment collviz gave it, and each result as a list. The check compares
the results with sums it computes itself.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from pathlib import Path

ELEMENTS = 4
"""Elements each rank reduces and gathers (float32 whole numbers: every sum is exact)."""


def inputs(rank: int, world: int) -> dict[str, list[int]]:
    """Rank ``rank``'s inputs: ``all_reduce`` and ``all_gather`` get ``[100·(rank+1) + i]``,
    ``reduce_scatter`` gets ``[1000·(rank+1) + i]`` for ``ELEMENTS · world`` elements."""
    return {"all_reduce": [100 * (rank + 1) + i for i in range(ELEMENTS)],
            "all_gather": [100 * (rank + 1) + i for i in range(ELEMENTS)],
            "reduce_scatter": [1000 * (rank + 1) + i for i in range(ELEMENTS * world)]}


def main(rank: int, world: int, port: int, backend: str, out: Path) -> None:
    """Join, run the three collectives, write what came back."""
    import torch
    import torch.distributed as dist

    from collviz.runtime.backends import choose_backend

    placement = choose_backend(backend, world).placement(rank)
    os.environ.update(placement.environment)
    device = torch.device("cpu") if placement.device_index is None else torch.device("cuda", placement.device_index)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60), device_id=device if device.type == "cuda" else None)
    given = {name: torch.tensor(values, dtype=torch.float32, device=device)
             for name, values in inputs(rank, world).items()}
    reduced = given["all_reduce"].clone()
    dist.all_reduce(reduced)
    gathered = torch.empty(ELEMENTS * world, dtype=torch.float32, device=device)
    dist.all_gather_into_tensor(gathered, given["all_gather"])
    scattered = torch.empty(ELEMENTS, dtype=torch.float32, device=device)
    dist.reduce_scatter_tensor(scattered, given["reduce_scatter"])
    results = {"all_reduce": reduced.tolist(), "all_gather": gathered.tolist(), "reduce_scatter": scattered.tolist()}
    (out / f"rank{rank}.json").write_text(json.dumps({
        "backend": dist.get_backend(), "device": str(reduced.device), "environment": dict(placement.environment),
        **results}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], Path(sys.argv[5]))
