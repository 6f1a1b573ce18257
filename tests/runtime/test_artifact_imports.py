"""What every import shares, whatever its source (Flight Recorder dumps, profiler traces, an NCCL
log): the summary, export and viewer model take each; hostile or garbled input is one clear line;
calls are numbered from one; progress is told stage by stage; the command line opens them; and the
importers' shared pieces (step order, rank lists, op and type names).

The dumps and traces are real (the ``job_artifacts`` fixture: 4 gloo ranks, :mod:`support.artifact_jobs`).
"""

from __future__ import annotations

import json
import os
import pickle
import random
from collections import defaultdict
from pathlib import Path

import pytest

from collviz.app.model import EventLog, view_at
from collviz.runtime.errors import UsageError
from collviz.runtime.reports.export import write_perfetto
from collviz.runtime.reports.summary import render_summary
from collviz.runtime.sources import open_artifacts
from collviz.runtime.sources.names import dtype_name, op_name
from collviz.runtime.sources.run import order_steps

from support import artifact_jobs as jobs
from support.artifact_imports import NCCL_LOG, call_begins, gpu_trace
from support.garble import garbled
from support.traces import check_trace_events


def _imports(job_artifacts) -> dict[str, object]:
    return {"healthy": open_artifacts([job_artifacts["healthy"] / "fr" / "json"]),
            "hang": open_artifacts([job_artifacts["hang"] / "fr" / "pickle"]),
            "mismatch": open_artifacts([job_artifacts["mismatch"] / "fr" / "json"]),
            "profile": open_artifacts([job_artifacts["healthy"] / "profile"]),
            "nccl": open_artifacts([NCCL_LOG])}


def test_summary_export_and_viewer_model_take_every_import(job_artifacts, tmp_path):
    for name, run in _imports(job_artifacts).items():
        summary = render_summary(run.events)
        assert ("result: ok" if run.exit_status == 0 else "result: failed") in summary, name
        path = tmp_path / f"{name}.json"
        write_perfetto(run.events, path)
        assert check_trace_events(json.loads(path.read_text())) == [], name
        log = EventLog(run.events)
        assert log.exit_code() == run.exit_status
        seqs = defaultdict(list)
        for event in run.events:
            seqs[event.rank].append(event.seq)
        assert all(s == list(range(len(s))) for s in seqs.values()), name  # gap-free per emitter
        steps = [view_at(log, cursor).step for cursor in log.boundaries()]
        assert steps == sorted(steps) and steps[-1] == log.phase_count - 1, name
        final = view_at(log, len(log))
        assert final.state.kind == ("finished" if run.exit_status == 0 else "failed"), name
    assert "not timed: a Flight Recorder dump records durations only with timing on" in render_summary(
        _imports(job_artifacts)["healthy"].events)


def _pickle_with_reduce(marker: Path) -> bytes:
    class Sneaky:
        def __reduce__(self):
            return (Path.touch, (marker,))
    return pickle.dumps({"version": "2.10", "entries": [Sneaky()], "pg_config": {}})


