"""What an import's checks say (runtime/sources/call_checks.py) on hand-made 4-rank Flight Recorder
jobs, every sentence written out here from the entries the test wrote.

- ``two_mismatches``: all_reduce #1–#3 of 8 elements on ranks 0–3; at #2 rank 3's is bfloat16
  where the others' are float32, at #3 rank 1 broadcasts where the others all-reduce.
- ``hang``: all_reduce #1–#3 on ranks 0–3, rank 2 stopping after #1 (which it completed), so ranks
  0, 1 and 3 wait in #3 having completed #2.
"""

from __future__ import annotations

import json
from pathlib import Path

from collviz.runtime.sources import open_artifacts
from collviz.runtime.wire.protocol import RunEnd

from support.fr_dumps import dump, entry


def _write(folder: Path, entries_of: dict[int, list[dict]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rank, entries in entries_of.items():
        (folder / f"rank_{rank}.json").write_text(json.dumps(dump(entries)))
    return folder


def _detail(folder: Path) -> str:
    [end] = [e for e in open_artifacts([folder]).events if isinstance(e, RunEnd)]
    return end.detail


def test_two_mismatches_name_the_first_and_count_the_other(tmp_path):
    job = _write(tmp_path / "job", {rank: [
        entry(1, duration_ms=1.0),
        entry(2, dtype="BFloat16" if rank == 3 else "Float", duration_ms=1.0),
        entry(3, "broadcast" if rank == 1 else "all_reduce", duration_ms=1.0),
    ] for rank in range(4)})
    assert _detail(job) == ("collective mismatch at call #2 on group 0 (default_pg): rank 3 called "
                            "all_reduce(bfloat16 ×8), where ranks 0–2 called all_reduce(float32 ×8)"
                            " (and 1 more mismatches)")


def test_a_hang_names_the_culprits_last_call(tmp_path):
    job = _write(tmp_path / "job", {rank: [entry(1, duration_ms=1.0)] if rank == 2 else
                                    [entry(1, duration_ms=1.0), entry(2, duration_ms=1.0), entry(3, done=False)]
                                    for rank in range(4)})
    detail = _detail(job)
    assert "rank 2's last call: all_reduce #1 on group 0 (default_pg), completed" in detail.split("; ")
