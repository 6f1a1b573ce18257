"""The backends a run can use: one row per way of placing ranks on devices.

A row says which ``torch.distributed`` backend it uses, on which kind of device, when it applies
(how many GPUs are visible for how many ranks on one machine), which device rank r uses, what
environment rank r needs before it joins the process group, and how the banner describes it.
:func:`choose_backend` picks the first row that applies to ``--backend``; nothing else in collviz
decides a backend. Adding one is a row in :data:`BACKENDS` (and a test that runs it); the
command line's ``--backend`` choices, the banner and the workers' placement follow from the row.

Nothing here initialises CUDA: GPUs are counted through NVML, so the launcher may still fork.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from .errors import UsageError
from .observation import nvml

__all__ = ["Backend", "BACKENDS", "BACKEND_NAMES", "SCRIPT_ROWS", "RankPlacement", "BackendChoice", "choose_backend",
           "script_backend"]


@dataclass(frozen=True)
class RankPlacement:
    """Where one rank runs: its CUDA device index (None on CPU) and the environment variables it
    sets before joining the process group."""

    device_index: int | None
    environment: Mapping[str, str] = field(default_factory=dict)


def _no_environment(rank: int, one_machine: bool) -> dict[str, str]:
    return {}


def _own_host_id(rank: int, one_machine: bool) -> dict[str, str]:
    """NCCL refuses two ranks on one GPU by comparing host id and bus id; a rank with its own host
    id passes, and NCCL then connects the ranks through its network transport as if each were on
    its own host. On one machine that is its socket transport over loopback (``NCCL_NET=Socket``:
    on a host with InfiniBand NCCL would otherwise pick NET/IB) unless the user chose a network or
    an interface; across machines the user's network settings are left alone."""
    environment = {"NCCL_HOSTID": f"collviz-rank{rank}"}
    if one_machine and "NCCL_SOCKET_IFNAME" not in os.environ:
        environment["NCCL_SOCKET_IFNAME"] = "lo"
    if one_machine and "NCCL_NET" not in os.environ:
        environment["NCCL_NET"] = "Socket"
    return environment


def _shared_transport() -> str:
    """The transport ranks sharing a GPU talk over, as the banner names it: NCCL's socket transport
    (collviz sets ``NCCL_NET=Socket``) unless the user chose another network with ``NCCL_NET``."""
    chosen = os.environ.get("NCCL_NET", "Socket")
    return "its socket transport" if chosen.lower() == "socket" else f"NCCL_NET={chosen}"


def _shared_banner(gpus: int, ranks: int, auto: bool) -> str:
    return (f"{ranks} ranks share {_plural(gpus, 'GPU')}: NCCL over {_shared_transport()}, not NVLink — "
            f"times are not a {ranks}-GPU machine's")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


@dataclass(frozen=True)
class Backend:
    """One row of the backend table."""

    name: str
    """The row's own name (shown in ``collviz doctor`` and in tests)."""
    process_group: str
    """What ``init_process_group`` is given; also the ``--backend`` value that selects the row."""
    device_kind: Literal["cpu", "cuda"]
    applies: Callable[[int, int], bool]
    """(GPUs visible on this machine, ranks on this machine) → whether the row can run them."""
    banner: Callable[[int, int, bool], str]
    """(GPUs visible, ranks on this machine, whether ``auto`` chose it) → the one line saying what
    the run runs on (and, when ``auto`` chose it, why)."""
    environment: Callable[[int, bool], dict[str, str]] = _no_environment
    """(global rank, whole job on one machine) → environment rank r sets before joining."""
    shares_gpus: bool = False
    """Whether several ranks use one GPU (the screen says times are not a many-GPU machine's)."""
    program_joins: bool = False
    """Whether the program picks its backend and device and joins the process group itself (a
    user's script): the worker then leaves the group, the device and memory tracking to it."""

    def device_index(self, local_rank: int, gpus: int) -> int | None:
        """The CUDA device of the rank ``local_rank`` of this machine: GPU ``local_rank mod gpus``."""
        return None if self.device_kind == "cpu" else local_rank % gpus


BACKENDS: tuple[Backend, ...] = (
    Backend("nccl", "nccl", "cuda", applies=lambda gpus, ranks: gpus >= ranks,
            banner=lambda gpus, ranks, auto: f"NCCL on {ranks} of {gpus} visible GPUs"),
    Backend("nccl-shared", "nccl", "cuda", applies=lambda gpus, ranks: 0 < gpus < ranks,
            banner=_shared_banner, environment=_own_host_id, shares_gpus=True),
    Backend("gloo", "gloo", "cpu", applies=lambda gpus, ranks: True,
            banner=lambda gpus, ranks, auto: "gloo on CPU" + (": no GPU is visible" if auto else "")),
)
"""Every backend, in the order ``--backend auto`` tries them."""

BACKEND_NAMES: tuple[str, ...] = ("auto", *dict.fromkeys(row.process_group for row in BACKENDS))
"""The values ``--backend`` takes."""


