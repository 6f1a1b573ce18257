"""One torchrun rank, streaming signed events to ``collviz view --listen`` (beside :mod:`.worker`, which it runs).

torchrun starts the processes (on any number of nodes); each runs one rank under its environment
(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, …) and sends its events, signed with the shared secret
(:mod:`.access`), to the listening viewer (:mod:`.listening`). Rank 0 emits the RunStart, since no
collviz launcher exists. Two entry points:

- ``collviz worker SCENARIO --viewer tcp://HOST:PORT``: a scenario (:func:`run_torchrun_worker`);
- ``torchrun … -m collviz.app.cli run --viewer tcp://HOST:PORT train.py [args]``: a user's script
  under the light observer (:mod:`~collviz.runtime.userjob`), its ``init_process_group()`` reading
  torchrun's environment (:func:`run_torchrun_script`);
- ``python -m collviz.runtime.torchrun_rank [--module] TARGET [args]``: the entry torch's launcher
  runs in each rank of ``collviz run [torchrun options] SCRIPT.py|-m MODULE``
  (:mod:`~collviz.runtime.sessions.agent`), told where to send its events by :data:`~.userjob.launch_env.VIEWER_ENV`
  (:func:`launched_main`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import NoReturn

from .errors import UsageError
from .plan import MemoryNeed, RunPlan, plan_run, plan_script, run_start_fields, worker_config
from .scenario_files.loading import Scenario
from .programs.program import RunOptions
from .userjob.launch_env import JOB_SECRET_ENV, SECRET_KEY, SHARE_SECRET_ENV, TIMEOUT_ENV, VIEWER_ENV
from .userjob.script import UserScript, check_module, check_script
from .wire.transport import Endpoints
from .worker import worker_main

__all__ = ["SECRET_WAIT_S", "TorchrunRank", "launched_main", "torchrun_rank", "run_torchrun_worker",
           "run_torchrun_script"]



@dataclass(frozen=True)
class TorchrunRank:
    """This process's place in a torchrun job, from the environment torchrun sets."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    run: str
    """The run id every rank shares: torchrun's run id and rendezvous address."""

    @property
    def ranks_here(self) -> int | None:
        """How many ranks run on this machine, or None when they all do (a plan's ``ranks_here``)."""
        return None if self.local_world_size == self.world_size else self.local_world_size


def _env_int(name: str) -> int:
    value = os.environ.get(name)
    if value is None or not value.isdigit():
        raise UsageError(f"${name} is not set: collviz worker runs under torchrun (see: collviz worker SCENARIO --help)")
    return int(value)


def torchrun_rank() -> TorchrunRank:
    """This process's rank, world and run id from torchrun's variables (a UsageError without them)."""
    rank, world_size, local_rank = _env_int("RANK"), _env_int("WORLD_SIZE"), _env_int("LOCAL_RANK")
    run = os.environ.get("TORCHELASTIC_RUN_ID", "")
    run = f"{run}-{os.environ.get('MASTER_ADDR', '')}-{os.environ.get('MASTER_PORT', '')}".strip("-")
    return TorchrunRank(rank, world_size, local_rank, int(os.environ.get("LOCAL_WORLD_SIZE", world_size)), run)


def run_torchrun_worker(scenario: Scenario, options: RunOptions, *, backend: str, timeout_s: float, viewer: str,
                        secret: bytes | None, memory: MemoryNeed | None = None,
                        memory_viz: Path | None = None) -> NoReturn:
    """Run this torchrun process's rank of ``scenario``, streaming signed events to ``viewer``
    (and, with ``memory_viz``, its CUDA memory snapshot to that folder on this machine).

    The run is planned as a local one is (:func:`~collviz.runtime.plan.plan_run`), for the ranks on
    this machine: NCCL whenever this node has a GPU (its ranks sharing GPUs when there are fewer),
    gloo on CPU otherwise.
    """
    me = torchrun_rank()
    plan = plan_run(scenario, me.world_size, backend=backend, options=options, timeout_s=timeout_s, memory=memory,
                    ranks_here=me.ranks_here, memory_viz=memory_viz)
    _run_rank(plan, me, viewer, secret)


def run_torchrun_script(script: UserScript, *, viewer: str, secret: bytes, timeout_s: float = 30.0) -> NoReturn:
    """Run this torchrun process's rank of ``script``, streaming signed events to ``viewer``
    (``tcp://HOST:PORT``); the process exits with the rank's status."""
    me = torchrun_rank()
    plan = plan_script(script, me.world_size, timeout_s=timeout_s, ranks_here=me.ranks_here)
    _run_rank(plan, me, viewer, secret)


def _run_rank(plan: RunPlan, me: TorchrunRank, viewer: str, secret: bytes | None) -> NoReturn:
    """Run rank ``me`` of ``plan``, its events signed with ``secret`` and sent to ``viewer``; a
    SIGTERM (its agent ending the ranks) is said as the rank's end."""
    config = worker_config(plan, run=me.run, init_method="env://", endpoints=Endpoints(events=viewer, control=""),
                           secret=secret, run_start=run_start_fields(plan, os.getpid()))
    worker_main(config, me.rank, me.local_rank, report_stop=True)


SECRET_WAIT_S = 300.0
"""How long a rank of another node waits for node 0's ranks to put the shared secret in the job's
store: as long as torch's own store waits for a key by default (node 0's ranks start with the
others, once the rendezvous is complete, but may import for a while)."""


def _job_secret() -> bytes:
    """The shared secret: this rank's own (node 0), put in the job's store when asked to share
    it; else read from the job's store, where node 0's ranks put it (a UsageError after
    :data:`SECRET_WAIT_S` without it)."""
    import torch.distributed as dist

    given = os.environ.get(JOB_SECRET_ENV, "").encode()
    if given and SHARE_SECRET_ENV not in os.environ:
        return given
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                          timeout=timedelta(seconds=SECRET_WAIT_S))
    if given:
        store.set(SECRET_KEY, given.decode())
        return given
    try:
        return bytes(store.get(SECRET_KEY))
    except RuntimeError as exc:  # torch's store timeout (DistStoreError is a RuntimeError)
        raise UsageError(f"no shared secret from node 0 in the job's store within {SECRET_WAIT_S:g} s "
                         f"(is node 0's collviz run started?): {exc}") from None


def launched_main(argv: Sequence[str]) -> NoReturn:
    """One rank of ``collviz run [torchrun options] TARGET``, as torch's launcher starts it:
    ``argv`` is ``[--module] TARGET [args…]``; node 0's address is in :data:`~.userjob.launch_env.VIEWER_ENV`."""
    viewer = os.environ.get(VIEWER_ENV)
    if viewer is None:
        raise UsageError(f"${VIEWER_ENV} is not set: this entry is for the ranks collviz run starts through torchrun")
    timeout_s = float(os.environ.get(TIMEOUT_ENV, "30"))
    module = bool(argv) and argv[0] == "--module"
    target, *args = argv[1:] if module else argv
    script = check_module(target, args) if module else check_script(target, args)
    run_torchrun_script(script, viewer=viewer, secret=_job_secret(), timeout_s=timeout_s)


if __name__ == "__main__":
    launched_main(sys.argv[1:])
