"""What an NCCL log says went wrong: its ``NCCL WARN`` and ``NCCL ERROR`` records, each on its rank.

NCCL prints a warning as ``host:pid:tid [dev] file.cc:line NCCL WARN message`` — the evidence of
a failed job (``NET/IB : Got completion from peer … error 12 … vendor err 129``, ``Cuda failure
'invalid argument'``). A warning's rank is the one its (host, process, device) is; a process's
helper thread may print another device's number (NCCL's IB async thread prints ``[0]`` in every
process), so where that names no rank, a process driving one rank gives it. A warning of no
known rank (its prefix cut off, its process's rank not in the log) is still the job's: it fails
the run, named by its host and GPU.

**A warning the job went on after does not fail it.** Every warning fails the run except one that
is both a notice NCCL (or its network plugin) prints and then carries on after — a fallback, not
an error (:data:`GOES_ON`) — and followed in the log by call lines of the process that printed it
(of any process, where its prefix is cut off). Such a warning is said as a run warning, ``job went
on: …`` (printed ``collviz: warning: job went on: …``) with the calls logged after it and what the
notice means, and the run ends as its other evidence says. The same
notice with no call after it (nccl-tests#311's four SHARP notices, after which the job hung) fails
the run as any warning does, saying that no call followed it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from ..observation.rank_lists import ranks_text
from .nccl_records import Record
from .run import Failed

__all__ = ["GOES_ON", "Attributed", "attribute", "failed", "went_on", "went_on_text", "warning_text"]

GOES_ON = {
    "Datatypes not supported": "SHARP cannot reduce those datatypes: NCCL reduces them without it",  # nccl-tests#311
    "using point-to-point network instead": "CollNet did not start: NCCL uses its point-to-point network",  # nccl#1050
}
"""Words of each notice NCCL goes on after (a message holding them is that notice), and what it
means, said with it; each was read in the real log its comment names."""

_Agent = tuple[str, int, int | None]
_UNNAMED_HOST = "a host the log does not name"
_MESSAGE_CHARS = 300
"""The most characters of a warning's message a sentence quotes."""


Attributed = tuple[Record, int | None]
"""A warning and its rank (None: unknown)."""


def attribute(records: Sequence[Record], rank_of: Mapping[_Agent, int]) -> list[Attributed]:
    """Each warning with its rank (None: unknown)."""
    by_process: dict[tuple[str, int], set[int]] = defaultdict(set)
    for (host, pid, _), number in rank_of.items():
        by_process[(host, pid)].add(number)
    found: list[Attributed] = []
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


def _notice(record: Record) -> str:
    """What ``record`` means where it is a notice NCCL goes on after (:data:`GOES_ON`), else ''."""
    return next((meaning for words, meaning in GOES_ON.items() if words in record.message), "")


def went_on(found: Sequence[Attributed], calls_after: Sequence[int]) -> tuple[list[Attributed], list[tuple[Attributed, int]]]:
    """``found`` split into the warnings that fail the run and those the job went on after (a
    notice with ``calls_after`` it, each warning's count of call lines its process logged after it)."""
    failing: list[Attributed] = []
    passed: list[tuple[Attributed, int]] = []
    for warning, calls in zip(found, calls_after, strict=True):
        if _notice(warning[0]) and calls > 0:
            passed.append((warning, calls))
        else:
            failing.append(warning)
    return failing, passed


def went_on_text(warning: Attributed, calls: int) -> str:
    """``job went on: NCCL WARN … on rank 2 (gpu36): 3 calls logged after it by its process (what
    the notice means)``: a run warning, printed ``collviz: warning: job went on: …``."""
    record, rank = warning
    return (f"job went on: {warning_text(record)} on {_where(record, rank)}: {calls:,} call"
            f"{'s' if calls > 1 else ''} logged after it by {'its process' if record.host else 'the job'} "
            f"({_notice(record)})")


def failed(found: Sequence[Attributed], count: int) -> Failed:
    """The run's failure from its attributed warnings that fail it (``count``: every such warning
    the log holds, kept or not): each rank's first, and the run's account naming the first warning
    and its rank (a notice NCCL goes on after fails only with no call after it, and says so)."""
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
    after = " — a notice NCCL goes on after, but no call follows it in the log" if _notice(first) else ""
    return Failed(ranks, (f"{warning_text(first)} on {_where(first, rank)}{after}{more}",))
