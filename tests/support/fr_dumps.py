"""Flight Recorder dumps written by hand, in the shape torch 2.10's ``_dump_fr_trace`` gives them,
for tests that must know every call a dump holds (the real jobs' dumps are in :mod:`.artifact_jobs`).

Nothing here imports collviz. :func:`entry` is one entry as torch writes it; :func:`dump` a rank's
whole dump; :func:`hang_and_mismatch` a 4-rank job's set whose calls are written out in its docstring.
"""

from __future__ import annotations

import json
from pathlib import Path

WORLD = 4
T0 = 1_795_642_665_952_896_896
"""A real dump's first ``time_created_ns``."""


def entry(seq: int, op: str = "all_reduce", *, sizes: list | None = None, out: list | None = None,
          dtype: str = "Float", done: bool = True, group: tuple = ("0", "default_pg"), **more: object) -> dict:
    """One entry: call ``seq`` of ``op`` on ``group`` (8 elements in and out unless ``sizes``/``out``
    say), issued ``seq`` ms after :data:`T0`, retired when ``done``; ``more`` adds or replaces fields."""
    sizes = [[8]] if sizes is None else sizes
    made = {
        "record_id": seq, "pg_id": 0, "process_group": group, "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
        "profiling_name": f"nccl:{op}", "time_created_ns": T0 + seq * 1_000_000, "input_sizes": sizes,
        "input_dtypes": [dtype] * len(sizes), "output_sizes": sizes if out is None else out,
        "output_dtypes": [dtype] * len(sizes if out is None else out), "state": "completed" if done else "started",
        "time_discovered_started_ns": None, "time_discovered_completed_ns": None, "retired": done,
        "timeout_ms": 600_000, "is_p2p": False,
    }
    made.update(more)
    return made


def dump(entries: list, ranks: int = WORLD) -> dict:
    """A rank's dump holding ``entries``, its default group of ``ranks`` ranks."""
    return {"version": "2.10", "comm_lib_version": "2.21.5",
            "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(ranks)))}},
            "pg_status": {"0": {"last_enqueued_collective": len(entries), "last_started_collective": -1,
                                "last_completed_collective": len(entries)}},
            "entries": entries}


def hang_and_mismatch(folder: Path) -> Path:
    """A 4-rank job's JSON dumps in ``folder`` (``rank_<r>.json``): all_reduce calls #1–#6 of 8
    float32, each taking 2 ms; at #3 rank 3 broadcasts where the others all-reduce (all complete);
    rank 2 stops after #5, so ranks 0, 1 and 3 wait in #6 (not completed, no duration)."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(WORLD):
        entries = []
        for seq in range(1, 7 if rank != 2 else 6):
            op = "broadcast" if seq == 3 and rank == 3 else "all_reduce"
            done = seq < 6
            entries.append(entry(seq, op, done=done, **({"duration_ms": 2.0} if done else {})))
        (folder / f"rank_{rank}.json").write_text(json.dumps(dump(entries)))
    return folder
