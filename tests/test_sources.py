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
import pickle
from collections import defaultdict
from pathlib import Path

import pytest

import artifact_jobs as jobs
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
from test_app import _until
from test_export import check_trace_events

NCCL_LOG = Path(__file__).parent / "fixtures" / "nccl" / "job-4ranks.log"
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
        transfers[names[t.phase]].add((t.src, t.dst, t.step))
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
    assert (calls[(0, "world", 0)].count, calls[(0, "world", 0)].bytes_in) == (262144, 1 << 20)
    pair = calls[(2, "nccl comm 1", 0)]
    assert (pair.op, pair.dtype, pair.count, pair.bytes_out, pair.group_ranks) == ("all_gather", "bfloat16", 1024,
                                                                                    4096, [0, 2])
    narration = {e.name: e.narration for e in _only(run.events, Phase) if e.edge == "begin"}
    assert "RING/LL128 on ranks 0–3" in narration["all_reduce #0 on world"]
    assert "RING/SIMPLE" in narration["all_reduce #1 on world"]
    assert "network transport: Socket" in narration["NCCL init of world"]


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
    from screen_support import walk_every_step

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
        await _until(pilot, lambda: app.loaded)
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
        "foreign.json": (b'{"hello": 1}', "neither a Flight Recorder dump nor a torch.profiler trace"),
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
    assert "rank 1: 1 entries left out, missing or malformed: collective_seq_id (1)" in text
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

    from conftest import run_cli

    hang = run_cli("replay", str(made["hang"] / "fr" / "json"), "--headless")
    assert hang.returncode == 1, hang.stderr
    assert f"hang caused by rank {jobs.SKIPPER}" in hang.stdout and "Traceback" not in hang.stderr
    profiled = run_cli("replay", str(made["healthy"] / "profile"), "--json")
    assert profiled.returncode == 0, profiled.stderr
    calls = json.loads(profiled.stdout)["calls"]
    assert calls and all(call["slowest_seconds"] for call in calls)
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
