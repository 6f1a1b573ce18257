"""The fork floor of ``startup.py``: one Python imports torch once, forks N ranks that join a gloo
group, run one all_reduce and leave with ``os._exit``; the parent waits for them and leaves the
same way. What any forking launcher must at least spend.

    python benchmarks/_fork_floor.py N
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
from _forking import fork_ranks


def main() -> None:
    """Fork the ranks, each joining the group for one all_reduce; exit with the first failure's status."""
    ranks = int(sys.argv[1])

    def rank_main(rank: int, port: int) -> int:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // ranks))
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ranks)
        try:
            tensor = torch.ones(4)
            dist.all_reduce(tensor)
            return 0 if tensor[0].item() == ranks else 1
        finally:
            dist.destroy_process_group()

    fork_ranks(ranks, rank_main)


if __name__ == "__main__":
    main()
