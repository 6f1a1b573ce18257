"""Flight Recorder dumps opened as collviz runs: the calls a job made, a rank that skips one, ranks
that disagree, a coalesced call, and sets of dumps that are partial, inconsistent or damaged.

The dumps are real: the ``job_artifacts`` fixture makes them once per session on 4 gloo ranks (the
jobs of :mod:`support.artifact_jobs`). Every expected call, rank, size and status below is computed
from what those jobs did, never from the importer.
"""

from __future__ import annotations

import gzip
import inspect
import json
from pathlib import Path

import pytest

from collviz.app.model import EventLog, view_at
from collviz.runtime.reports.summary import render_summary
from collviz.runtime.sources import open_artifacts
from collviz.runtime.wire.protocol import Collective, Mismatch, RankEnd, RunEnd, RunStart, Stall

from support import artifact_jobs as jobs
from support.artifact_imports import FLOAT32, WORLD_GROUP, call_begins, only


def _fr_call(op: str) -> tuple[str, int, int]:
    """(op, input elements, output elements) Flight Recorder records for one of the jobs' calls on
    gloo: torch 2.13's gloo runs reduce_scatter_tensor as an all-reduce of the whole input, and its
    Flight Recorder names it so."""
    n, e = jobs.WORLD, jobs.ELEMENTS
    return {"all_reduce": ("all_reduce", e, e), "all_gather": ("all_gather", e, e * n), "broadcast": ("broadcast", e, e),
            "reduce_scatter": ("all_reduce", e, e), "all_to_all": ("all_to_all", e, e)}[op]


@pytest.mark.parametrize("form", ["json", "pickle"])
def test_healthy_dumps_are_the_calls_the_job_made(job_artifacts, form):
    run = open_artifacts([job_artifacts["healthy"] / "fr" / form])
    assert run.exit_status == 0
    expected = [(op, seq, "float32", count, count * FLOAT32, out * FLOAT32)
                for seq, (op, count, out) in enumerate(map(_fr_call, jobs.HEALTHY_CALLS), start=1)]
    begins = call_begins(run.events)
    assert sorted(begins) == list(range(jobs.WORLD))
    for rank, calls in begins.items():
        assert [(c.op, c.group_seq, c.dtype, c.count, c.bytes_in, c.bytes_out) for c in calls] == expected, rank
        assert {(c.group, tuple(c.group_ranks)) for c in calls} == {(WORLD_GROUP, tuple(range(jobs.WORLD)))}
    assert not only(run.events, Stall) and not only(run.events, Mismatch)
    assert only(run.events, RunEnd)[0].status == "ok"
    assert sorted(e.rank for e in only(run.events, RankEnd)) == list(range(jobs.WORLD))
    start = only(run.events, RunStart)[0]
    assert start.phase_count == len(jobs.HEALTHY_CALLS) and start.world_size == jobs.WORLD
    assert "no values or provenance" in start.backend_reason
    # gloo's dumps key the default group '' in pg_config, '0' in their entries: read, and said
    assert any("keyed ''" in w for w in run.warnings)


@pytest.mark.parametrize("form", ["json", "pickle"])
def test_a_rank_that_skips_a_call_is_named_with_its_last_call(job_artifacts, form):
    run = open_artifacts([job_artifacts["hang"] / "fr" / form])
    assert run.exit_status == 1
    [stall] = only(run.events, Stall)
    waiting = sorted(set(range(jobs.WORLD)) - {jobs.SKIPPER})
    assert (stall.op, stall.group, stall.group_seq, stall.waiting) == ("all_reduce", WORLD_GROUP, len(jobs.HANG_CALLS) + 1,
                                                                       waiting)
    assert stall.elsewhere == [f"rank {jobs.SKIPPER} never arrived (last seen in phase "
                               f"{len(jobs.HANG_CALLS)} 'all_gather #{len(jobs.HANG_CALLS)} on group {WORLD_GROUP}')"]
    [end] = only(run.events, RunEnd)
    assert end.status == "failed" and end.detail.startswith(f"hang caused by rank {jobs.SKIPPER}: ")
    assert f"rank {jobs.SKIPPER}'s last call: all_gather #{len(jobs.HANG_CALLS)} on group {WORLD_GROUP}, completed" in end.detail
    assert not only(run.events, RankEnd)  # every rank was still running when the dumps were taken
    # the pair's own group: its members are not in gloo's pg_config, so they come from the dumps
    pair = [c for calls in call_begins(run.events).values() for c in calls if c.group == "1"]
    assert sorted(c.rank for c in pair) == list(jobs.SUBGROUP) and {tuple(c.group_ranks) for c in pair} == {jobs.SUBGROUP}
    assert any("taken as the ranks whose dumps mention it: 0, 1" in w for w in run.warnings)


