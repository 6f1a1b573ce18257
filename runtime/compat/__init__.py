"""Every torch API collviz touches whose presence depends on torch's version: the one place to look
when torch moves.

collviz supports torch ≥ 2.8 (:data:`FLOOR`; a vendor build of a release counts as that release, e.g.
``2.8.0a0+5228986c39.nv25.05`` is 2.8) and never replaces the torch that is installed. Each API
below names the lowest torch that has it and what collviz does on an older one — a fallback here,
or a one-line refusal of the scenario that needs it, before any process starts:

=====================================================  ======  ==========================================
API                                                    since   below it
=====================================================  ======  ==========================================
``distributed_c10d.GroupName``                         2.10    :data:`GroupName` is ``str`` (torch's is a
                                                               ``NewType`` of ``str``)
``DistributedDataParallel(bucket_cap_mb_list=)``       2.11    scenario ``ddp`` is refused
                                                               (:data:`DDP_BUCKET_CAP_MB_LIST`, named in
                                                               ``programs.registry.NEEDS``): an older
                                                               DDP puts every gradient in one bucket in
                                                               its first step, whatever ``bucket_cap_mb``
gloo's reduce-scatter with ``ReduceOp.AVG``            2.9     FSDP2 on gloo reduces by SUM and divides
                                                               after (:func:`fsdp_average_by_sum`): 2.8's
                                                               gloo returns the *sum* for AVG, silently
                                                               (FSDP2's gradients came out N× too large);
                                                               ``reduce-scatter --op avg`` on gloo is
                                                               refused (:data:`GLOO_REDUCE_SCATTER_AVG`)
=====================================================  ======  ==========================================

(The AVG reduce-scatter sums on 2.8 and averages on 2.9.0, 2.9.1, 2.10.0, 2.11 and 2.13, checked
2026-11-28 on 2 gloo ranks with ``reduce_scatter_tensor``.)

A bug of torch's own in some releases is a :class:`TorchBug`: the scenario it breaks is refused
there in one line naming torch's issue:

======================================  ========  ==================================================
bug                                     releases  refused
======================================  ========  ==================================================
:data:`PIPELINE_FIRST_STEP`             2.9       scenario ``pp``: a pipeline schedule's first step
                                                  sends every neighbour an int64 that it receives as
                                                  a float32 (pytorch/pytorch#165143); gloo aborts
                                                  (``8 vs 4``), NCCL's result is undefined. 2.8
                                                  lacks that step, 2.10 fixed it (a plain GPipe
                                                  script under torchrun on 2.9.0 and 2.9.1 aborts
                                                  the same way and passes on 2.10.0, 2026-11-28)
======================================  ========  ==================================================

Checked on 2.8 and needing no fallback in the supported range (what breaks below it, for whoever
lowers the floor): FSDP2's public ``torch.distributed.fsdp.fully_shard`` and ``FSDPModule`` (2.6;
``torch.distributed._composable.fsdp`` before); gloo's ``ReduceOp.AVG``, all-reduce's default op
(2.6's gloo refuses it, 2.8's takes it); the Flight Recorder dumps ``_dump_fr_trace`` and
``_dump_fr_trace_json`` (2.8 has them beside the older ``_dump_nccl_trace*`` names); the ``c10d``
and ``_c10d_functional`` ops the observers intercept; ``torch._C._dispatch_keyset_full_after``;
``torch.distributed.pipelining``'s ``PipelineStage``, ``ScheduleGPipe`` and ``Schedule1F1B``;
``torch.distributed.elastic.control_plane.worker_main`` and its ``TORCH_WORKER_SERVER_SOCKET`` (a
script's ranks serve their recorder: ``userjob.recorder``; on 2.8 and 2.11 the server leaves its
socket file behind and will not open over it, so the rank removes it; 2.8 to 2.13 bind
``_WorkerServer.shutdown`` holding the interpreter lock while it joins threads that may wait for
it, so the rank never shuts its server down: ``os._exit`` ends it), and gloo's Flight Recorder
through ``_dump_fr_trace_json`` — 2.8 records nothing unless ``TORCH_FR_BUFFER_SIZE`` is set
(2.11 and 2.13: 2,000 calls by default), which a script's run sets where the user did not; where
torch is built with NCCL, NCCL's calls are in a recorder of their own (``_dump_nccl_trace_json``,
joined into the rank's dump). 2.8's worker server serves only NCCL's recorder
(``dump_nccl_trace_json``); ``fr_trace_json``, gloo's, is there in 2.11 and 2.13.
(2.8's ``torch.distributed.fsdp`` makes a temporary folder as it loads, removed at a normal exit:
this module does not import it to run.)

Not used, on purpose: the list form of ``all_to_all`` (``dist.all_to_all``), which gloo lacks on 2.8
and 2.11 ("Backend gloo does not support alltoall") and has on 2.13; collviz's ``all-to-all`` and
``moe`` call ``all_to_all_single``, which every supported gloo has.

Adding an API is a :class:`TorchAPI` (or a fallback import) here, a bug a :class:`TorchBug`, and the
code that uses it reads it from this module; :mod:`.verified` names the releases CI checks.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from .verified import PINNED_TORCH, VERIFIED_TORCH

if TYPE_CHECKING:  # not imported to run: torch 2.8's fsdp package makes a temporary folder as it loads
    from torch.distributed.fsdp import FSDPModule

__all__ = ["FLOOR", "PINNED_TORCH", "VERIFIED_TORCH", "TORCH_VERSION", "TorchAPI", "DDP_BUCKET_CAP_MB_LIST",
           "GLOO_REDUCE_SCATTER_AVG", "TorchBug", "PIPELINE_FIRST_STEP", "GroupName", "release", "floor_refusal", "is_verified", "fsdp_average_by_sum"]

FLOOR = (2, 8)
"""The oldest torch release collviz runs on."""

TORCH_VERSION = str(torch.__version__)
"""The installed torch, as it names itself (``2.8.0+cu128``, ``2.13.0+cpu``)."""

if TYPE_CHECKING:  # the type check runs against the pinned torch, which has it
    from torch.distributed.distributed_c10d import GroupName
else:
    try:
        from torch.distributed.distributed_c10d import GroupName  # torch ≥ 2.10
    except ImportError:  # older: torch's GroupName is a NewType of str, and str is what its functions take
        GroupName = str


def release(version: str) -> tuple[int, int]:
    """The (major, minor) release of a torch version string: ``2.8.0a0+5228986c39.nv25.05`` → (2, 8).

    A pre-release or local build counts as its release, as a vendor's container build of 2.8 is 2.8.
    ValueError where the string does not start with ``MAJOR.MINOR``.
    """
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None:
        raise ValueError(f"not a torch version: {version!r}")
    return int(found[1]), int(found[2])


def _text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


@dataclass(frozen=True)
class TorchAPI:
    """A torch API that some torch releases lack: what it is, the lowest release having it, and
    whether the installed torch has it — read from torch itself where that can be done without
    running anything (a vendor build that has it then counts, whatever its version says), else
    from its release."""

    name: str
    since: tuple[int, int]
    present: bool

    def refusal(self, what: str) -> str | None:
        """One line saying ``what`` needs a newer torch (``scenario ddp needs torch ≥ 2.11 (this is
        2.8.0+cu128)``), or None where this torch has the API."""
        if self.present:
            return None
        return f"{what} needs torch ≥ {_text(self.since)} (this is {TORCH_VERSION})"


DDP_BUCKET_CAP_MB_LIST = TorchAPI(
    "DistributedDataParallel(bucket_cap_mb_list=)", (2, 11),
    "bucket_cap_mb_list" in inspect.signature(DistributedDataParallel.__init__).parameters)
"""Per-bucket caps that DDP applies from its first step (the ``ddp`` scenario's buckets)."""


def _installed_release() -> tuple[int, int] | None:
    """The installed torch's release, or None where its version cannot be read."""
    try:
        return release(TORCH_VERSION)
    except ValueError:
        return None


def _installed_since(since: tuple[int, int]) -> bool:
    """Whether the installed torch's release is ``since`` or newer (a version it cannot read: yes)."""
    installed = _installed_release()
    return installed is None or installed >= since


GLOO_REDUCE_SCATTER_AVG = TorchAPI("gloo's reduce-scatter with ReduceOp.AVG", (2, 9), _installed_since((2, 9)))
"""A reduce-scatter that averages on gloo (2.8's returns the sum); what FSDP2 reduces gradients with."""


def fsdp_average_by_sum(modules: Iterable[FSDPModule], group: dist.ProcessGroup | None) -> bool:
    """On a gloo ``group`` (None: the world) whose reduce-scatter sums for AVG, make every FSDP2
    module of ``modules`` reduce its gradients by SUM and divide afterwards (FSDP2's own path for
    low precision): the gradients it keeps are then the average, as on a newer torch. True where
    it did so."""
    if GLOO_REDUCE_SCATTER_AVG.present or dist.get_backend(group) != "gloo":
        return False
    for module in modules:
        module.set_force_sum_reduction_for_comms(True)
    return True


@dataclass(frozen=True)
class TorchBug:
    """A bug of torch's own in some releases that breaks what collviz runs on them: what it breaks,
    torch's issue, the releases that have it, and whether the installed torch is one of them (read
    from its release: a vendor build of an affected release counts as affected)."""

    name: str
    issue: str
    releases: tuple[tuple[int, int], ...]
    fixed_in: tuple[int, int]
    affected: bool

    def refusal(self, what: str) -> str | None:
        """One line saying ``what`` cannot run on this torch and naming torch's bug (``scenario pp
        cannot run on torch 2.9 (this is 2.9.1+cu128): torch's bug pytorch/pytorch#165143, …``), or
        None where this torch is not affected."""
        if not self.affected:
            return None
        releases = ", ".join(map(_text, self.releases))
        return (f"{what} cannot run on torch {releases} (this is {TORCH_VERSION}): torch's bug {self.issue}, "
                f"{self.name}; fixed in {_text(self.fixed_in)}")


def _bug(name: str, issue: str, releases: tuple[tuple[int, int], ...], fixed_in: tuple[int, int]) -> TorchBug:
    """A :class:`TorchBug` of ``releases``, affecting the installed torch where its release is one of them."""
    return TorchBug(name, issue, releases, fixed_in, _installed_release() in releases)


PIPELINE_FIRST_STEP = _bug("a pipeline schedule's first step sends an int64 that the next stage receives as a float32",
                           "pytorch/pytorch#165143", ((2, 9),), (2, 10))
"""torch 2.9's pipelining greets each neighbouring stage before its first step with a mismatched send
and receive (gloo aborts the rank: ``op.preamble.length <= op.nbytes. 8 vs 4``): scenario ``pp``."""


def floor_refusal(version: str = TORCH_VERSION) -> str | None:
    """One line saying collviz needs a newer torch than ``version``, or None where it is supported."""
    try:
        too_old = release(version) < FLOOR
    except ValueError:
        return None  # a torch that names itself oddly: let it try
    return f"this torch is {version}; collviz needs torch ≥ {_text(FLOOR)}" if too_old else None


def is_verified(version: str = TORCH_VERSION) -> bool:
    """Whether ``version`` (its local part aside: ``2.8.0+cu128`` is 2.8.0) is one CI verifies."""
    return version.split("+")[0] in VERIFIED_TORCH
