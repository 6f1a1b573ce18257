"""What an NCCL log says went wrong: its ``NCCL WARN`` and ``NCCL ERROR`` records, each on its rank.

NCCL prints a warning as ``host:pid:tid [dev] file.cc:line NCCL WARN message`` — the evidence of
a failed job (``NET/IB : Got completion from peer … error 12 … vendor err 129``, ``Cuda failure
'invalid argument'``). A warning's rank is the one its (host, process, device) is; a process's
helper thread may print another device's number (NCCL's IB async thread prints ``[0]`` in every
process), so where that names no rank, a process driving one rank gives it. A warning of no
known rank (its prefix cut off, its process's rank not in the log) is still the job's: it fails
the run, named by its host and GPU.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from ..observation.rank_lists import ranks_text
from .nccl_records import Record
from .run import Failed

__all__ = ["attribute", "failed", "warning_text"]

_Agent = tuple[str, int, int | None]
_UNNAMED_HOST = "a host the log does not name"
_MESSAGE_CHARS = 300
"""The most characters of a warning's message a sentence quotes."""


def attribute(records: Sequence[Record], rank_of: Mapping[_Agent, int]) -> list[tuple[Record, int | None]]:
    """Each warning with its rank (None: unknown)."""
    by_process: dict[tuple[str, int], set[int]] = defaultdict(set)
    for (host, pid, _), number in rank_of.items():
        by_process[(host, pid)].add(number)
    found: list[tuple[Record, int | None]] = []
    for record in records:
        rank = rank_of.get((record.host or "", record.pid, record.device))  # no host: numbered by its GPU alone
        alone = by_process.get((record.host, record.pid), set()) if record.host is not None else set()
        if rank is None and len(alone) == 1:
            rank = next(iter(alone))
        found.append((record, rank))
    return found


def warning_text(record: Record) -> str:
    """``NCCL WARN NET/IB : … (transport/net_ib.cc:1075)``: the record as NCCL worded it."""
    message = record.message if len(record.message) <= _MESSAGE_CHARS else record.message[:_MESSAGE_CHARS] + "…"
    return f"NCCL {record.level} {message}" + (f" ({record.where})" if record.where else "")


def _where(record: Record, rank: int | None) -> str:
    host = record.host or _UNNAMED_HOST
    if rank is not None:
        return f"rank {rank} ({host})"
    return f"an unknown rank ({host}" + (f", pid {record.pid}" if record.host else "") + (f", GPU {record.dev})" if record.dev else ")")


def failed(found: Sequence[tuple[Record, int | None]], count: int) -> Failed:
    """The run's failure from its attributed warnings (``count``: every warning the log holds, kept
    or not): each rank's first, and the run's account naming the first warning and its rank."""
    if not found:
        return Failed()
    ranks: dict[int, str] = {}
    for record, rank in found:
        if rank is not None and rank not in ranks:
            ranks[rank] = f"{warning_text(record)} on {record.host or _UNNAMED_HOST}"
    first, rank = found[0]
    more = ""
    if count > 1:
        others = sorted(set(ranks) - {rank})
        more = (f" (and {count - 1:,} more WARN/ERROR lines"
                + (f", on rank{'s' if len(others) > 1 else ''} {ranks_text(others)} too" if others else "") + ")")
    return Failed(ranks, (f"{warning_text(first)} on {_where(first, rank)}{more}",))
