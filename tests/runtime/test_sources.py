"""A user's own artifacts — Flight Recorder dumps, profiler traces, an NCCL log — opened as collviz runs.

The dumps and traces are real: :mod:`artifact_jobs` makes them once per module on 4 gloo ranks (a
healthy job, a job where one rank skips a call, a job where ranks disagree). Every expected call,
rank, size and status below is computed from what those jobs did, never from the importer. The NCCL
log is the hand-written fixture ``tests/fixtures/nccl/job-4ranks.log`` (no GPU here to capture one).
"""

from __future__ import annotations

import gzip
import inspect
import json
import os
import pickle
import random
from collections import defaultdict
from pathlib import Path

import pytest

from collviz.app.app import make_app
from collviz.app.model import EventLog, view_at
from collviz.runtime.errors import UsageError
from collviz.runtime.reports.export import write_perfetto
from collviz.runtime.reports.summary import render_summary
from collviz.runtime.sources import open_artifacts
from collviz.runtime.sources.names import dtype_name, op_name
from collviz.runtime.sources.nccl_log import TOPOLOGY_LABEL
from collviz.runtime.sources.run import order_steps
from collviz.runtime.wire.protocol import Collective, Mismatch, Phase, RankEnd, RunEnd, RunStart, Stall, Transfer

from support import artifact_jobs as jobs
from support.app import until
from support.garble import garbled
from support.paths import FIXTURES
from support.traces import check_trace_events


