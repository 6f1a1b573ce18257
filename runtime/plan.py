"""One validated run plan, built in one place: :func:`plan_run`.

Every command that starts workers (a scenario run, bench, compare, a lesson, the torchrun worker)
plans its run here: the scenario and its program for that many ranks, the backend row and where
each rank runs (:mod:`.backends`), whether the run's tensors fit in the memory of the devices it
runs on, and how it is driven (gates, recording, the hang timeout). A plan that exists is valid:
:class:`RunPlan` checks itself when built, naming every offending value, as torchtitan's
``ParallelDims`` does. Importing it refuses a torch older than collviz supports (one line, exit 2)
before anything here touches what that torch may lack.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

import torch

from .compat import GLOO_REDUCE_SCATTER_AVG, floor_refusal
from .errors import UsageError

if (_TOO_OLD := floor_refusal()) is not None:  # before the imports below, which an older torch may fail
    raise UsageError(_TOO_OLD)

from . import preload  # noqa: F401  (torch's import frozen before everything after it; see preload)
from .backends import BackendChoice, choose_backend, script_backend
from .limits import MAX_TIMEOUT_S, MEMORY_HEADROOM, MIN_TIMEOUT_S, check_seconds
from .observation import nvml
from .observation.environment import available_memory
from .observation.metrics import human_bytes
from .programs.collectives import CollectiveSpec
from .programs.program import RunOptions, ScenarioProgram
from .programs.registry import build_program
from .scenario_files.loading import Scenario
from .userjob.program import ScriptProgram
from .userjob.recorder import RecorderPlace
from .userjob.script import UserScript
from .wire.transport import Endpoints
from .worker import WorkerConfig

__all__ = ["MAX_RANKS", "nccl_version", "PROCESS_GROUP_GRACE_S", "MemoryNeed", "RunPlan", "check_world_size", "plan_run",
           "plan_script", "run_start_fields", "worker_config"]

MAX_RANKS = 64
"""Most ranks one machine runs (each is a process; provenance tags hold at most 63 ranks)."""

PROCESS_GROUP_GRACE_S = 3.0
"""The process group's own timeout is the hang timeout plus this: the hang is reported first,
then the backend gives up and the run ends as a failure."""


@dataclass(frozen=True)
class MemoryNeed:
    """What a run's tensors take on each rank: ``buffers`` tensors of ``per_rank_bytes`` each,
    described for the error message as ``what`` (e.g. ``--size 1GiB on 4 ranks``)."""

    what: str
    per_rank_bytes: int
    buffers: float

    @property
    def bytes_per_rank(self) -> int:
        """The estimate for one rank."""
        return int(self.per_rank_bytes * self.buffers)


@dataclass(frozen=True)
class RunPlan:
    """A validated run: scenario, ranks, backend and placement, what each rank does, how it is driven."""

    scenario: Scenario
    world_size: int
    backend: BackendChoice
    program: ScenarioProgram
    step: bool = False
    """Ranks wait at a gate before each phase."""
    record: Path | None = None
    timeout_s: float = 30.0
    """Seconds before a collective some ranks entered and others did not is reported."""
    nccl_tuning: bool = False
    """NCCL runs: ask NCCL to print its algorithm and protocol per call (NCCL_DEBUG=INFO,
    NCCL_DEBUG_SUBSYS=TUNING) and keep those lines of the workers' logs."""
    logs: Path | None = None
    """The folder each rank's stdout and stderr are appended to (``rank<r>.log``), kept after the
    run; None: the run's own temporary folder, deleted unless the run fails."""
    memory_viz: Path | None = None
    """CUDA runs: the folder each rank's CUDA memory snapshot is written to (``rank<r>.pickle``)."""

    @property
    def reads_recorder(self) -> bool:
        """Whether the run's calls are read from its ranks' Flight Recorder once they end (a user's
        script without ``--observe``), rather than sent by the ranks as they happen."""
        return isinstance(self.program, ScriptProgram) and not self.program.observe

    def __post_init__(self) -> None:
        problems = []
        if self.world_size < 1 or self.backend.one_machine and self.world_size > MAX_RANKS:
            problems.append(f"world size {self.world_size} (1 to {MAX_RANKS} ranks on one machine)")
        if self.backend.one_machine and self.backend.ranks != self.world_size:
            problems.append(f"backend chosen for {self.backend.ranks} ranks, run has {self.world_size}")
        if not MIN_TIMEOUT_S <= self.timeout_s <= MAX_TIMEOUT_S:
            problems.append(f"timeout {self.timeout_s:g} s ({MIN_TIMEOUT_S:g} to {MAX_TIMEOUT_S:g})")
        if self.nccl_tuning and self.backend.backend != "nccl":
            problems.append("NCCL's tuning report asked for on a gloo run")
        if self.memory_viz is not None and self.backend.device_kind != "cuda":
            problems.append("a CUDA memory snapshot asked for on a CPU run")
        if problems:
            raise ValueError(f"invalid run plan for {self.scenario.name}: {'; '.join(problems)}")

    @property
    def banner(self) -> str:
        """What the run runs on, in one line (printed before it starts, recorded in RunStart)."""
        return self.backend.reason


