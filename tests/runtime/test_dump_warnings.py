"""Warnings of a job's Flight Recorder dumps, a gloo profiler trace and an Inspector folder, each made
to appear by one change to a job written by hand (:mod:`support.fr_dumps`, :mod:`support.inspector_lines`,
4 and 3 ranks) and absent where its reason is not there. Every sentence is written from the change made.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from collviz.runtime.reports.summary_json import summary_document
from collviz.runtime.sources import open_artifacts

from support.fr_dumps import dump, entry, hang_and_mismatch
from support.inspector_lines import AR0, record_line

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


def _inspector(folder: Path, with_all_to_all: bool) -> list[str]:
    """The warnings of a 3-rank Inspector folder (:mod:`support.inspector_lines`): each process's
    all-reduce record, and ranks 0 and 1's AlltoAll (NCCL 2.28's) when asked."""
    folder.mkdir()
    for rank in range(3):
        extra = record_line(rank, "AlltoAll", 1, 4096, 10, 3, 0.4, 0.4) if with_all_to_all and rank < 2 else ""
        (folder / f"node0-pid{100 + rank}.log").write_text(AR0[rank] + extra)
    return open_artifacts([folder]).warnings


def test_inspector_calls_of_an_operation_collviz_does_not_draw_are_counted(tmp_path):
    assert _inspector(tmp_path / "a2a", with_all_to_all=True) == [
        "calls of operations collviz does not draw left out: all_to_all ×2"]
    assert _inspector(tmp_path / "plain", with_all_to_all=False) == []


def test_subfolders_beside_the_dumps_are_named_and_not_opened(tmp_path):
    """One subfolder is named whole; of five, the first three (by name) and an ellipsis."""
    folder = hang_and_mismatch(tmp_path / "job")
    assert open_artifacts([folder]).warnings == []
    (folder / "old").mkdir()
    assert open_artifacts([folder]).warnings == [f"{folder}: 1 subfolder not opened (old)"]
    for name in ("a", "b", "c", "d"):
        (folder / name).mkdir()
    assert open_artifacts([folder]).warnings == [f"{folder}: 5 subfolders not opened (a, b, c…)"]


def _pair_record(rank: int) -> str:
    """Rank ``rank``'s all-reduce record on a 2-rank communicator ``0xabc``."""
    record = json.loads(record_line(rank, "AllReduce", 0, 4096, 10, 3, 0.4, 0.4, n_ranks=2))
    record["header"]["id"] = "0xabc"
    return json.dumps(record) + "\n"


def test_a_communicator_whose_ranks_share_one_process_cannot_be_placed(tmp_path):
    """Process 100 writes both ranks of ``0xabc`` (one process driving two GPUs): neither is placed."""
    folder = tmp_path / "insp"
    folder.mkdir()
    for rank in range(3):
        (folder / f"node0-pid{100 + rank}.log").write_text(AR0[rank] + (_pair_record(0) + _pair_record(1) if rank == 0
                                                                         else ""))
    assert open_artifacts([folder]).warnings == [
        "communicator 0xabc: 0 of its 2 ranks can be placed in the job (a process with no record of the largest "
        "communicator, or one driving several GPUs): its calls are not shown"]


def test_a_communicator_of_two_processes_of_the_job_is_placed_without_a_warning(tmp_path):
    """Processes 101 and 102 (job ranks 1, 2: no rank 0) hold 0xabc's ranks 0 and 1. busbw by hand:
    4,096 B / 10 µs = 409.6 MB/s × 2(2−1)/2 = 1 → 409.6 MB/s; the world's 1 MiB / 100 µs =
    10,485.76 MB/s × 2·2/3 → 13,981.01 MB/s."""
    folder = tmp_path / "insp"
    folder.mkdir()
    for rank in range(3):
        (folder / f"node0-pid{100 + rank}.log").write_text(AR0[rank] + (_pair_record(rank - 1) if rank else ""))
    run = open_artifacts([folder])
    assert run.warnings == []
    found = {tuple(c["group_ranks"]): (c["algo_bytes"], c["busbw"]) for c in summary_document(run.events)["calls"]}
    assert found == {(0, 1, 2): (1_048_576, pytest.approx(13_981_013_333.3)), (1, 2): (4_096, pytest.approx(409_600_000))}