NCCL_LOG = FIXTURES / "nccl" / "job-4ranks.log"
WORLD_GROUP = "0 (default_pg)"
FLOAT32 = 4


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three jobs, run once: name → the folder of their artifacts."""
    root = tmp_path_factory.mktemp("artifacts")
    return {name: jobs.run_job(getattr(jobs, name), root / name) for name in ("healthy", "hang", "mismatch")}


def _begins(events) -> dict[int, list[Collective]]:
    found = defaultdict(list)
    for event in events:
        if isinstance(event, Collective) and event.edge == "begin":
            found[event.rank].append(event)
    return found


def _only(events, kind):
    return [e for e in events if isinstance(e, kind)]


def _fr_call(op: str) -> tuple[str, int, int]:
    """(op, input elements, output elements) Flight Recorder records for one of the jobs' calls on
    gloo: torch 2.13's gloo runs reduce_scatter_tensor as an all-reduce of the whole input, and its
    Flight Recorder names it so."""
    n, e = jobs.WORLD, jobs.ELEMENTS
    return {"all_reduce": ("all_reduce", e, e), "all_gather": ("all_gather", e, e * n), "broadcast": ("broadcast", e, e),
            "reduce_scatter": ("all_reduce", e, e), "all_to_all": ("all_to_all", e, e)}[op]


@pytest.mark.parametrize("form", ["json", "pickle"])
def test_healthy_dumps_are_the_calls_the_job_made(made, form):
    run = open_artifacts([made["healthy"] / "fr" / form])
    assert run.exit_status == 0
    expected = [(op, seq, "float32", count, count * FLOAT32, out * FLOAT32)
                for seq, (op, count, out) in enumerate(map(_fr_call, jobs.HEALTHY_CALLS), start=1)]
    begins = _begins(run.events)
    assert sorted(begins) == list(range(jobs.WORLD))
    for rank, calls in begins.items():
        assert [(c.op, c.group_seq, c.dtype, c.count, c.bytes_in, c.bytes_out) for c in calls] == expected, rank
        assert {(c.group, tuple(c.group_ranks)) for c in calls} == {(WORLD_GROUP, tuple(range(jobs.WORLD)))}
    assert not _only(run.events, Stall) and not _only(run.events, Mismatch)
    assert _only(run.events, RunEnd)[0].status == "ok"
    assert sorted(e.rank for e in _only(run.events, RankEnd)) == list(range(jobs.WORLD))
    start = _only(run.events, RunStart)[0]
    assert start.phase_count == len(jobs.HEALTHY_CALLS) and start.world_size == jobs.WORLD
    assert "no values or provenance" in start.backend_reason
    # gloo's dumps key the default group '' in pg_config, '0' in their entries: read, and said
    assert any("keyed ''" in w for w in run.warnings)


@pytest.mark.parametrize("form", ["json", "pickle"])
def test_a_rank_that_skips_a_call_is_named_with_its_last_call(made, form):
    run = open_artifacts([made["hang"] / "fr" / form])
    assert run.exit_status == 1
    [stall] = _only(run.events, Stall)
    waiting = sorted(set(range(jobs.WORLD)) - {jobs.SKIPPER})
    assert (stall.op, stall.group, stall.group_seq, stall.waiting) == ("all_reduce", WORLD_GROUP, len(jobs.HANG_CALLS) + 1,
                                                                       waiting)
    assert stall.elsewhere == [f"rank {jobs.SKIPPER} never arrived (last seen in phase "
                               f"{len(jobs.HANG_CALLS)} 'all_gather #{len(jobs.HANG_CALLS)} on group {WORLD_GROUP}')"]
    [end] = _only(run.events, RunEnd)
    assert end.status == "failed" and end.detail.startswith(f"hang caused by rank {jobs.SKIPPER}: ")
    assert f"rank {jobs.SKIPPER}'s last call: all_gather #{len(jobs.HANG_CALLS)} on group {WORLD_GROUP}, completed" in end.detail
    assert not _only(run.events, RankEnd)  # every rank was still running when the dumps were taken
    # the pair's own group: its members are not in gloo's pg_config, so they come from the dumps
    pair = [c for calls in _begins(run.events).values() for c in calls if c.group == "1"]
    assert sorted(c.rank for c in pair) == list(jobs.SUBGROUP) and {tuple(c.group_ranks) for c in pair} == {jobs.SUBGROUP}
    assert any("taken as the ranks whose dumps mention it: 0, 1" in w for w in run.warnings)


def test_a_pickled_dump_names_the_line_of_the_users_code(made):
    run = open_artifacts([made["hang"] / "fr" / "pickle"])
    source, first = inspect.getsourcelines(jobs._call)
    line = first + next(i for i, text in enumerate(source) if "dist.all_gather_into_tensor(" in text)
    assert f"called at artifact_jobs.py:{line} in _call" in _only(run.events, RunEnd)[0].detail


def test_ranks_that_disagree_on_a_call_are_named(made):
    run = open_artifacts([made["mismatch"] / "fr" / "json"])
    assert run.exit_status == 1
    size, op = _only(run.events, Mismatch)
    assert (size.group_seq, size.odd_ranks) == (2, [jobs.BIG_RANK])
    assert size.calls[jobs.BIG_RANK] == f"broadcast(float32 ×{2 * jobs.ELEMENTS})"
    assert {size.calls[r] for r in range(jobs.WORLD) if r != jobs.BIG_RANK} == {f"broadcast(float32 ×{jobs.ELEMENTS})"}
    assert (op.group_seq, op.odd_ranks) == (3, [jobs.ODD_RANK])
    assert op.calls[jobs.ODD_RANK].startswith("broadcast(") and op.calls[0].startswith("all_reduce(")
    [stall] = _only(run.events, Stall)
    assert stall.elsewhere == [f"rank {jobs.ODD_RANK} is in broadcast #3"]
    assert _only(run.events, RunEnd)[0].detail.startswith("collective mismatch at call #2 on group 0 (default_pg)")


def test_a_call_every_other_rank_completed_is_no_hang(made, tmp_path):
    """gloo retires a call a moment after it returns: a dump taken in that moment shows it open."""
    for source in sorted((made["healthy"] / "fr" / "json").iterdir()):
        content = json.loads(source.read_text())
        if source.name == "rank_2.json":
            content["entries"][-1]["retired"] = False
        (tmp_path / source.name).write_text(json.dumps(content))
    run = open_artifacts([tmp_path])
    assert run.exit_status == 0 and not _only(run.events, Stall)
    assert any("rank 2 had not yet recorded it completed: not a hang" in w for w in run.warnings)


def test_profiler_traces_give_sizes_groups_and_times(made):
    folder = made["healthy"]
    run = open_artifacts([folder / "profile"])
    assert run.exit_status == 0 and not run.warnings
    n, e = jobs.WORLD, jobs.ELEMENTS
    sizes = {"all_reduce": (e, e, e), "all_gather": (e, e * n, e * n), "broadcast": (e, e, e),
             "reduce_scatter": (e, e // n, e), "all_to_all": (e, e, e)}  # (in, out, S) in elements
    ends = defaultdict(list)
    for event in run.events:
        if isinstance(event, Collective) and event.edge == "end":
            ends[event.rank].append(event)
    for rank in range(n):
        walls = json.loads((folder / f"walls_{rank}.json").read_text())
        calls = ends[rank]
        assert [c.op for c in calls] == list(jobs.HEALTHY_CALLS)
        for call, wall_ns in zip(calls, walls):
            count, out, s = sizes[call.op]
            assert (call.count, call.bytes_in, call.bytes_out, call.algo_bytes) == (count, count * 4, out * 4, s * 4)
            assert call.dtype == "float32" and call.group == WORLD_GROUP and call.group_ranks == list(range(n))
            # gloo's work slice runs inside the call the job timed around it
            assert 0 < call.duration_ns <= wall_ns + 50_000, (rank, call.op)
    summary = render_summary(run.events)
    assert "busbw = algbw × 2(n−1)/n = 2·3/4 = 1.5" in summary and "busbw = algbw × (n−1)/n = 3/4 = 0.75" in summary


def test_nccl_log_gives_topology_choices_and_init_times():
    """The fixture: 4 ranks in a ring 0→1→2→3→0 and a chain tree 3→2→1→0 on two channels, a
    2-rank communicator of ranks 0 and 2, two all-reduces and one all-gather."""
    run = open_artifacts([NCCL_LOG])
    assert run.exit_status == 0
    names = {e.index: e.name for e in _only(run.events, Phase)}
    transfers = defaultdict(set)
    for t in _only(run.events, Transfer):
        assert t.kind == "p2p" and TOPOLOGY_LABEL in t.buffer
        transfers[names[t.phase]].add((t.src, t.dst, t.hop))
    assert transfers["NCCL ring, channels 00, 01 on world"] == {(r, (r + 1) % 4, 1) for r in range(4)}
    parent = {1: 0, 2: 1, 3: 2}
    depth = {1: 1, 2: 2, 3: 3}
    up = {(child, p, 3 - depth[child] + 1) for child, p in parent.items()}
    down = {(p, child, 3 + depth[child]) for child, p in parent.items()}
    assert transfers["NCCL tree, channels 00, 01 on world"] == up | down
    assert transfers["NCCL ring, channel 00 on nccl comm 1"] == {(0, 2, 1), (2, 0, 1)}
    begins = {(e.rank, e.index): e.t_ns for e in _only(run.events, Phase) if e.edge == "begin"}
    took = {e.rank: e.t_ns - begins[(e.rank, e.index)] for e in _only(run.events, Phase)
            if e.edge == "end" and names[e.index] == "NCCL init of world"}
    assert took == {0: 530_000_000, 1: 520_000_000, 2: 540_000_000, 3: 510_000_000}
    calls = {(c.rank, c.group, c.group_seq): c for c in _begins(run.events)[0] + _begins(run.events)[2]}
    assert (calls[(0, "world", 1)].count, calls[(0, "world", 1)].bytes_in) == (262144, 1 << 20)  # opCount 0: call #1
    pair = calls[(2, "nccl comm 1", 1)]
    assert (pair.op, pair.dtype, pair.count, pair.bytes_out, pair.group_ranks) == ("all_gather", "bfloat16", 1024,
                                                                                    4096, [0, 2])
    narration = {e.name: e.narration for e in _only(run.events, Phase) if e.edge == "begin"}
    assert "RING/LL128 on ranks 0–3" in narration["all_reduce #1 on world"]
    assert "RING/SIMPLE" in narration["all_reduce #2 on world"]
    assert "network transport: Socket" in narration["NCCL init of world"]


def test_a_log_too_large_to_hold_is_streamed(monkeypatch, tmp_path):
    """A log past the bound on logs read whole (lowered here to 512 bytes; the fixture is 12 KiB)
    is read a line at a time, plain or gzip-compressed, and opens as the fixture read whole does."""
    import collviz.runtime.sources.detect as detect

    whole = open_artifacts([NCCL_LOG])
    packed = tmp_path / "job-4ranks.log.gz"
    packed.write_bytes(gzip.compress(NCCL_LOG.read_bytes()))
    assert packed.stat().st_size > 512
    monkeypatch.setattr(detect, "STREAMED_LOG_BYTES", 512)
    monkeypatch.setattr(detect, "read_artifact", lambda path: pytest.fail(f"{path} was read whole"))
    for path in (NCCL_LOG, packed):
        streamed = open_artifacts([path])
        assert (streamed.events, streamed.warnings) == (whole.events, whole.warnings)


def test_streamed_lines_end_without_their_newline_and_a_huge_line_is_cut(tmp_path):
    from collviz.runtime.sources.reading import MAX_LINE_CHARS, stream_lines

    path = tmp_path / "lines.log"
    path.write_bytes(b"first\r\n" + b"x" * (MAX_LINE_CHARS * 2 + 5) + b"\nlast \xff")
    assert list(stream_lines(path)) == ["first", "x" * MAX_LINE_CHARS, "last \ufffd"]


def _imports(made) -> dict[str, object]:
    return {"healthy": open_artifacts([made["healthy"] / "fr" / "json"]),
            "hang": open_artifacts([made["hang"] / "fr" / "pickle"]),
            "mismatch": open_artifacts([made["mismatch"] / "fr" / "json"]),
            "profile": open_artifacts([made["healthy"] / "profile"]),
            "nccl": open_artifacts([NCCL_LOG])}


def test_summary_export_and_viewer_model_take_every_import(made, tmp_path):
    for name, run in _imports(made).items():
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
        _imports(made)["healthy"].events)


@pytest.mark.parametrize("present", [False, True], ids=["plain", "present"])
@pytest.mark.parametrize("name", ["healthy", "hang", "profile"])
async def test_every_step_of_an_import_at_100x30_shows_its_call_s_figures(made, name, present):
    """Flight Recorder dumps (healthy, hung) and profiler traces, at the smallest size, plain and
    in the projector layout: each step's call shows S (and t, algbw, busbw where the artifact has
    times) on the screen."""
    from collviz.app.viewer_options import ViewerOptions
    from support.screens import walk_every_step

    where = {"healthy": made["healthy"] / "fr" / "json", "hang": made["hang"] / "fr" / "pickle",
             "profile": made["healthy"] / "profile"}[name]
    run = open_artifacts([where])
    walk = await walk_every_step(make_app(events=run.events, options=ViewerOptions(present=present)), (100, 30))
    assert walk.hidden == [] and walk.cut == [] and walk.checked >= len(jobs.HANG_CALLS if name == "hang" else
                                                                         jobs.HEALTHY_CALLS)


async def _last_step_panes(events, back: int = 0) -> dict[str, str]:
    """The transfers pane's title and the text of the transfers, cost and memory panes at the last
    step, or ``back`` steps before it (each pane's text on one line)."""
    app = make_app(events=events)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.loaded)
        await pilot.press("end", *["left"] * back)
        await pilot.pause()
        await pilot.pause()
        panes = {name: " ".join(app.screen.query_one(f"#{name}").render().plain.split()) for name in ("transfers", "cost")}
        panes["memory"] = "".join(segment.text for segment in app.screen.query_one("#memory").build_lines(150, 8)[0])
        panes["transfers title"] = str(app.screen.query_one("#transfers").border_title)
        return panes


