"""A worker process: one rank of the run, from fork to ``os._exit``.

The launcher forks workers after importing torch once (the children skip the import). A worker
writes its stdout/stderr where the launcher put them (pipes it drains: :mod:`.sessions.rank_output`), ignores
SIGINT (the launcher handles Ctrl-C and tears everything down), and dies with its parent.
"""

from __future__ import annotations

import ctypes
import datetime
import os
import signal
import socket
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import torch
import torch.distributed as dist

from .backends import BackendChoice
from .context import RankContext
from .errors import ProgramExit
from .observation.memory import StorageTracker
from .observation.memory_snapshot import start_memory_history, write_memory_snapshot
from .observation.timing import wait_for_device
from .programs.program import ScenarioProgram
from .userjob.recorder import RecorderPlace, recorded_rank
from .userjob.sigterm_end import SigtermEnd, report_sigterm
from .wire.protocol import RankEnd, RankStart, RunStart
from .wire.transport import Endpoints, EventEmitter, GateClient

__all__ = ["WorkerConfig", "init_distributed", "torchrun_environment", "worker_main"]

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class WorkerConfig:
    """What every worker of a run receives (identical for all ranks)."""

    run: str
    world_size: int
    backend: BackendChoice
    """The backend row and the machine it was chosen for: where each rank runs."""
    init_method: str
    endpoints: Endpoints
    step: bool
    timeout_s: float
    program: ScenarioProgram
    narration: dict[str, str]
    secret: bytes | None = None
    """Shared secret signing every event (remote viewers)."""
    run_start: dict | None = None
    """Fields of a RunStart that rank 0 emits first when no launcher does (under torchrun)."""
    memory_viz: str | None = None
    """CUDA runs: the folder each rank writes its CUDA memory snapshot to (``--memory-viz``)."""
    recorder: RecorderPlace | None = None
    """A script's run read from Flight Recorder: where each rank serves and dumps its recorder
    (:func:`~.userjob.recorder.recorded_rank`); None: the program sends its own events."""


def init_distributed(backend: str, rank: int, world_size: int, init_method: str, timeout_s: float,
                     device: torch.device) -> None:
    """Join the process group (``tcp://`` rendezvous or ``env://`` under torchrun); no-op if joined.

    The group is never destroyed: the worker leaves with ``os._exit`` once its events are sent
    (see :func:`worker_main`)."""
    if dist.is_initialized():
        return
    dist.init_process_group(
        backend,
        init_method=init_method,
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
        device_id=device if device.type == "cuda" else None,
    )


def torchrun_environment(config: WorkerConfig, rank: int, local_rank: int | None = None) -> dict[str, str]:
    """The variables torchrun gives rank ``rank``, for a program that joins the process group
    itself (``init_process_group()`` reads them): ranks and sizes, the rendezvous address of a
    ``tcp://`` init method, and ``OMP_NUM_THREADS=1`` where unset and several ranks share the
    machine. ``LOCAL_RANK`` names the rank's GPU (:meth:`~.backends.BackendChoice.local_rank`).
    Under torchrun (``env://``) they are set already: nothing is returned."""
    if not config.init_method.startswith("tcp://"):
        return {}
    host, _, port = config.init_method.removeprefix("tcp://").rpartition(":")
    local = config.backend.local_rank(rank, local_rank)
    environment = {
        "RANK": str(rank), "WORLD_SIZE": str(config.world_size), "LOCAL_RANK": str(local),
        "LOCAL_WORLD_SIZE": str(config.backend.ranks), "GROUP_RANK": "0", "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(config.world_size), "MASTER_ADDR": host, "MASTER_PORT": port,
    }
    if "OMP_NUM_THREADS" not in os.environ and config.backend.ranks > 1:
        environment["OMP_NUM_THREADS"] = "1"
    return environment


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the launcher dies (no orphans even on kill -9)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _error_text(exc: BaseException) -> str:
    """One line naming the exception, plus where it was raised; a program's own exit, as it is."""
    if isinstance(exc, ProgramExit):
        return str(exc)
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message}{where}"


