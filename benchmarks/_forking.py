"""Forking N ranks from one Python that has imported torch once, as ``collviz run`` does: what the
benchmarks' bare forking launchers (``_fork_floor.py``, ``_fork_launch.py``) share."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from typing import NoReturn


def fork_ranks(ranks: int, rank_main: Callable[[int, int], int]) -> NoReturn:
    """Fork ``ranks`` children, each running ``rank_main(rank, port)`` (``port``: a free loopback
    port for their rendezvous) and leaving with its status by ``os._exit``; wait for every one, then
    leave the same way with the first failure's status."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    children = []
    for rank in range(ranks):
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                status = rank_main(rank, port)
            finally:
                sys.stdout.flush()
                os._exit(status)
        children.append(pid)
    status = 0
    for pid in children:
        status = status or os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    sys.stdout.flush()
    os._exit(status)