async def test_the_viewer_says_what_an_artifact_does_not_hold(made):
    """The panes name what a dump lacks (transfers, durations, memory) instead of showing none, and
    a hung step's cost pane names the call the waiting ranks are still inside."""
    events = open_artifacts([made["hang"] / "fr" / "json"]).events
    panes = await _last_step_panes(events)
    assert panes["transfers title"] == "transfers · not recorded"
    assert "no values, provenance or transfers" in panes["transfers"] and "no transfers in this step" not in panes["transfers"]
    waiting = ", ".join(f"r{r}" for r in range(jobs.WORLD) if r != jobs.SKIPPER)
    assert f"all_reduce #{len(jobs.HANG_CALLS) + 1} has not ended on {waiting}: no cost" in panes["cost"]
    assert panes["memory"] == "memory not recorded: the imported artifact holds none"
    cost = (await _last_step_panes(events, back=1))["cost"]  # the skipper's last call, completed everywhere
    gathered = jobs.ELEMENTS * FLOAT32 * jobs.WORLD  # the skipper's last call: an all_gather of every input
    assert f"S = {gathered} B · t not recorded" in cost  # the headline says t is missing, the details why
    assert "t: not recorded: a Flight Recorder dump records durations only with timing on" in cost
    assert "t = " not in cost  # no duration made up from the phase's edges


