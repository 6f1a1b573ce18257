"""``collviz attach --pid PID [PID …]``: a job that prepared nothing, read by pid — every rank's
Python stack read with py-spy (:class:`~collviz.runtime.live.pid_reader.PidReader`), through the
same snapshot, watch and viewer as a job's worker servers.

PID is torchrun's (its ranks are its child processes), a rank's, or several ranks'. Headless, one
snapshot: which ranks are inside which collective call, which are outside any and where, and the
ranks the others wait on at the line of their own code; then one line on what the job still
offers (Flight Recorder dumps torch wrote on a timeout) or what would let collviz see more next
time. Exit status 0 when every rank is in step, 1 when some wait on others (or a rank could not
be read), 2 on a usage error (no such process, no ptrace permission).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .options import print_json

if TYPE_CHECKING:
    from collviz.runtime.live.pace import Pace
    from collviz.runtime.live.pid_reader import PidReader
    from collviz.runtime.live.reading import Reader

__all__ = ["Watch", "pid_reader", "print_by_pid"]

Watch = Callable[["Reader", "Pace", "int | None", bool], int]
"""The command's ``--watch``: reader, pace, readings, JSON → exit status."""


def pid_reader(pids: Sequence[int], native: bool, timeout_s: float) -> PidReader:
    """The reader of the ranks ``pids`` name, checked readable (one-line UsageErrors otherwise)."""
    from collviz.runtime.live.pid_reader import PidReader
    from collviz.runtime.live.pids import find_ranks

    reader = PidReader(find_ranks(pids), native=native, timeout_s=timeout_s)
    reader.check()
    return reader


def print_by_pid(reader: PidReader, *, as_json: bool, watch: Watch | None, count: int | None, pace: Pace) -> int:
    """One snapshot (or, given ``watch``, each new one), then the line on what more there is; the
    exit status (see the module). A reader of stacks says no warning: ``--json``'s ``warnings`` is empty."""
    from collviz.runtime.live.snapshot import take_snapshot
    from collviz.runtime.live.unprepared import see_more
    from collviz.runtime.reports.warnings import with_warnings

    ranks = reader.ranks
    if not as_json:
        listed = ", ".join(f"{process.rank}:{process.pid}" for process in ranks)
        print(f"collviz attach: the stacks of {len(ranks)} rank{'s' if len(ranks) > 1 else ''} (rank:pid {listed}), "
              f"read with py-spy{' --native' if reader.native else ''}")
    if watch is not None:
        status = watch(reader, pace, count, as_json)
    else:
        snapshot = take_snapshot(reader, pace.fastest_s)
        print_json(with_warnings(snapshot.document(), [])) if as_json else print(snapshot.text(), flush=True)
        status = snapshot.exit_status
    print(see_more(ranks), file=sys.stderr if as_json else sys.stdout, flush=True)
    return status
