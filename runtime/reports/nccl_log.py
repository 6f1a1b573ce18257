"""What NCCL says it chose: the algorithm and protocol of each call, from its debug output.

Run the GPU side with ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING`` and NCCL prints, per call,
``AllReduce: 1048576 Bytes -> Algo RING proto LL128 …`` (numbered, ``Algo 1 proto 2``, in older
versions). :func:`nccl_choices` reads those lines; ``collviz bench --nccl-log FILE`` puts NCCL's
choice beside the library rows of the same op and size, labelled as NCCL's own report.

GPU only, not verified here: these machines have no GPU, so the parser is tested on the text
shipped in ``tests/fixtures/nccl/``, written to the format NCCL documents, not on a captured log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["NcclChoice", "nccl_choices", "NCCL_LABEL"]

NCCL_LABEL = "NCCL's own report (GPU only, not verified here)"
"""How every figure from NCCL's log is labelled."""

_LINE = re.compile(r"NCCL INFO (\w+): (\d+) Bytes -> Algo (\w+) proto (\w+)")
_OPS = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
        "Broadcast": "broadcast", "Reduce": "reduce", "AllToAll": "all_to_all"}
_ALGOS = ("TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT")
_PROTOCOLS = ("LL", "LL128", "SIMPLE")


@dataclass(frozen=True)
class NcclChoice:
    """NCCL's algorithm and protocol for one op at one size (bytes as NCCL counts them)."""

    op: str
    size: int
    algo: str
    protocol: str


def _name(value: str, names: tuple[str, ...]) -> str:
    """NCCL's numbered algorithm or protocol as its name (older versions print the number)."""
    return names[int(value)] if value.isdigit() and int(value) < len(names) else value


def nccl_choices(lines: Iterable[str]) -> dict[tuple[str, int], NcclChoice]:
    """Every (op, size) NCCL reported a choice for; a later line for the same call wins."""
    found: dict[tuple[str, int], NcclChoice] = {}
    for line in lines:
        match = _LINE.search(line)
        if match is None or match.group(1) not in _OPS:
            continue
        op, size = _OPS[match.group(1)], int(match.group(2))
        found[(op, size)] = NcclChoice(op, size, _name(match.group(3), _ALGOS), _name(match.group(4), _PROTOCOLS))
    return found
