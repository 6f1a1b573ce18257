"""Hand-made stacks of a 4-rank job read by pid (threads as py-spy gives them, innermost frame
first), and a :class:`~collviz.runtime.live.pid_reader.PidReader` whose readings give them in turn."""

from __future__ import annotations

from collviz.runtime.live.pid_reader import PidReader
from collviz.runtime.live.pids import RankProcess
from collviz.runtime.live.stacks import Frame

__all__ = ["IN_ALL_REDUCE", "IN_BROADCAST", "LOADING", "Stacks", "stack_reader"]

C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
LOGGER = "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py"

Stacks = list[list[Frame]]
"""One process's threads, each innermost frame first."""


def _thread(*frames: tuple[str, int, str]) -> list[Frame]:
    return [Frame(file, line, name) for file, line, name in frames]


IN_ALL_REDUCE: Stacks = [_thread((C10D, 3252, "all_reduce"), (LOGGER, 83, "_exception_logger.<locals>.wrapper"),
                                 ("/home/me/train.py", 30, "step"), ("/home/me/train.py", 50, "<module>"))]
"""In all_reduce, called at train.py:30 in step."""
IN_BROADCAST: Stacks = [_thread((C10D, 2801, "broadcast"), ("/home/me/train.py", 41, "sync"),
                                ("/home/me/train.py", 52, "<module>"))]
"""In broadcast, called at train.py:41 in sync."""
LOADING: Stacks = [_thread(("/usr/lib/python3.11/threading.py", 320, "wait")),
                   _thread(("/home/me/train.py", 12, "load_batch"), ("/home/me/train.py", 49, "<module>"))]
"""In no collective: the script's thread at train.py:12 in load_batch (another thread in threading)."""


def stack_reader(readings: list[dict[int, Stacks]]) -> tuple[PidReader, list[int]]:
    """A reader of ranks 0–3 (pids 100 + rank) whose readings give ``readings`` in turn (rank →
    its threads; the last again once all were given), and the pids it read, in order. The pids
    are not real processes: a test makes ``/proc/PID`` exist (monkeypatching ``Path.exists``)."""
    reads: list[int] = []

    def dump(pid: int, native: bool, timeout_s: float) -> Stacks:
        reads.append(pid)
        return readings[min((len(reads) - 1) // 4, len(readings) - 1)][pid - 100]

    ranks = [RankProcess(rank, 100 + rank, {"RANK": str(rank), "WORLD_SIZE": "4"}) for rank in range(4)]
    return PidReader(ranks, dump=dump), reads