async def test_ranks_inside_different_calls_are_named_by_call(made):
    """The mismatch job's last step: the odd rank broadcasts where the others all-reduce."""
    cost = (await _last_step_panes(open_artifacts([made["mismatch"] / "fr" / "json"]).events))["cost"]
    others = ", ".join(f"r{r}" for r in range(jobs.WORLD) if r != jobs.ODD_RANK)
    assert f"calls not ended: all_reduce #3 on {others}; broadcast #3 on r{jobs.ODD_RANK}: no cost" in cost


def _pickle_with_reduce(marker: Path) -> bytes:
    class Sneaky:
        def __reduce__(self):
            return (Path.touch, (marker,))
    return pickle.dumps({"version": "2.10", "entries": [Sneaky()], "pg_config": {}})


def _hostile(tmp_path: Path, made) -> dict[str, tuple[list[Path], str]]:
    """Name → (paths to open, what the one-line error says)."""
    real_pickle = (made["healthy"] / "fr" / "pickle" / "nccl_trace_rank_0").read_bytes()
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
    (tmp_path / "dump.json").write_bytes((made["healthy"] / "fr" / "json" / "rank_0.json").read_bytes())
    cases["no rank in the name"] = ([tmp_path / "dump.json"], "cannot tell which rank wrote this dump")
    real_json = (made["healthy"] / "fr" / "json" / "rank_0.json").read_bytes()
    (tmp_path / "prefixed_0.json").write_bytes(b"[rank0]:" + real_json)
    cases["a launcher's prefix before a dump"] = ([tmp_path / "prefixed_0.json"], "damaged JSON")
    (tmp_path / "huge_0.json").write_bytes(real_json)
    os.truncate(tmp_path / "huge_0.json", 300 * 1024 * 1024)  # sparse: past the bounded read
    cases["huge"] = ([tmp_path / "huge_0.json"], "more than")
    huge = tmp_path / f"rank_{'9' * 40}.json"
    huge.write_bytes((made["healthy"] / "fr" / "json" / "rank_0.json").read_bytes())
    cases["a rank beyond any job"] = ([huge], "more than any job has")
    cases["two kinds"] = ([made["healthy"] / "fr" / "json" / "rank_0.json", made["healthy"] / "profile" / "trace_0.json"],
                          "open one kind at a time")
    content = json.loads((made["healthy"] / "fr" / "json" / "rank_0.json").read_text())
    content["entries"] = []
    (tmp_path / "fr_0.json").write_text(json.dumps(content))
    cases["no entries"] = ([tmp_path / "fr_0.json"], "is TORCH_FR_BUFFER_SIZE set")
    return cases


