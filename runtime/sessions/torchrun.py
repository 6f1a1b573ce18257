"""A user's script under torchrun, each rank streaming to ``collviz view --listen``.

``torchrun … -m collviz.app.cli run --viewer tcp://HOST:PORT train.py [args]`` runs the script on
every rank torchrun starts, under the light observer (:mod:`.userjob`), as ``collviz worker``
does a scenario (:mod:`.remote`): events signed with the shared secret, rank 0 emitting the
RunStart, torchrun's own environment (RANK, WORLD_SIZE, MASTER_ADDR, …) for the script's
``init_process_group()``.
"""

from __future__ import annotations

import os
from typing import NoReturn

from .plan import plan_script, run_start_fields, worker_config
from .remote import torchrun_rank
from .userjob.script import UserScript
from .wire.transport import Endpoints
from .worker import worker_main

__all__ = ["run_torchrun_script"]


def run_torchrun_script(script: UserScript, *, viewer: str, secret: bytes, timeout_s: float = 30.0) -> NoReturn:
    """Run this torchrun process's rank of ``script``, streaming signed events to ``viewer``
    (``tcp://HOST:PORT``); the process exits with the rank's status."""
    me = torchrun_rank()
    ranks_here = None if me.local_world_size == me.world_size else me.local_world_size
    plan = plan_script(script, me.world_size, timeout_s=timeout_s, ranks_here=ranks_here)
    config = worker_config(plan, run=me.run, init_method="env://", endpoints=Endpoints(events=viewer, control=""),
                           secret=secret, run_start=run_start_fields(plan, os.getpid()))
    worker_main(config, me.rank, me.local_rank)
