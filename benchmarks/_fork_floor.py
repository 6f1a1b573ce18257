"""The fork floor of ``startup.py``: one Python imports torch once, forks N ranks that join a gloo
group, run one all_reduce and leave with ``os._exit``; the parent waits for them and leaves the
same way. What any forking launcher must at least spend.

    python benchmarks/_fork_floor.py N
"""

from __future__ import annotations

import os
import socket
import sys

import torch
import torch.distributed as dist


def main() -> None:
    """Fork the ranks, wait for every one, exit with the first failure's status."""
    ranks = int(sys.argv[1])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    children = []
    for rank in range(ranks):
        pid = os.fork()
        if pid == 0:
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // ranks))
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ranks)
            tensor = torch.ones(4)
            dist.all_reduce(tensor)
            os._exit(0 if tensor[0].item() == ranks else 1)
        children.append(pid)
    status = 0
    for pid in children:
        status = status or os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    sys.stdout.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
