"""What the tests of imported artifacts share: the committed NCCL log, the default group's name as
the importers show it, a documented 2-rank NCCL profiler trace, and the begin edges of each rank's
calls. The jobs whose real dumps and traces they open are :mod:`support.artifact_jobs`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from collviz.runtime.wire.protocol import Collective

from support.paths import FIXTURES

__all__ = ["NCCL_LOG", "WORLD_GROUP", "FLOAT32", "call_begins", "only", "gpu_trace"]

NCCL_LOG = FIXTURES / "nccl" / "job-4ranks.log"
"""The hand-written 4-rank NCCL log (no GPU here to capture one)."""

WORLD_GROUP = "0 (default_pg)"
"""The default group as every importer names it: torch's name, then its description."""

FLOAT32 = 4
"""Bytes of one float32 element."""


def call_begins(events: Iterable[object]) -> dict[int, list[Collective]]:
    """Each rank's calls, as their begin edges, in the order the events hold them."""
    found: dict[int, list[Collective]] = defaultdict(list)
    for event in events:
        if isinstance(event, Collective) and event.edge == "begin":
            found[event.rank].append(event)
    return found


def only(events: Iterable[object], kind: type) -> list:
    """The events of ``kind``, in order."""
    return [e for e in events if isinstance(e, kind)]


def gpu_trace(rank: int) -> dict:
    """A 2-rank NCCL trace as torch documents it: each call's record_param_comms row and its NCCL
    kernel, linked by External id (no GPU here to record one: not verified on real output)."""
    def comms(ext: int, ts: float, name: str, nelems_in: int, nelems_out: int) -> dict:
        return {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": ts, "dur": 5.0, "pid": 1, "tid": 1,
                "args": {"External id": ext, "Collective name": name, "dtype": "BFloat16", "In msg nelems": nelems_in,
                         "Out msg nelems": nelems_out, "Group size": 2, "Process Group Name": "0",
                         "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]", "Rank": rank}}

    def kernel(ext: int, ts: float, dur: float, name: str) -> dict:
        return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7,
                "args": {"External id": ext, "correlation": ext + 100}}

    return {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2,
                                "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "ranks": [0, 1]}]},
            "traceEvents": [comms(10, 100.0, "allreduce", 4096, 4096), comms(11, 300.0, "_allgather_base", 1024, 2048),
                            kernel(11, 320.0, 40.0 + rank, "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, ...)"),
                            kernel(10, 110.0, 80.0 + rank, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...)")]}