def check_world_size(ranks: int, option: str = "--gpus") -> int:
    """``ranks`` if one machine can run that many ranks; else a UsageError naming ``option`` and the range."""
    if not 1 <= ranks <= MAX_RANKS:
        raise UsageError(f"{option} {ranks}: must be between 1 and {MAX_RANKS} (one process per rank on this machine)")
    return ranks


def plan_run(scenario: Scenario, world_size: int | None = None, *, backend: str = "auto",
             options: RunOptions | None = None, program: ScenarioProgram | None = None, step: bool = False,
             record: Path | None = None, timeout_s: float = 30.0, nccl_tuning: bool = False,
             memory: MemoryNeed | None = None, ranks_here: int | None = None, gpus: int | None = None,
             memory_viz: Path | None = None) -> RunPlan:
    """The plan of one run of ``scenario`` on ``world_size`` ranks (default: the scenario's).

    ``program`` is the program every rank runs, or None to build it from ``options`` (the command
    line's overrides). ``backend`` is ``--backend`` (see :func:`~.backends.choose_backend`);
    ``ranks_here`` the ranks on this machine when not all of them are (torchrun across machines);
    ``gpus`` overrides NVML's count (tests). ``memory`` is checked against the memory of the
    devices the ranks run on: MemAvailable on CPU, each GPU's free memory (NVML) shared among the
    ranks on it. ``nccl_tuning`` asks NCCL for its per-call choices when the run is on NCCL.
    ``memory_viz`` is the folder of each rank's CUDA memory snapshot (refused on CPU).
    Any mistake is a one-line UsageError.
    """
    size = scenario.default_gpus if world_size is None else world_size
    here = size if ranks_here is None else ranks_here
    if ranks_here is None:
        check_world_size(size)
    check_seconds("--timeout", timeout_s)
    choice = choose_backend(backend, here, gpus=gpus, one_machine=ranks_here is None)
    if program is None:
        program = build_program(scenario, size, options or RunOptions())
    _check_torch_runs(program, choice)
    if memory is not None:
        _check_fits(memory, choice)
    if memory_viz is not None and choice.device_kind != "cuda":
        raise UsageError(f"--memory-viz {memory_viz}: a CUDA memory snapshot records the CUDA caching allocator, and "
                         f"this run is on CPU ({choice.backend}): run it where a GPU is visible")
    return RunPlan(scenario=scenario, world_size=size, backend=choice, program=program, step=step, record=record,
                   timeout_s=timeout_s, nccl_tuning=nccl_tuning and choice.backend == "nccl", memory_viz=memory_viz)


def _check_torch_runs(program: ScenarioProgram, choice: BackendChoice) -> None:
    """A UsageError where this torch's backend would give a collective's result wrong: an averaging
    reduce-scatter on a gloo that sums for AVG (:data:`~.compat.GLOO_REDUCE_SCATTER_AVG`)."""
    if isinstance(program, CollectiveSpec) and (program.op, program.reduce_op, choice.backend) == \
            ("reduce_scatter", "avg", "gloo"):
        if (refusal := GLOO_REDUCE_SCATTER_AVG.refusal("reduce-scatter --op avg on gloo")) is not None:
            raise UsageError(refusal)


def plan_script(script: UserScript, nproc: int, *, record: Path | None = None, timeout_s: float = 30.0,
                ranks_here: int | None = None, gpus: int | None = None, logs: Path | None = None,
                observe: bool = True) -> RunPlan:
    """The plan of a run of the user's ``script`` on ``nproc`` ranks (``collviz run --nproc N
    train.py``), all on this machine unless ``ranks_here`` says how many are (torchrun): under the
    light observer when ``observe``, else read from each rank's Flight Recorder as the ranks end.

    The script picks its backend and devices and joins the process group itself, so the plan's
    backend row only says so (:func:`~.backends.script_backend`; ``gpus`` overrides NVML's count)
    and no memory is checked. ``timeout_s`` is the hang report's threshold; the process group's
    own timeout is the script's; ``logs`` keeps each rank's output there. Any mistake is a
    one-line UsageError.
    """
    here = nproc if ranks_here is None else ranks_here
    if ranks_here is None:
        check_world_size(nproc, "--nproc")
    check_seconds("--timeout", timeout_s)
    program = ScriptProgram(script, observe)
    how = "observed" if observe else "read from its Flight Recorder"
    scenario = Scenario(name=script.name, path=script.path, description=f"your script {script.name}, {how}",
                        kind="script", collective="", default_gpus=nproc, root=0, reduce_op=None, dtype="",
                        buffer_name="", examples=(), followup=None, narration={})
    return RunPlan(scenario=scenario, world_size=nproc, backend=script_backend(here, gpus=gpus,
                   one_machine=ranks_here is None), program=program, record=record, timeout_s=timeout_s, logs=logs)