def test_a_pickled_dump_names_the_line_of_the_users_code(job_artifacts):
    run = open_artifacts([job_artifacts["hang"] / "fr" / "pickle"])
    source, first = inspect.getsourcelines(jobs._call)
    line = first + next(i for i, text in enumerate(source) if "dist.all_gather_into_tensor(" in text)
    assert f"called at artifact_jobs.py:{line} in _call" in only(run.events, RunEnd)[0].detail


def test_ranks_that_disagree_on_a_call_are_named(job_artifacts):
    run = open_artifacts([job_artifacts["mismatch"] / "fr" / "json"])
    assert run.exit_status == 1
    size, op = only(run.events, Mismatch)
    assert (size.group_seq, size.odd_ranks) == (2, [jobs.BIG_RANK])
    assert size.calls[jobs.BIG_RANK] == f"broadcast(float32 ×{2 * jobs.ELEMENTS})"
    assert {size.calls[r] for r in range(jobs.WORLD) if r != jobs.BIG_RANK} == {f"broadcast(float32 ×{jobs.ELEMENTS})"}
    assert (op.group_seq, op.odd_ranks) == (3, [jobs.ODD_RANK])
    assert op.calls[jobs.ODD_RANK].startswith("broadcast(") and op.calls[0].startswith("all_reduce(")
    [stall] = only(run.events, Stall)
    assert stall.elsewhere == [f"rank {jobs.ODD_RANK} is in broadcast #3"]
    assert only(run.events, RunEnd)[0].detail.startswith("collective mismatch at call #2 on group 0 (default_pg)")


def test_a_call_every_other_rank_completed_is_no_hang(job_artifacts, tmp_path):
    """gloo retires a call a moment after it returns: a dump taken in that moment shows it open."""
    for source in sorted((job_artifacts["healthy"] / "fr" / "json").iterdir()):
        content = json.loads(source.read_text())
        if source.name == "rank_2.json":
            content["entries"][-1]["retired"] = False
        (tmp_path / source.name).write_text(json.dumps(content))
    run = open_artifacts([tmp_path])
    assert run.exit_status == 0 and not only(run.events, Stall)
    assert any("rank 2 had not yet recorded it completed: not a hang" in w for w in run.warnings)


