"""Per-rank torch.profiler traces of a 4-rank NCCL job in the four shapes that tell wrong from right,
written by hand to the format torch documents (``record_param_comms`` rows and their NCCL kernels,
linked by ``External id``; these machines have no GPU to record one). Nothing here imports collviz.

The job, group by group (``distributedInfo.pg_config`` names all three):

- group ``0`` (``default_pg``, ranks 0–3): one all_reduce of :data:`WORLD_ELEMENTS` float32, whose
  kernel takes :data:`WORLD_KERNEL_US` on each rank — rank 3's four times its peers';
- group ``1`` (``tp_a``, ranks 0 and 1) and group ``2`` (``tp_b``, ranks 2 and 3): two communicators
  of the same size, each with one all_gather of a different size and its own kernel times
  (:data:`PAIR_ELEMENTS`, :data:`PAIR_KERNEL_US`); ``tp_b`` holds no rank 0.

The tests compute every expected figure by hand from these numbers (written out in their docstrings).
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["WORLD", "GROUPS", "WORLD_ELEMENTS", "WORLD_KERNEL_US", "PAIR_ELEMENTS", "PAIR_KERNEL_US", "write_traces"]

WORLD = 4
GROUPS = {"0": ("default_pg", [0, 1, 2, 3]), "1": ("tp_a", [0, 1]), "2": ("tp_b", [2, 3])}
"""Process group name → (description, ranks), as ``pg_config`` lists them."""

WORLD_ELEMENTS = 262_144
"""float32 elements of each rank's all_reduce on the default group (1 MiB)."""
WORLD_KERNEL_US = {0: 1000.0, 1: 1000.0, 2: 1000.0, 3: 4000.0}
"""Each rank's all_reduce kernel time (µs): rank 3's differs from its peers'."""

PAIR_ELEMENTS = {"1": 1024, "2": 2048}
"""float32 input elements of each pair's all_gather (its output: twice as many)."""
PAIR_KERNEL_US = {0: 10.0, 1: 40.0, 2: 50.0, 3: 20.0}
"""Each rank's all_gather kernel time (µs), on its pair's group."""


def _comms(rank: int, ext: int, ts: float, name: str, group: str, elements_in: int, elements_out: int) -> dict:
    """The ``record_param_comms`` row torch writes for one call."""
    description, ranks = GROUPS[group]
    return {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": ts, "dur": 6.0, "pid": 1, "tid": 1,
            "args": {"External id": ext, "Collective name": name, "dtype": "Float", "In msg nelems": elements_in,
                     "Out msg nelems": elements_out, "Group size": len(ranks), "Process Group Name": group,
                     "Process Group Description": description, "Process Group Ranks": str(ranks), "Rank": rank}}


def _kernel(ext: int, ts: float, dur: float, name: str) -> dict:
    """The NCCL kernel of the call with External id ``ext``."""
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7,
            "args": {"External id": ext, "correlation": ext + 100}}


def trace(rank: int) -> dict:
    """Rank ``rank``'s trace: its all_reduce on the world, then its pair's all_gather."""
    pair = "1" if rank in GROUPS["1"][1] else "2"
    elements = PAIR_ELEMENTS[pair]
    return {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": WORLD,
                                "pg_config": [{"pg_name": name, "pg_desc": description, "ranks": ranks}
                                              for name, (description, ranks) in GROUPS.items() if rank in ranks]},
            "traceEvents": [
                _comms(rank, 20, 100.0, "allreduce", "0", WORLD_ELEMENTS, WORLD_ELEMENTS),
                _kernel(20, 110.0, WORLD_KERNEL_US[rank], "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, ...)"),
                _comms(rank, 21, 5000.0, "_allgather_base", pair, elements, 2 * elements),
                _kernel(21, 5010.0, PAIR_KERNEL_US[rank], "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, ...)")]}


def write_traces(folder: Path) -> Path:
    """Write ``trace_<rank>.json`` of every rank into ``folder``; return it."""
    for rank in range(WORLD):
        (folder / f"trace_{rank}.json").write_text(json.dumps(trace(rank)), encoding="utf-8")
    return folder
