"""A hand-made 4-rank Flight Recorder job with a subgroup not holding rank 0, ranks whose times
differ, and a rank whose dump was truncated; and single dumps whose fields torch writes in less
common ways. Every expected value is counted by hand from the entries written here.

The job (:func:`_job`), call by call, on each rank r (durations in ms):

=====================  ==================  =====================================
call                   ranks               what the entries say
=====================  ==================  =====================================
all_reduce #1 (world)  0, 1, 3             8 float32; r + 1 ms; rank 2's entry overwritten
all_reduce #2 (world)  0–3                 8 float32; r + 1 ms
all_gather #1 (sub)    1, 3                8 → 16 float32; 2 ms on rank 1, 4 ms on rank 3; rank 1
                                           issues it at T0 + 10 ms, rank 3 at T0 + 11 ms
all_reduce #3 (world)  0–3                 8 float32; 1 ms each
=====================  ==================  =====================================
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collviz.runtime.sources import flight_recorder, open_artifacts
from collviz.runtime.sources.flight_recorder import read_content
from collviz.runtime.wire.protocol import Collective, RunStart

from support.fr_dumps import T0, dump, entry

SUB = ("1", "sub")
MS = 1_000_000


def _job(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(4):
        entries = [entry(seq, duration_ms=float(rank + 1)) for seq in (1, 2) if not (rank == 2 and seq == 1)]
        if rank in (1, 3):
            entries.append(entry(1, "all_gather", group=SUB, sizes=[[8]], out=[[16]],
                                 duration_ms=2.0 if rank == 1 else 4.0,
                                 time_created_ns=T0 + (10 if rank == 1 else 11) * MS))
        entries.append(entry(3, duration_ms=1.0, time_created_ns=T0 + 20 * MS))
        for number, made in enumerate(entries):
            made["record_id"] = number
        content = dump(entries)
        content["pg_config"]["1"] = {"name": "1", "desc": "sub", "ranks": "[1, 3]"}
        (folder / f"rank_{rank}.json").write_text(json.dumps(content))
    return folder


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _job(tmp_path_factory.mktemp("fr-values") / "job")


def test_a_truncated_rank_is_warned_of_and_the_job_has_four_ranks(job):
    run = open_artifacts([job])
    # rank 2's first world call is #2, the others' #1: one call later, so its buffer overflowed
    assert run.warnings == [
        "rank 2's dump starts at call #2 on group 0 (default_pg), after calls other ranks recorded (its older "
        "entries were overwritten; a larger TORCH_FR_BUFFER_SIZE keeps more)"]
    [start] = [e for e in run.events if isinstance(e, RunStart)]
    assert start.world_size == 4  # pg_config's highest rank is 3


def test_a_subgroups_all_gather_has_its_own_sizes(job):
    run = open_artifacts([job])
    ends = sorted((e.rank, e.group_ranks, e.bytes_in, e.bytes_out, e.algo_bytes) for e in run.events
                  if isinstance(e, Collective) and e.op == "all_gather" and e.edge == "end")
    # 8 float32 in = 32 B, 16 out = 64 B; S = input × the group's 2 ranks = 64 B
    assert ends == [(1, [1, 3], 32, 64, 64), (3, [1, 3], 32, 64, 64)]


def test_a_large_imports_json_gives_the_subgroups_figures(job, monkeypatch):
    monkeypatch.setattr(flight_recorder, "EVENTS_UP_TO", 4)  # the job has 13 calls: read as a table
    document = open_artifacts([job]).summary.document()
    # each step's slowest rank: rank 3 at 4 ms in #1 and #2 (r + 1 ms), rank 3 at 4 ms in the all_gather, 1 ms in #3
    assert [phase["slowest_seconds"] for phase in document["phases"]] == [0.004, 0.004, 0.004, 0.001]
    [gather] = [call for call in document["calls"] if call["op"] == "all_gather"]
    # S = 32 B × 2 ranks = 64 B over the slowest 4 ms: algbw 16,000 B/s; busbw × (n−1)/n = 1/2: 8,000 B/s
    assert (gather["algo_bytes"], gather["slowest_seconds"]) == (64, 0.004)
    assert gather["algbw"] == pytest.approx(16_000) and gather["busbw"] == pytest.approx(8_000)


def test_entries_listed_out_of_order_are_read_in_record_order():
    read = read_content(dump([entry(2, record_id=2), entry(1, record_id=1), entry(3, record_id=3)]))
    assert read.seq.tolist() == [1, 2, 3]
    assert read.notes == ["its entries are not listed in the order of their record_id: read in that order"]


def test_a_calls_type_is_its_first_inputs():
    read = read_content(dump([entry(1, sizes=[[4], [4]], input_dtypes=["Float", "BFloat16"])]))
    assert [read.dtypes[d] for d in read.dtype] == ["float32"]


def test_a_null_comm_lib_version_is_no_version():
    content = dump([entry(1)])
    content["comm_lib_version"] = None
    assert read_content(content).comm_lib_version == ""


def test_a_running_calls_deadline_is_its_start_plus_its_timeout_ms():
    """Created at T0 + 1 ms, started at T0 + 5 ms, timeout_ms 600,000 (600 s): its deadline is
    T0 + 5 ms + 600 s, counted from its start, not its creation."""
    read = read_content(dump([entry(1, done=False, time_discovered_started_ns=T0 + 5 * MS, timeout_ms=600_000)]))
    assert read.deadlines == {0: T0 + 5 * MS + 600 * 10**9}