def test_inconsistent_dumps_open_with_warnings(job_artifacts, tmp_path):
    """Ranks whose configs disagree, a malformed entry, a damaged file among good ones, a rank with
    no dump, a gzipped dump: each read as far as it goes, and said."""
    source = job_artifacts["healthy"] / "fr" / "json"
    zero, one, two = (json.loads((source / f"rank_{r}.json").read_text()) for r in range(3))
    zero["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}}
    one["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}
    del one["entries"][1]["collective_seq_id"]
    (tmp_path / "rank_0.json").write_text(json.dumps(zero))
    (tmp_path / "rank_1.json").write_text(json.dumps(one))
    (tmp_path / "rank_2.json.gz").write_bytes(gzip.compress(json.dumps(two).encode()))
    (tmp_path / "rank_3.json").write_text('{"entries": [')
    run = open_artifacts([tmp_path])
    text = "\n".join(run.warnings)
    assert "rank_3.json: damaged JSON" in text
    assert "the dumps disagree on its ranks" in text
    assert "rank 1: 1 entries left out as damaged (a field missing, malformed or impossible): collective_seq_id (1)" in text
    assert "rank 1: 1 calls missing inside its dump's sequence" in text
    assert "no dump of rank 3" in text
    begins = call_begins(run.events)
    assert sorted(begins) == [0, 1, 2] and len(begins[1]) == len(jobs.HEALTHY_CALLS) - 1
    assert run.exit_status == 0  # every call recorded completed: nothing hangs, nothing disagrees


def _hang_set(job_artifacts, tmp_path: Path, ranks, edit=None) -> Path:
    """The hang job's JSON dumps of ``ranks`` only, each with the default group's members in its
    pg_config as an NCCL dump has them (gloo fills them in lazily), passed through ``edit``."""
    folder = tmp_path / "set"
    folder.mkdir()
    for rank in ranks:
        content = json.loads((job_artifacts["hang"] / "fr" / "json" / f"rank_{rank}.json").read_text())
        content["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(jobs.WORLD)))}}
        if edit is not None:
            edit(rank, content)
        (folder / f"rank_{rank}.json").write_text(json.dumps(content))
    return folder


def test_a_partial_set_blames_only_ranks_whose_dumps_show_it(job_artifacts, tmp_path):
    """The skipper's dump and one waiter's: the skipper is the cause; the two ranks without a dump
    are unknown (never a cause, never "not started"), and the verdict says how many are missing."""
    waiter = 1
    run = open_artifacts([_hang_set(job_artifacts, tmp_path, [waiter, jobs.SKIPPER])])
    assert run.exit_status == 1
    absent = sorted(set(range(jobs.WORLD)) - {waiter, jobs.SKIPPER})
    [end] = only(run.events, RunEnd)
    assert end.detail.startswith(f"hang caused by rank {jobs.SKIPPER}: "), end.detail
    assert end.detail.endswith(f"(2 of {jobs.WORLD} ranks unknown: ranks {absent[0]}, {absent[1]}, no dump of this rank)")
    [stall] = only(run.events, Stall)
    assert stall.waiting == [waiter] and f"rank {absent[0]}: no dump of this rank" in stall.elsewhere
    final = view_at(EventLog(run.events), len(run.events))
    status = {view.rank: view.status for view in final.ranks}
    assert [status[r] for r in absent] == ["unknown: no dump of this rank"] * 2
    assert all("not started" not in text for text in status.values())
    summary = render_summary(run.events)
    assert "imported from artifacts" in summary and "mode live" not in summary


def test_a_set_of_waiters_only_names_no_cause(job_artifacts, tmp_path):
    """Every dump present waits in the call: the one rank that did not is among those without a dump."""
    waiters = [r for r in range(jobs.WORLD) if r != jobs.SKIPPER]
    run = open_artifacts([_hang_set(job_artifacts, tmp_path, waiters)])
    [end] = only(run.events, RunEnd)
    assert end.detail.startswith("hang, its cause unknown"), end.detail
    assert end.detail.endswith(f"(1 of {jobs.WORLD} ranks unknown: rank {jobs.SKIPPER}, no dump of this rank)")


def test_holes_damaged_values_and_older_names_in_dumps(job_artifacts, tmp_path):
    """Rank 0 lost its call #2; rank 1 holds an impossible size and an impossible duration; rank 3's
    dump uses format 1.x's names (seq_id, no time_created_ns nor input_dtypes)."""
    def edit(rank, content):
        entries = content["entries"]
        if rank == 0:
            content["entries"] = [e for e in entries if e["collective_seq_id"] != 2]
        if rank == 1:
            entries[0]["duration_ms"] = -3.5
            entries[-1]["input_sizes"] = [[10**30]]
        if rank == 3:
            content["version"] = "1.5"
            for entry in entries:
                entry["seq_id"] = entry.pop("collective_seq_id")
                del entry["time_created_ns"], entry["input_dtypes"]

    run = open_artifacts([_hang_set(job_artifacts, tmp_path, range(jobs.WORLD), edit)])
    text = "\n".join(run.warnings)
    assert "rank 0: 1 calls missing inside its dump's sequence on group 0 (default_pg) (#2)" in text
    assert "rank 1: 1 entries left out as damaged (a field missing, malformed or impossible): input_sizes (1)" in text
    assert "rank 1: 1 entries hold an impossible duration" in text
    assert "rank 3 (rank_3.json): Flight Recorder format 1.5" in text
    begins = call_begins(run.events)
    calls = len(jobs.HANG_CALLS) + 1  # rank 3 waits in the last
    assert [(c.group_seq, c.dtype) for c in begins[3] if c.group == WORLD_GROUP] == [(n, "unknown") for n in range(1, calls + 1)]
    assert all(c.duration_ns is None for c in only(run.events, Collective))


def test_a_coalesced_call_is_one_call_with_its_sizes_summed(job_artifacts, tmp_path):
    """Format 2.7 on: a coalesced call's tensors share one sequence number, then a 'coalesced' entry.
    Each rank's all_reduce #1 gets a second tensor of 4 floats and the closing entry: one call of
    ELEMENTS + 4 floats."""
    for rank in range(jobs.WORLD):
        content = json.loads((job_artifacts["healthy"] / "fr" / "json" / f"rank_{rank}.json").read_text())
        first = content["entries"][0]
        extra = dict(first, input_sizes=[[4]], output_sizes=[[4]])
        closing = dict(first, profiling_name="gloo:coalesced", input_sizes=[], output_sizes=[])
        content["entries"][1:1] = [extra, closing]
        (tmp_path / f"rank_{rank}.json").write_text(json.dumps(content))
    run = open_artifacts([tmp_path])
    firsts = [calls[0] for calls in call_begins(run.events).values()]
    total = jobs.ELEMENTS + 4
    assert {(c.op, c.group_seq, c.count, c.bytes_in) for c in firsts} == {("all_reduce", 1, total, total * FLOAT32)}
    assert "rank 0: 2 entries are further tensors of coalesced calls: each coalesced call is shown as one, its sizes " \
           "summed" in run.warnings
    assert not any("repeat a call number" in w for w in run.warnings) and run.exit_status == 0