def _script_banner(gpus: int, ranks: int, auto: bool) -> str:
    visible = f"{_plural(gpus, 'GPU')} visible" if gpus else "no GPU visible"
    return f"the script picks its own backend and devices ({visible})"


def _script_shared_banner(gpus: int, ranks: int, auto: bool) -> str:
    return (f"the script picks its own backend; {ranks} ranks share {_plural(gpus, 'GPU')} (LOCAL_RANK names "
            f"each rank's GPU; NCCL over {_shared_transport()})")


SCRIPT_ROWS: tuple[Backend, ...] = (
    Backend("script-cuda", "script's own", "cuda", applies=lambda gpus, ranks: gpus >= ranks, banner=_script_banner,
            program_joins=True),
    Backend("script-cuda-shared", "script's own", "cuda", applies=lambda gpus, ranks: 0 < gpus < ranks,
            banner=_script_shared_banner, environment=_own_host_id, shares_gpus=True, program_joins=True),
    Backend("script-cpu", "script's own", "cpu", applies=lambda gpus, ranks: True, banner=_script_banner,
            program_joins=True),
)
"""The rows of a user's script (``collviz run train.py``), which joins the process group itself;
not choices of ``--backend``. Their device kind is what the script will find: GPUs, or none. With
more ranks than GPUs, each rank gets its own NCCL host id (as ``nccl-shared``) and a LOCAL_RANK
naming its GPU, so a script's ``torch.cuda.set_device(LOCAL_RANK)`` works."""


@dataclass(frozen=True)
class BackendChoice:
    """The row chosen for a run, the GPUs and ranks it was chosen for, and why (the banner)."""

    row: Backend
    gpus: int
    """GPUs visible on this machine when the run was planned (0 on CPU)."""
    ranks: int
    """Ranks on this machine."""
    reason: str
    one_machine: bool = True
    """Whether every rank of the job runs on this machine (a local session; torchrun may span several)."""

    @property
    def backend(self) -> str:
        """The ``torch.distributed`` backend name: ``gloo`` or ``nccl``."""
        return self.row.process_group

    @property
    def device_kind(self) -> Literal["cpu", "cuda"]:
        """``cpu`` or ``cuda``."""
        return self.row.device_kind

    def placement(self, rank: int, local_rank: int | None = None) -> RankPlacement:
        """Where global rank ``rank`` (``local_rank`` on its machine; default ``rank``) runs."""
        local = rank if local_rank is None else local_rank
        return RankPlacement(self.row.device_index(local, self.gpus), self.row.environment(rank, self.one_machine))

    def local_rank(self, rank: int, local_rank: int | None = None) -> int:
        """The ``LOCAL_RANK`` a program that joins the group itself sees: on CUDA, the index of the
        rank's GPU (what ``torch.cuda.set_device(LOCAL_RANK)`` needs; ranks sharing a GPU see the
        same), on CPU its rank on this machine."""
        local = rank if local_rank is None else local_rank
        index = self.row.device_index(local, self.gpus)
        return local if index is None else index

    def ranks_on_device(self, index: int) -> int:
        """How many of this machine's ranks use CUDA device ``index`` (0 on CPU)."""
        if self.device_kind == "cpu":
            return 0
        return sum(1 for local in range(self.ranks) if self.row.device_index(local, self.gpus) == index)


def script_backend(ranks: int, *, gpus: int | None = None, one_machine: bool = True) -> BackendChoice:
    """The row of a script's run on ``ranks`` ranks of this machine (``gpus`` defaults to NVML's
    count): the script chooses its backend and devices, the banner says so."""
    visible = nvml.gpu_count() if gpus is None else gpus
    row = next(row for row in SCRIPT_ROWS if row.applies(visible, ranks))
    return BackendChoice(row, visible, ranks, row.banner(visible, ranks, True), one_machine)


def choose_backend(requested: str, ranks: int, *, gpus: int | None = None, one_machine: bool = True) -> BackendChoice:
    """The backend for ``ranks`` ranks on this machine: ``auto`` takes the first row of
    :data:`BACKENDS` that applies (NCCL whenever a GPU is visible, sharing GPUs when there are
    fewer than ranks; gloo on CPU otherwise); ``gloo`` or ``nccl`` the first row of that backend
    that applies, or a UsageError saying why none does. ``gpus`` defaults to NVML's count."""
    if requested not in BACKEND_NAMES:
        raise UsageError(f"--backend {requested}: choose {', '.join(BACKEND_NAMES[:-1])} or {BACKEND_NAMES[-1]}")
    visible = nvml.gpu_count() if gpus is None else gpus
    rows = [row for row in BACKENDS if requested in ("auto", row.process_group)]
    for row in rows:
        if row.applies(visible, ranks):
            auto = requested == "auto"
            reason = row.banner(visible, ranks, auto) + ("" if auto else f" (--backend {requested})")
            return BackendChoice(row, visible if row.device_kind == "cuda" else 0, ranks, reason, one_machine)
    why = nvml.nvml_unavailable_reason() or "NVML sees no GPU"
    raise UsageError(f"--backend {requested} needs a GPU, but none is visible ({why}); use --backend gloo (CPU)")
