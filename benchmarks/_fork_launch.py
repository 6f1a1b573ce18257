"""A bare forking launcher, for ``run_overhead.py``: one Python imports torch once, forks N ranks
(as ``collviz run`` does) that run SCRIPT as ``__main__`` with torchrun's environment, and waits
for them; nothing of collviz's. What the same launch costs without collviz.

    python benchmarks/_fork_launch.py N SCRIPT [args…]
"""

from __future__ import annotations

import os
import runpy
import sys

import torch
from _forking import fork_ranks


def main() -> None:
    """Fork the ranks, each running the script; exit with the first failure's status."""
    ranks, script, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]

    def rank_main(rank: int, port: int) -> int:
        os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(ranks),
                          LOCAL_WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        sys.argv = [script, *args]
        runpy.run_path(script, run_name="__main__")
        return 0

    fork_ranks(ranks, rank_main)


if __name__ == "__main__":
    main()