def _hostile(tmp_path: Path, job_artifacts) -> dict[str, tuple[list[Path], str]]:
    """Name → (paths to open, what the one-line error says)."""
    real_pickle = (job_artifacts["healthy"] / "fr" / "pickle" / "nccl_trace_rank_0").read_bytes()
    files = {
        "damaged.json": (b'{"version": "2.10", "entries": [', "damaged JSON"),
        "nccl_trace_rank_0": (real_pickle[: len(real_pickle) // 2], "damaged or truncated pickle"),
        "global.pkl": (pickle.dumps(__import__("collections").OrderedDict(a=1)), "refers to collections.OrderedDict"),
        "set.pkl": (pickle.dumps({"entries": {1, 2}}), "holds a set"),
        "reduce.pkl": (_pickle_with_reduce(tmp_path / "pwned"), "refers to pathlib"),
        "foreign.json": (b'{"hello": 1}', "neither a Flight Recorder dump, a torch.profiler trace nor NCCL Inspector output"),
        "perfetto.json": (b'{"traceEvents": []}', "without torch.profiler's distributedInfo"),
        "junk.bin": (bytes(range(256)) * 4, "neither JSON, a pickle nor text"),
        "notes.txt": (b"hello\nworld\n", "text without NCCL INFO lines"),
        "deep.json": (b"[" * 100_000 + b"]" * 100_000, "not readable JSON"),
        "broken.json.gz": (b"\x1f\x8b\x08\x00garbage", "damaged gzip"),
    }
    cases = {}
    for name, (data, needle) in files.items():
        (tmp_path / name).write_bytes(data)
        cases[name] = ([tmp_path / name], needle)
    empty = tmp_path / "empty"
    empty.mkdir()
    cases["empty folder"] = ([empty], "an empty folder")
    cases["missing"] = ([tmp_path / "nowhere"], "no such file or folder")
    (tmp_path / "dump.json").write_bytes((job_artifacts["healthy"] / "fr" / "json" / "rank_0.json").read_bytes())
    cases["no rank in the name"] = ([tmp_path / "dump.json"], "cannot tell which rank wrote this dump")
    real_json = (job_artifacts["healthy"] / "fr" / "json" / "rank_0.json").read_bytes()
    (tmp_path / "prefixed_0.json").write_bytes(b"[rank0]:" + real_json)
    cases["a launcher's prefix before a dump"] = ([tmp_path / "prefixed_0.json"], "damaged JSON")
    (tmp_path / "huge_0.json").write_bytes(real_json)
    os.truncate(tmp_path / "huge_0.json", 300 * 1024 * 1024)  # sparse: past the bounded read
    cases["huge"] = ([tmp_path / "huge_0.json"], "more than")
    huge = tmp_path / f"rank_{'9' * 40}.json"
    huge.write_bytes((job_artifacts["healthy"] / "fr" / "json" / "rank_0.json").read_bytes())
    cases["a rank beyond any job"] = ([huge], "more than any job has")
    cases["two kinds"] = ([job_artifacts["healthy"] / "fr" / "json" / "rank_0.json", job_artifacts["healthy"] / "profile" / "trace_0.json"],
                          "open one kind at a time")
    content = json.loads((job_artifacts["healthy"] / "fr" / "json" / "rank_0.json").read_text())
    content["entries"] = []
    (tmp_path / "fr_0.json").write_text(json.dumps(content))
    cases["no entries"] = ([tmp_path / "fr_0.json"], "is TORCH_FR_BUFFER_SIZE set")
    return cases


def test_hostile_input_is_one_clear_line(job_artifacts, tmp_path):
    for name, (paths, needle) in _hostile(tmp_path, job_artifacts).items():
        with pytest.raises(UsageError) as refused:
            open_artifacts(paths)
        message = str(refused.value)
        assert needle in message and "\n" not in message, (name, message)
    assert not (tmp_path / "pwned").exists()  # the pickle's reducer was never called


@pytest.mark.parametrize("source", ["hang/fr/json", "mismatch/fr/json", "healthy/profile", "gpu"])
def test_garbled_dumps_and_traces_open_or_get_one_line(job_artifacts, tmp_path, source):
    """Real dumps and traces (and the documented GPU trace) with fields replaced by wrong kinds and
    impossible sizes, 20 ways each: each set opens (with warnings) or is refused in one line, never
    a traceback."""
    if source == "gpu":
        documents = {f"gpu_{rank}.json": gpu_trace(rank) for rank in range(2)}
    else:
        folder = job_artifacts[source.split("/")[0]].joinpath(*source.split("/")[1:])
        documents = {path.name: json.loads(path.read_text()) for path in sorted(folder.iterdir())}
    for seed in range(20):
        rng = random.Random(seed)
        target = tmp_path / str(seed)
        target.mkdir()
        for name, document in documents.items():
            (target / name).write_text(json.dumps(garbled(document, rng, 0.05 + seed / 100)))
        try:
            open_artifacts([target])
        except UsageError as refused:
            assert "\n" not in str(refused), (seed, str(refused))


def test_every_source_numbers_calls_from_one(job_artifacts):
    """The healthy job's dumps and its profiler traces number the same calls the same way: #1 first."""
    numbers = {}
    for source in ("fr/json", "profile"):
        begins = call_begins(open_artifacts([job_artifacts["healthy"] / source]).events)
        numbers[source] = {rank: [c.group_seq for c in calls] for rank, calls in begins.items()}
    expected = list(range(1, len(jobs.HEALTHY_CALLS) + 1))
    assert numbers["fr/json"] == numbers["profile"] == {rank: expected for rank in range(jobs.WORLD)}


def test_an_import_tells_its_progress_stage_by_stage(job_artifacts):
    """Four dumps: each file read, each rank's calls read, then each of the healthy job's steps."""
    told: list[tuple[str, int, int]] = []
    open_artifacts([job_artifacts["healthy"] / "fr" / "json"], lambda stage, done, total: told.append((stage, done, total)))
    steps = len(jobs.HEALTHY_CALLS)
    assert told == ([("reading files", n, jobs.WORLD) for n in range(jobs.WORLD + 1)]
                    + [("reading calls", n, jobs.WORLD) for n in range(jobs.WORLD + 1)]
                    + [("building steps", n, steps) for n in range(steps + 1)])


def test_collviz_replay_and_export_open_a_jobs_artifacts_from_the_command_line(job_artifacts, tmp_path):
    """As a user runs it: the hang's dumps headless (the culprit named, exit 1 as for a live run),
    the healthy job's profiler traces as JSON (every call timed), and their Perfetto export."""
    from support.cli import run_cli

    hang = run_cli("replay", str(job_artifacts["hang"] / "fr" / "json"), "--headless")
    assert hang.returncode == 1, hang.stderr
    assert f"hang caused by rank {jobs.SKIPPER}" in hang.stdout and "Traceback" not in hang.stderr
    profiled = run_cli("replay", str(job_artifacts["healthy"] / "profile"), "--json")
    assert profiled.returncode == 0, profiled.stderr
    calls = json.loads(profiled.stdout)["calls"]
    assert calls and all(call["slowest_seconds"] for call in calls)
    assert json.loads(profiled.stdout)["run"]["mode"] == "imported"  # not "live": nothing ran here
    out = tmp_path / "job.json"
    exported = run_cli("export", str(job_artifacts["healthy"] / "profile"), "--perfetto", str(out))
    assert exported.returncode == 0, exported.stderr
    assert json.loads(out.read_text())["traceEvents"]


def test_order_steps_keeps_every_ranks_order_and_survives_a_cycle():
    assert order_steps({0: ["a", "b", "c"], 1: ["a", "c"], 2: ["b", "c"]}, {"a": 1, "b": 2, "c": 3}) == ["a", "b", "c"]
    assert order_steps({0: ["x", "y"], 1: ["y", "x"]}, {"x": 5, "y": 1}) in (["x", "y"], ["y", "x"])
    assert order_steps({0: ["late", "early"]}, {"late": 9, "early": 1}) == ["late", "early"]


def test_rank_lists_read_as_ranges():
    from collviz.runtime.observation.rank_lists import ranks_text

    assert ranks_text([0, 1, 2, 3, 5, 7, 8, 9]) == "0–3, 5, 7–9"
    assert ranks_text([0, 1]) == "0, 1" and ranks_text([4]) == "4" and ranks_text([]) == ""
    assert ranks_text(list(range(64))) == "0–63" and ranks_text([0, 2, 4]) == "0, 2, 4"


def test_names_of_ops_and_types():
    assert [op_name(n) for n in ("gloo:all_reduce", "nccl:_allgather_base", "c10d::_reduce_scatter_base_",
                                 "c10d::alltoall_base_", "allgather_into_tensor_coalesced", "nccl:send 0->1")] == [
        "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_gather", "send"]
    assert [dtype_name(n) for n in ("Float", "c10::BFloat16", "long int", "Weird")] == ["float32", "bfloat16", "int64",
                                                                                        "Weird"]