def test_hostile_input_is_one_clear_line(made, tmp_path):
    for name, (paths, needle) in _hostile(tmp_path, made).items():
        with pytest.raises(UsageError) as refused:
            open_artifacts(paths)
        message = str(refused.value)
        assert needle in message and "\n" not in message, (name, message)
    assert not (tmp_path / "pwned").exists()  # the pickle's reducer was never called


def test_inconsistent_dumps_open_with_warnings(made, tmp_path):
    """Ranks whose configs disagree, a malformed entry, a damaged file among good ones, a rank with
    no dump, a gzipped dump: each read as far as it goes, and said."""
    source = made["healthy"] / "fr" / "json"
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
    begins = _begins(run.events)
    assert sorted(begins) == [0, 1, 2] and len(begins[1]) == len(jobs.HEALTHY_CALLS) - 1
    assert run.exit_status == 0  # every call recorded completed: nothing hangs, nothing disagrees


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


def _gpu_trace(rank: int) -> dict:
    """A 2-rank NCCL trace as torch documents it: each call's record_param_comms row and its NCCL
    kernel, linked by External id (no GPU here to record one: not verified on real output)."""
    def comms(ext: int, ts: float, name: str, nelems_in: int, nelems_out: int) -> dict:
        return {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": ts, "dur": 5.0, "pid": 1, "tid": 1,
                "args": {"External id": ext, "Collective name": name, "dtype": "BFloat16", "In msg nelems": nelems_in,
                         "Out msg nelems": nelems_out, "Group size": 2, "Process Group Name": "0",
                         "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]", "Rank": rank}}

    def kernel(ext: int, ts: float, dur: float, name: str) -> dict:
        return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7,
                "args": {"External id": ext, "correlation": ext + 100}}

    return {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2,
                                "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "ranks": [0, 1]}]},
            "traceEvents": [comms(10, 100.0, "allreduce", 4096, 4096), comms(11, 300.0, "_allgather_base", 1024, 2048),
                            kernel(11, 320.0, 40.0 + rank, "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, ...)"),
                            kernel(10, 110.0, 80.0 + rank, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...)")]}


def test_gpu_profiler_traces_take_each_calls_kernel_time(tmp_path):
    for rank in range(2):
        (tmp_path / f"gpu_{rank}.json").write_text(json.dumps(_gpu_trace(rank)))
    run = open_artifacts([tmp_path])
    assert run.exit_status == 0 and not run.warnings
    ends = [e for e in run.events if isinstance(e, Collective) and e.edge == "end"]
    found = {(e.rank, e.op): (e.dtype, e.count, e.bytes_in, e.bytes_out, e.duration_ns, e.group) for e in ends}
    for rank in range(2):
        assert found[(rank, "all_reduce")] == ("bfloat16", 4096, 8192, 8192, (80 + rank) * 1000, WORLD_GROUP)
        assert found[(rank, "all_gather")] == ("bfloat16", 1024, 2048, 4096, (40 + rank) * 1000, WORLD_GROUP)
    assert "not verified here (no GPU)" in _only(run.events, RunStart)[0].description


def test_collviz_replay_and_export_open_a_jobs_artifacts_from_the_command_line(made, tmp_path):
    """As a user runs it: the hang's dumps headless (the culprit named, exit 1 as for a live run),
    the healthy job's profiler traces as JSON (every call timed), and their Perfetto export."""
    import json

    from support.cli import run_cli

    hang = run_cli("replay", str(made["hang"] / "fr" / "json"), "--headless")
    assert hang.returncode == 1, hang.stderr
    assert f"hang caused by rank {jobs.SKIPPER}" in hang.stdout and "Traceback" not in hang.stderr
    profiled = run_cli("replay", str(made["healthy"] / "profile"), "--json")
    assert profiled.returncode == 0, profiled.stderr
    calls = json.loads(profiled.stdout)["calls"]
    assert calls and all(call["slowest_seconds"] for call in calls)
    assert json.loads(profiled.stdout)["run"]["mode"] == "imported"  # not "live": nothing ran here
    out = tmp_path / "job.json"
    exported = run_cli("export", str(made["healthy"] / "profile"), "--perfetto", str(out))
    assert exported.returncode == 0, exported.stderr
    assert json.loads(out.read_text())["traceEvents"]


def test_an_import_tells_its_progress_stage_by_stage(made):
    """Four dumps: each file read, each rank's calls read, then each of the healthy job's steps."""
    told: list[tuple[str, int, int]] = []
    open_artifacts([made["healthy"] / "fr" / "json"], lambda stage, done, total: told.append((stage, done, total)))
    steps = len(jobs.HEALTHY_CALLS)
    assert told == ([("reading files", n, jobs.WORLD) for n in range(jobs.WORLD + 1)]
                    + [("reading calls", n, jobs.WORLD) for n in range(jobs.WORLD + 1)]
                    + [("building steps", n, steps) for n in range(steps + 1)])


def _hang_set(made, tmp_path: Path, ranks, edit=None) -> Path:
    """The hang job's JSON dumps of ``ranks`` only, each with the default group's members in its
    pg_config as an NCCL dump has them (gloo fills them in lazily), passed through ``edit``."""
    folder = tmp_path / "set"
    folder.mkdir()
    for rank in ranks:
        content = json.loads((made["hang"] / "fr" / "json" / f"rank_{rank}.json").read_text())
        content["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(jobs.WORLD)))}}
        if edit is not None:
            edit(rank, content)
        (folder / f"rank_{rank}.json").write_text(json.dumps(content))
    return folder


def test_a_partial_set_blames_only_ranks_whose_dumps_show_it(made, tmp_path):
    """The skipper's dump and one waiter's: the skipper is the cause; the two ranks without a dump
    are unknown (never a cause, never "not started"), and the verdict says how many are missing."""
    waiter = 1
    run = open_artifacts([_hang_set(made, tmp_path, [waiter, jobs.SKIPPER])])
    assert run.exit_status == 1
    absent = sorted(set(range(jobs.WORLD)) - {waiter, jobs.SKIPPER})
    [end] = _only(run.events, RunEnd)
    assert end.detail.startswith(f"hang caused by rank {jobs.SKIPPER}: "), end.detail
    assert end.detail.endswith(f"(2 of {jobs.WORLD} ranks unknown: ranks {absent[0]}, {absent[1]}, no dump of this rank)")
    [stall] = _only(run.events, Stall)
    assert stall.waiting == [waiter] and f"rank {absent[0]}: no dump of this rank" in stall.elsewhere
    final = view_at(EventLog(run.events), len(run.events))
    status = {view.rank: view.status for view in final.ranks}
    assert [status[r] for r in absent] == ["unknown: no dump of this rank"] * 2
    assert all("not started" not in text for text in status.values())
    summary = render_summary(run.events)
    assert "imported from artifacts" in summary and "mode live" not in summary


def test_a_set_of_waiters_only_names_no_cause(made, tmp_path):
    """Every dump present waits in the call: the one rank that did not is among those without a dump."""
    waiters = [r for r in range(jobs.WORLD) if r != jobs.SKIPPER]
    run = open_artifacts([_hang_set(made, tmp_path, waiters)])
    [end] = _only(run.events, RunEnd)
    assert end.detail.startswith("hang, its cause unknown"), end.detail
    assert end.detail.endswith(f"(1 of {jobs.WORLD} ranks unknown: rank {jobs.SKIPPER}, no dump of this rank)")


def test_holes_damaged_values_and_older_names_in_dumps(made, tmp_path):
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

    run = open_artifacts([_hang_set(made, tmp_path, range(jobs.WORLD), edit)])
    text = "\n".join(run.warnings)
    assert "rank 0: 1 calls missing inside its dump's sequence on group 0 (default_pg) (#2)" in text
    assert "rank 1: 1 entries left out as damaged (a field missing, malformed or impossible): input_sizes (1)" in text
    assert "rank 1: 1 entries hold an impossible duration" in text
    assert "rank 3 (rank_3.json): Flight Recorder format 1.5" in text
    begins = _begins(run.events)
    calls = len(jobs.HANG_CALLS) + 1  # rank 3 waits in the last
    assert [(c.group_seq, c.dtype) for c in begins[3] if c.group == WORLD_GROUP] == [(n, "unknown") for n in range(1, calls + 1)]
    assert all(c.duration_ns is None for c in _only(run.events, Collective))


def test_every_source_numbers_calls_from_one(made):
    """The healthy job's dumps and its profiler traces number the same calls the same way: #1 first."""
    numbers = {}
    for source in ("fr/json", "profile"):
        begins = _begins(open_artifacts([made["healthy"] / source]).events)
        numbers[source] = {rank: [c.group_seq for c in calls] for rank, calls in begins.items()}
    expected = list(range(1, len(jobs.HEALTHY_CALLS) + 1))
    assert numbers["fr/json"] == numbers["profile"] == {rank: expected for rank in range(jobs.WORLD)}


def test_impossible_values_in_a_trace_are_damaged_input_and_busbw_takes_the_calls_group(tmp_path):
    """Two ranks of a 4-rank job on their own 2-rank group: rank 0's all-reduce kernel has a negative
    duration (shown untimed, never as 1 ns), a third call claims 10^30 elements (left out); the
    all-gather's busbw takes the factor of 2 ranks, (n−1)/n = 1/2, not the job's 3/4."""
    for rank in range(2):
        trace = _gpu_trace(rank)
        trace["distributedInfo"]["world_size"] = 4
        events = trace["traceEvents"]
        if rank == 0:
            next(e for e in events if e["name"].startswith("ncclDevKernel_AllReduce"))["dur"] = -80.0
        huge = json.loads(json.dumps(events[0]))
        huge["args"].update({"External id": 12, "In msg nelems": 10**30, "Out msg nelems": 10**30})
        events.append(huge)
        (tmp_path / f"gpu_{rank}.json").write_text(json.dumps(trace))
    run = open_artifacts([tmp_path])
    ends = {(e.rank, e.op): e for e in _only(run.events, Collective) if e.edge == "end"}
    assert ends[(0, "all_reduce")].duration_ns is None and ends[(1, "all_reduce")].duration_ns == 81_000
    assert sorted(ends) == [(0, "all_gather"), (0, "all_reduce"), (1, "all_gather"), (1, "all_reduce")]
    text = "\n".join(run.warnings)
    assert "rank 0: 1 calls with a zero, negative or impossible duration (shown untimed): damaged input" in text
    assert "rank 1: 1 calls with a size beyond any device (left out): damaged input" in text
    summary = render_summary(run.events)
    assert "busbw = algbw × (n−1)/n = 1/2 = 0.5" in summary and "3/4" not in summary
    assert "time (per rank): r1 0.081 ms\n" in summary  # rank 0's damaged time is not shown as one


@pytest.mark.parametrize("source", ["hang/fr/json", "mismatch/fr/json", "healthy/profile", "gpu"])
def test_garbled_dumps_and_traces_open_or_get_one_line(made, tmp_path, source):
    """Real dumps and traces (and the documented GPU trace) with fields replaced by wrong kinds and
    impossible sizes, 20 ways each: each set opens (with warnings) or is refused in one line, never
    a traceback."""
    if source == "gpu":
        documents = {f"gpu_{rank}.json": _gpu_trace(rank) for rank in range(2)}
    else:
        folder = made[source.split("/")[0]].joinpath(*source.split("/")[1:])
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


def _old_trace(rank: int, torch: str) -> dict:
    """A 2-rank NCCL trace in the form torch 1.13 or 2.0 wrote (their fields as in Holistic Trace
    Analysis' test data, tests/data/trace_diff and trace_filter): no process groups, a
    record_param_comms row without a collective's name, the dispatcher's c10d:: slices (a tensor
    list's shapes unrecorded), NCCL's own nccl: slices with the input's shape, and ncclKernel_
    kernels whose External id is not the CPU row's."""
    def cpu(name: str, ts: float, dims: list, kinds: list, cat: str = "cpu_op") -> dict:
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": 40.0, "pid": 7, "tid": 7,
                "args": {"External id": int(ts), "Input Dims": dims, "Input type": kinds}}

    def kernel(name: str, ts: float, dur: float) -> dict:
        return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 21,
                "args": {"External id": 900000 + int(ts), "correlation": 900000 + int(ts), "device": rank}}

    if torch == "1.13":
        events = [cpu("record_param_comms", 100.0, [], []),
                  cpu("nccl:all_to_all", 105.0, [[8, 1024, 16]], ["float"], "user_annotation"),
                  kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", 120.0, 3000.0 + rank),
                  cpu("c10d::allreduce_", 5000.0, [[], [], [], []], ["TensorList", "", "Scalar", "Scalar"]),
                  cpu("nccl:all_reduce", 5010.0, [[1000]], ["float"], "user_annotation"),
                  kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 5030.0, 1500.0 + rank)]
    else:
        events = [cpu("c10d::_allgather_base_", 100.0, [[2048], [1024], []], ["signed char", "signed char", ""]),
                  cpu("record_param_comms", 102.0, [[1024], [], []], ["signed char", "Scalar", "Scalar"]),
                  cpu("nccl:_all_gather_base", 105.0, [[1024]], ["signed char"], "user_annotation"),
                  kernel("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", 140.0,
                         70.0 + rank),
                  cpu("c10d::alltoall_base_", 400.0, [[384], [384], [], [], [], []], ["long", "long", "", "", "", "Scalar"]),
                  cpu("nccl:all_to_all", 405.0, [[384]], ["long"], "user_annotation"),
                  kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", 420.0,
                         900.0)]
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
            "traceEvents": events}


