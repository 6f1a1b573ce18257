"""What NCCL says it chose: the algorithm and protocol of each call, from its debug output.

With ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING`` NCCL prints, per call,
``AllReduce: 1048576 Bytes -> Algo RING proto LL128 …`` (numbered, ``Algo 1 proto 2``, in older
versions). :func:`nccl_choice` reads one such line and :func:`nccl_choices` a whole log. On an
NCCL run ``collviz bench`` gathers its workers' lines itself and puts NCCL's choice beside the
library rows of the same op and size, labelled as NCCL's own report; a user's own NCCL log is
opened by :mod:`collviz.runtime.sources.nccl_log`, which reads its tuning lines with
:func:`nccl_choice`.

GPU only, not verified here: these machines have no GPU, so the parser is tested on the text
shipped in ``tests/fixtures/nccl/``, written to the format NCCL documents, not on a captured log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["NcclChoice", "NCCL_OPS", "nccl_choice", "nccl_choices", "NCCL_LABEL"]

NCCL_LABEL = "NCCL's own report (GPU only, not verified here)"
"""How every figure from NCCL's log is labelled."""

_LINE = re.compile(r"NCCL INFO (\w+): (\d+) Bytes -> Algo (\w+) proto (\w+)")
NCCL_OPS = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
            "Broadcast": "broadcast", "Reduce": "reduce", "AllToAll": "all_to_all"}
"""NCCL's names of its collectives in its log, as collviz names them."""
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


def nccl_choice(line: str) -> NcclChoice | None:
    """NCCL's choice for one call, if ``line`` is one of its tuning lines."""
    match = _LINE.search(line)
    if match is None or match.group(1) not in NCCL_OPS:
        return None
    return NcclChoice(NCCL_OPS[match.group(1)], int(match.group(2)), _name(match.group(3), _ALGOS),
                      _name(match.group(4), _PROTOCOLS))


def nccl_choices(lines: Iterable[str]) -> dict[tuple[str, int], NcclChoice]:
    """Every (op, size) NCCL reported a choice for; a later line for the same call wins."""
    found: dict[tuple[str, int], NcclChoice] = {}
    for line in lines:
        choice = nccl_choice(line)
        if choice is not None:
            found[(choice.op, choice.size)] = choice
    return found