def _check_fits(need: MemoryNeed, choice: BackendChoice) -> None:
    """UsageError when the run's tensors cannot fit in :data:`MEMORY_HEADROOM` of what is free
    where its ranks run (skipped where that is unknown), with the arithmetic shown."""
    if choice.device_kind == "cpu":
        available = available_memory()
        if available is not None and choice.ranks * need.bytes_per_rank > MEMORY_HEADROOM * available:
            raise UsageError(
                f"{need.what} needs about {human_bytes(choice.ranks * need.bytes_per_rank)} ({choice.ranks} ranks × "
                f"{human_bytes(need.per_rank_bytes)} × {need.buffers:g} buffers) but {human_bytes(available)} "
                f"is available; use smaller sizes or fewer ranks")
        return
    for index in range(min(choice.gpus, choice.ranks)):
        device = nvml.device_memory(index)
        sharing = choice.ranks_on_device(index)
        if device is None or not sharing:
            continue
        free = device.total - device.used
        if sharing * need.bytes_per_rank > MEMORY_HEADROOM * free:
            raise UsageError(
                f"{need.what} needs about {human_bytes(sharing * need.bytes_per_rank)} on GPU {index} ({sharing} "
                f"rank{'s' if sharing > 1 else ''} × {human_bytes(need.per_rank_bytes)} × {need.buffers:g} buffers) "
                f"but {human_bytes(free)} of it is free; use smaller sizes or fewer ranks")


def run_start_fields(plan: RunPlan, pid: int) -> dict:
    """The fields of the RunStart event describing ``plan`` (run/rank/seq/t_ns excluded)."""
    return dict(
        scenario=plan.scenario.name, world_size=plan.world_size, backend=plan.backend.backend,
        device_kind=plan.backend.device_kind, backend_reason=plan.banner,
        mode="step" if plan.step else "live", description=plan.scenario.description,
        example=plan.program.source, torch_version=str(torch.__version__), host=platform.node(),
        pid=pid, phase_count=plan.program.phase_count, options=plan.program.run_options(),
        nccl_version=nccl_version() if plan.backend.device_kind == "cuda" else "",  # NCCL's runs, a script's on GPUs
    )


def nccl_version() -> str:
    """The version of the NCCL this torch was built with (``2.27.5``, NCCL's own suffix after it
    where it has one), as torch reads it from the library without creating a CUDA context; empty
    where torch has no NCCL (a CPU build)."""
    try:
        found = torch.cuda.nccl.version()  # (major, minor, patch) or (major, minor, patch, suffix)
    except (AttributeError, RuntimeError):  # a CPU build has no NCCL to ask
        return ""
    return ".".join(str(part) for part in found[:3]) + "".join(str(part) for part in found[3:])


def worker_config(plan: RunPlan, *, run: str, init_method: str, endpoints: Endpoints,
                  secret: bytes | None = None, run_start: dict | None = None,
                  recorder: RecorderPlace | None = None) -> WorkerConfig:
    """What every worker of ``plan`` receives; the transport (``run`` id, rendezvous, endpoints,
    secret) is the session's, and so is where the ranks keep their recorder (``recorder``; a plan
    that :attr:`~RunPlan.reads_recorder` needs one)."""
    if plan.reads_recorder and recorder is None:
        raise ValueError(f"{plan.scenario.name}: a run read from Flight Recorder needs the folder its ranks dump to")
    return WorkerConfig(
        run=run, world_size=plan.world_size, backend=plan.backend, init_method=init_method, endpoints=endpoints,
        step=plan.step, timeout_s=plan.timeout_s + PROCESS_GROUP_GRACE_S, program=plan.program,
        narration=dict(plan.scenario.narration), secret=secret, run_start=run_start,
        memory_viz=None if plan.memory_viz is None else str(plan.memory_viz),
        recorder=recorder if plan.reads_recorder else None,
    )