@pytest.mark.parametrize("torch", ["1.13", "2.0"])
def test_traces_of_torch_before_2_1_give_their_calls(tmp_path, torch):
    """Sizes from the shapes recorded (torch 1.13's all-reduce: its nccl: slice's [1000] floats; its
    all-to-all: the nccl: slice alone, 8×1024×16 floats; 2.0's all-gather: c10d's [1024] int8 in,
    [2048] out; its all-to-all: 384 int64), each call's time its kernel's, matched by op in order;
    the missing groups said, not invented."""
    for rank in range(2):
        (tmp_path / f"rank_{rank}.json").write_text(json.dumps(_old_trace(rank, torch)))
    run = open_artifacts([tmp_path])
    ends = defaultdict(list)
    for event in _only(run.events, Collective):
        if event.edge == "end":
            ends[event.rank].append((event.op, event.group_seq, event.dtype, event.count, event.bytes_in,
                                     event.bytes_out, event.duration_ns))
    for rank in range(2):
        if torch == "1.13":
            alltoall = 8 * 1024 * 16
            expected = [("all_to_all", 1, "float32", alltoall, alltoall * 4, alltoall * 4, (3000 + rank) * 1000),
                        ("all_reduce", 2, "float32", 1000, 4000, 4000, (1500 + rank) * 1000)]
        else:
            expected = [("all_gather", 1, "int8", 1024, 1024, 2048, (70 + rank) * 1000),
                        ("all_to_all", 2, "int64", 384, 384 * 8, 384 * 8, 900_000)]
        assert ends[rank] == expected, rank
    assert "rank 0's trace names no process groups (torch before 2.1 records none): its calls are shown on group " \
           "0 (default_pg)" in run.warnings