def _write_snapshot(config: WorkerConfig, device: torch.device, rank: int) -> None:
    """With ``--memory-viz`` on CUDA, the rank's CUDA memory snapshot (never raises)."""
    if config.memory_viz is not None and device.type == "cuda":
        write_memory_snapshot(Path(config.memory_viz), rank)


def _claim_end(stop: SigtermEnd | None) -> None:
    """Before the rank says its own end: a SIGTERM that said it first ends the process instead."""
    if stop is not None:
        stop.claim()


def worker_main(config: WorkerConfig, rank: int, local_rank: int | None = None, *,
                report_stop: bool = False) -> NoReturn:
    """Run rank ``rank`` of the run described by ``config``, then exit the process.

    ``local_rank`` is the rank's number on this machine (defaults to ``rank``: one machine); the
    backend's placement turns it into a device, and sets the environment the rank needs (NCCL's
    host id where ranks share a GPU) before it joins the process group. With ``report_stop``
    (torchrun's ranks), a SIGTERM is said as the rank's end (:mod:`.userjob.sigterm_end`).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    _die_with_parent()
    emitter = EventEmitter(config.endpoints.events, config.run, rank, secret=config.secret)
    if config.run_start is not None and rank == 0:
        emitter.emit(RunStart, **config.run_start)
    stop = report_sigterm(emitter) if report_stop else None
    gates = GateClient(config.endpoints.control, config.run, rank) if config.step else None
    placement = config.backend.placement(rank, local_rank)
    os.environ.update(placement.environment)
    device = torch.device("cpu") if placement.device_index is None else torch.device("cuda", placement.device_index)
    ctx = RankContext(
        rank=rank,
        world_size=config.world_size,
        backend=config.backend.backend,
        device=device,
        emitter=emitter,
        tracker=StorageTracker(device),
        gates=gates,
        narration=config.narration,
        narration_values=config.program.narration_values(config.world_size),
    )
    exit_code = 0
    if config.backend.row.program_joins:  # a user's script: torchrun's environment, then the script does the rest
        environment = torchrun_environment(config, rank, local_rank)
        os.environ.update(environment)
        if "OMP_NUM_THREADS" in environment:  # torch was imported before it was set
            torch.set_num_threads(int(environment["OMP_NUM_THREADS"]))
    if "OMP_NUM_THREADS" not in os.environ:  # torchrun's rule: ranks must not oversubscribe the cores
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // config.backend.ranks))
    try:
        if config.recorder is not None:  # a script read from its Flight Recorder: the rank says only how it ended
            with recorded_rank(config.recorder, rank, device):
                config.program.run(ctx)
        elif config.backend.row.program_joins:
            config.program.run(ctx)  # joins the process group, picks its device, says RankStart itself
        else:
            if device.type == "cuda":
                torch.cuda.set_device(device)
                if config.memory_viz is not None:
                    start_memory_history()
            init_distributed(config.backend.backend, rank, config.world_size, config.init_method, config.timeout_s,
                             device)
            emitter.emit(RankStart, device=str(device), backend=config.backend.backend, host=socket.gethostname(),
                         pid=os.getpid())
            with ctx.tracker:
                config.program.run(ctx)
            wait_for_device(device)  # NCCL work still queued when the process ends makes peers abort
        _write_snapshot(config, device, rank)
        _claim_end(stop)
        emitter.emit(RankEnd, status="ok", phase=ctx.phase_index, dropped=emitter.dropped)
    except BaseException as exc:  # everything a rank can die of is reported, then the process ends
        exit_code = 1
        _write_snapshot(config, device, rank)  # before RankEnd: the launcher may end the ranks after it
        _claim_end(stop)
        emitter.emit(RankEnd, status="error", error=_error_text(exc), phase=ctx.phase_index, dropped=emitter.dropped)
        if not isinstance(exc, ProgramExit):  # a program's own exit said why itself
            traceback.print_exc()
    emitter.close()
    if gates is not None:
        gates.close()
    # No destroy_process_group(): the process ends here, and the OS closes its sockets. On gloo it
    # cost 20-55 ms a rank (more as ranks grow), and torch's C++ teardown can abort after it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
