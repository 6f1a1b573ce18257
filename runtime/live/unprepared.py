"""What a job that prepared nothing still offers beyond its stacks, and what would let collviz
see more of it next time (``collviz attach --pid``).

torch writes a rank's Flight Recorder to a file without being asked when its NCCL watchdog
times out a call: ``TORCH_FR_DUMP_TEMP_FILE`` (``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` before torch
2.6) names the prefix, ``/tmp/nccl_trace_rank_`` by default, and the rank's number ends the name.
Such a file, written since the rank started, is the rank's calls up to the timeout: read as
``collviz replay`` reads it, its verdict (who waited where, who called something else) is said. Everything else the job keeps (its recorder's buffer, in memory) is
reached only through torch's worker server, which the job must have opened.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import UsageError
from ..observation.rank_lists import ranks_text
from ..sources.detect import open_artifacts
from ..wire.protocol import RunEnd
from .pids import RankProcess

__all__ = ["DEFAULT_DUMP_PREFIX", "dumps_of", "see_more"]

DEFAULT_DUMP_PREFIX = "/tmp/nccl_trace_rank_"
"""torch's prefix of Flight Recorder dump files where the job's environment names none."""

_PREFIXES = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")


def _started_s(pid: int) -> float:
    """When the process started, in seconds since the epoch (``/proc/PID/stat``'s start time after
    the boot time of ``/proc/stat``); 0 where it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(line for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime "))
    except (OSError, StopIteration):
        return 0.0
    ticks = int(stat[stat.rindex(")") + 2:].split()[19])
    return int(boot.split()[1]) + ticks / os.sysconf("SC_CLK_TCK")


def dumps_of(ranks: Sequence[RankProcess]) -> dict[int, Path]:
    """rank → the Flight Recorder dump torch wrote for it since it started (see the module)."""
    found = {}
    for process in ranks:
        prefix = next((process.environ[name] for name in _PREFIXES if process.environ.get(name)), DEFAULT_DUMP_PREFIX)
        path = Path(f"{prefix}{process.rank}")
        try:
            written = path.stat().st_mtime
        except OSError:
            continue
        if written >= _started_s(process.pid):
            found[process.rank] = path
    return found


def _verdict(paths: Sequence[Path]) -> str:
    """What the dumps at ``paths`` say went wrong (their import's verdict), or why they cannot be read."""
    try:
        run = open_artifacts(paths)
    except UsageError as refused:
        return f"they cannot be read ({refused})"
    end = next((event for event in reversed(run.events) if isinstance(event, RunEnd)), None)
    return f"they say {end.detail}" if end is not None and end.detail else "they hold no hang or mismatch"


def see_more(ranks: Sequence[RankProcess]) -> str:
    """One line: what the job read by pid can show next time (the dumps torch wrote, where it
    did; else what to set before starting it)."""
    dumps = dumps_of(ranks)
    if dumps:
        paths = [dumps[rank] for rank in sorted(dumps)]
        return (f"torch dumped the Flight Recorder of rank{'s' if len(dumps) > 1 else ''} {ranks_text(sorted(dumps))} "
                f"on a timeout: {_verdict(paths)}; collviz replay {' '.join(map(str, paths))} shows every call")
    if any("TORCH_WORKER_SERVER_SOCKET" in process.environ for process in ranks):
        return "the job opens torch's worker servers: collviz attach SOCKETS reads every rank's calls, not only its stack"
    return ("stacks only: start the job with torch's worker server next time (TORCH_WORKER_SERVER_SOCKET="
            "/tmp/job/rank$RANK.sock under worker_main, or start_debug_server()) and collviz attach reads every "
            "rank's Flight Recorder too (its last TORCH_FR_BUFFER_SIZE calls)")