def test_a_coalesced_call_is_one_call_with_its_sizes_summed(made, tmp_path):
    """Format 2.7 on: a coalesced call's tensors share one sequence number, then a 'coalesced' entry.
    Each rank's all_reduce #1 gets a second tensor of 4 floats and the closing entry: one call of
    ELEMENTS + 4 floats."""
    for rank in range(jobs.WORLD):
        content = json.loads((made["healthy"] / "fr" / "json" / f"rank_{rank}.json").read_text())
        first = content["entries"][0]
        extra = dict(first, input_sizes=[[4]], output_sizes=[[4]])
        closing = dict(first, profiling_name="gloo:coalesced", input_sizes=[], output_sizes=[])
        content["entries"][1:1] = [extra, closing]
        (tmp_path / f"rank_{rank}.json").write_text(json.dumps(content))
    run = open_artifacts([tmp_path])
    firsts = [calls[0] for calls in _begins(run.events).values()]
    total = jobs.ELEMENTS + 4
    assert {(c.op, c.group_seq, c.count, c.bytes_in) for c in firsts} == {("all_reduce", 1, total, total * FLOAT32)}
    assert "rank 0: 2 entries are further tensors of coalesced calls: each coalesced call is shown as one, its sizes " \
           "summed" in run.warnings
    assert not any("repeat a call number" in w for w in run.warnings) and run.exit_status == 0
