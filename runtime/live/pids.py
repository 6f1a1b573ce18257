"""The ranks behind the process ids ``collviz attach --pid`` is given, read from ``/proc``.

A pid is a rank when its environment holds ``RANK`` (torchrun, ``torch.distributed.run`` and
every launcher set it); else it is a launcher (torchrun's agent, ``srun``, a shell) whose ranks
are its descendant processes that hold ``RANK`` (the nearest ones: a rank's own children, a data
loader's workers, inherit it and are not ranks). Each rank is named once; a pid that is neither,
or that is gone, is a one-line :class:`~..errors.UsageError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

__all__ = ["RankProcess", "find_ranks"]

PROC = Path("/proc")


@dataclass(frozen=True)
class RankProcess:
    """One rank's process: its rank, pid, and the environment it started with."""

    rank: int
    pid: int
    environ: Mapping[str, str]

    @property
    def world_size(self) -> int:
        """The job's world size as the rank's environment says (0: it does not)."""
        value = self.environ.get("WORLD_SIZE", "")
        return int(value) if value.isdigit() else 0


def _environ(pid: int) -> dict[str, str] | None:
    """The process's environment (None: it is gone); a UsageError where it may not be read."""
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except FileNotFoundError:
        return None
    except PermissionError:
        raise UsageError(f"pid {pid}: its environment may not be read (run collviz as the job's user, or as root)") from None
    except ProcessLookupError:
        return None
    pairs = (entry.decode(errors="replace").partition("=") for entry in raw.split(b"\0") if entry)
    return {name: value for name, _, value in pairs}


def _children() -> dict[int, list[int]]:
    """Every process's children, by parent pid (from each ``/proc/PID/stat``)."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        parent = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    return children


def _rank_of(pid: int, environ: Mapping[str, str]) -> int | None:
    value = environ.get("RANK", "")
    if not value:
        return None
    if not value.isdigit():
        raise UsageError(f"pid {pid}: its RANK is {value!r}, not a rank")
    return int(value)


def _ranks_under(pid: int) -> list[RankProcess]:
    """The nearest descendants of ``pid`` that hold ``RANK``."""
    children = _children()
    found: list[RankProcess] = []
    below = list(children.get(pid, []))
    while below:
        child = below.pop()
        environ = _environ(child)
        if environ is None:
            continue
        rank = _rank_of(child, environ)
        if rank is None:
            below.extend(children.get(child, []))
        else:
            found.append(RankProcess(rank, child, environ))
    return found


def find_ranks(pids: Sequence[int]) -> list[RankProcess]:
    """The ranks ``pids`` name (see the module), in rank order."""
    found: dict[int, RankProcess] = {}
    for pid in pids:
        environ = _environ(pid) if pid > 0 else None
        if environ is None:
            raise UsageError(f"pid {pid}: no such process")
        rank = _rank_of(pid, environ)
        ranks = [RankProcess(rank, pid, environ)] if rank is not None else _ranks_under(pid)
        if not ranks:
            raise UsageError(f"pid {pid}: neither a rank (no RANK in its environment) nor a launcher with ranks "
                             "among its child processes (give torchrun's pid, or the ranks')")
        for process in ranks:
            other = found.get(process.rank)
            if other is not None and other.pid != process.pid:
                raise UsageError(f"pids {other.pid} and {process.pid} are both rank {process.rank} (give one job's pids)")
            found[process.rank] = process
    return [found[rank] for rank in sorted(found)]
