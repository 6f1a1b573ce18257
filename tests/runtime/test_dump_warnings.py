"""Warnings of a job's Flight Recorder dumps and of a gloo profiler trace, each made to appear by one
change to a 4-rank job written by hand (:mod:`support.fr_dumps`, :mod:`support.profiler_shapes`) and
absent where its reason is not there. Every sentence is written from the change made.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from collviz.runtime.sources import open_artifacts

from support.fr_dumps import dump, entry, hang_and_mismatch

INSIDE_EVERYWHERE = ("all_reduce #2 on group 0 (default_pg): ranks 0–3 still inside it, and no rank of the artifacts "
                     "completed it: stuck there or taken mid-call (the job's other ranks, if it had more, would say)")


def _dumps(folder: Path, second_done: bool) -> Path:
    """Every rank of 4 completed all_reduce #1 and entered #2, completed or not by all."""
    folder.mkdir()
    for rank in range(4):
        (folder / f"rank_{rank}.json").write_text(json.dumps(dump([entry(1), entry(2, done=second_done)])))
    return folder


def test_a_call_every_rank_is_inside_and_none_completed_is_said(tmp_path):
    run = open_artifacts([_dumps(tmp_path / "inside", second_done=False)])
    assert (run.exit_status, run.warnings) == (0, [INSIDE_EVERYWHERE])


def test_a_completed_call_or_a_hang_is_no_call_stuck_everywhere(tmp_path):
    """Completed by all: nothing to say. Rank 2 missing from #6 (hang_and_mismatch): a hang, named as
    one (exit 1), not ranks stuck in a call nobody left."""
    assert open_artifacts([_dumps(tmp_path / "done", second_done=True)]).warnings == []
    hang = open_artifacts([hang_and_mismatch(tmp_path / "hang")])
    assert (hang.exit_status, hang.warnings) == (1, [])


def test_a_ranks_second_dump_is_left_out(tmp_path):
    folder = hang_and_mismatch(tmp_path / "job")
    shutil.copy(folder / "rank_0.json", folder / "rank_0.json.bak")
    assert open_artifacts([folder]).warnings == [
        "rank 0 has two dumps (rank_0.json, rank_0.json.bak): rank_0.json.bak left out"]


def _gloo_trace(rank: int, groups: list[dict]) -> dict:
    """A gloo rank's trace of one all_reduce of 8 float32: the dispatcher's ``c10d::allreduce_``
    (with its shapes) and gloo's work slice of 30 µs; ``groups``: its ``pg_config``."""
    return {"distributedInfo": {"backend": "gloo", "rank": rank, "world_size": 4, "pg_config": groups},
            "traceEvents": [
                {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "ts": 100.0, "dur": 5.0, "pid": 1, "tid": 1,
                 "args": {"Input Dims": [[[8]]], "Input type": ["TensorList"]}},
                {"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "ts": 104.0, "dur": 30.0, "pid": 1, "tid": 9,
                 "args": {"Input Dims": [[8]], "Input type": ["float"]}}]}


WORLD_CONFIG = {"pg_name": "0", "pg_desc": "default_pg", "ranks": [0, 1, 2, 3]}


def test_a_gloo_rank_in_several_groups_has_its_calls_shown_on_the_default_group(tmp_path):
    """gloo's c10d slices name no group: ranks 0 and 1, also in pair ``1`` (tp_a), are warned of."""
    for rank in range(4):
        pair = [{"pg_name": "1", "pg_desc": "tp_a", "ranks": [0, 1]}] if rank < 2 else []
        (tmp_path / f"trace_{rank}.json").write_text(json.dumps(_gloo_trace(rank, [WORLD_CONFIG, *pair])))
    assert open_artifacts([tmp_path]).warnings == [
        f"rank {rank} belongs to groups 0 (default_pg), 1 (tp_a) and its c10d slices do not name theirs (gloo "
        "records no record_param_comms): its calls are shown on group 0 (default_pg), and calls are not compared "
        "across ranks" for rank in (0, 1)]


def test_gloo_ranks_of_the_default_group_alone_are_not_warned_of(tmp_path):
    for rank in range(4):
        (tmp_path / f"trace_{rank}.json").write_text(json.dumps(_gloo_trace(rank, [WORLD_CONFIG])))
    assert open_artifacts([tmp_path]).warnings == []
