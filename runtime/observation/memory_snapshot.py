"""A rank's CUDA memory snapshot for pytorch.org/memory_viz (``--memory-viz DIR``).

torch's CUDA caching allocator can keep a history of every allocation and free with the Python
stack that made it (``torch.cuda.memory._record_memory_history``); its snapshot
(``torch.cuda.memory._dump_snapshot``) is the pickle pytorch.org/memory_viz opens. A rank starts
the history before its scenario and writes the snapshot when the scenario ends, well or not (an
out-of-memory error is when it is wanted most), as ``DIR/rank<r>.pickle``, written whole under
another name first and placed by :func:`~..wire.files.staged_output`'s rule: renamed over a new or
regular file (a reader never opens half a file), written through a device, FIFO or link.

CUDA only, and not yet run by collviz's tests (no GPU here): the plan refuses it on CPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from ..errors import UsageError
from ..wire.files import staged_output

__all__ = ["HISTORY_ENTRIES", "start_memory_history", "write_memory_snapshot", "snapshot_path"]

HISTORY_ENTRIES = 100_000
"""Allocator events the history keeps (the oldest are dropped beyond): a scenario makes a few
thousand; each costs a few KiB of the snapshot with its stack."""


def snapshot_path(folder: Path, rank: int) -> Path:
    """Where rank ``rank``'s snapshot goes."""
    return folder / f"rank{rank}.pickle"


def start_memory_history() -> None:
    """Start recording this process's CUDA allocations and frees, with their Python stacks."""
    torch.cuda.memory._record_memory_history(max_entries=HISTORY_ENTRIES, stacks="python")


def write_memory_snapshot(folder: Path, rank: int) -> None:
    """Write the history so far as ``folder/rank<r>.pickle``; a failure is one line on stderr (the
    rank's log), never the rank's own error."""
    final = snapshot_path(folder, rank)
    try:
        with staged_output(final, "--memory-viz") as partial:
            torch.cuda.memory._dump_snapshot(str(partial))
    except UsageError as exc:
        print(f"collviz: rank {rank}: CUDA memory snapshot not written: {exc}", file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - the snapshot is an extra: the run's outcome stands
        print(f"collviz: rank {rank}: CUDA memory snapshot not written to {final}: {exc}", file=sys.stderr)
