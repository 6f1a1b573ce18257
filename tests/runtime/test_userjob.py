"""``collviz run --nproc N --observe SCRIPT.py``: the user's own script on real gloo ranks, under
the light observer. Each script runs once per session (4 ranks); the tests assert on its recorded
trace. (Without ``--observe`` a headless run reads Flight Recorder instead: ``test_run_recorder``.)

Expected calls and sizes come from the models the tests build themselves (the examples' own
``build_model``) and from what FSDP2 and DDP are documented to do; expected times come from the
script's own clock around its calls.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import torch

import collviz
from collviz.app.cli import main
from collviz.runtime.observation.c10d_calls import C10dSignature, c10d_async, c10d_signature
from collviz.runtime.userjob.observer import NOT_CAPTURED
from collviz.runtime.userjob.completions import CompletionStamper
from collviz.runtime.wire.protocol import (
    NOT_RECORDED_OPTION,
    Collective,
    Memory,
    Phase,
    RankEnd,
    RankStart,
    RunEnd,
    RunStart,
)
from collviz.runtime.wire.trace import TraceContents, read_trace

from support.cli import run_cli
from support.paths import ROOT


RANKS = 4
FSDP_ARGS = {"steps": 2, "dim": 32, "layers": 2}
DDP_ARGS = {"steps": 3, "dim": 32, "layers": 3}


def _example(name: str):
    """The example script as a module (for its ``build_model``; its ``main`` is not run)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _options(args: dict) -> list[str]:
    return [item for key, value in args.items() for item in (f"--{key}", str(value))]


def _record(folder: Path, name: str, script: Path, *script_args: str, nproc: int = RANKS, options: tuple = (),
            ) -> tuple[subprocess.CompletedProcess, TraceContents | None]:
    trace = folder / f"{name}.cvz"
    result = run_cli("run", "--nproc", str(nproc), "--headless", "--observe", "--record", str(trace), *options, str(script),
                     *script_args, timeout=240)
    return result, read_trace(trace) if trace.exists() else None


FEATURES = textwrap.dedent('''
    """Everything the observer must handle, on 4 ranks: calls outside steps, a barrier, subgroups,
    steps opened by `with` and by a plain call, an async call that outlives its step, a call under
    inference_mode, collviz.watch, sync calls timed by the script itself, output to --logs, and
    sys.exit(0)."""
    import json, sys, time
    import torch
    import torch.distributed as dist
    import collviz

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    dist.all_reduce(torch.ones(8))
    dist.barrier()
    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.Adam(model.parameters())
    collviz.watch(model, optimizer)
    with collviz.step("first"):
        pending = dist.all_reduce(torch.ones(16), async_op=True)
        model(torch.ones(2, 4)).sum().backward()
        optimizer.step()
    collviz.step("second")
    gathered = torch.empty(6, dtype=torch.float64)
    dist.all_gather_into_tensor(gathered, torch.full((3,), float(rank), dtype=torch.float64), group=pairs[rank // 2])
    pending.wait()
    with torch.inference_mode():
        dist.all_reduce(torch.ones(2, dtype=torch.int64))
    times = []
    with collviz.step("timed"):
        for size in (1, 4096, 262144):
            tensor = torch.ones(size)
            start = time.monotonic_ns()
            dist.all_reduce(tensor)
            times.append(time.monotonic_ns() - start)
    with open(f"{sys.argv[1]}/times{rank}.json", "w") as out:
        json.dump(times, out)
    print(f"features: rank {rank} says so on stdout")
    print(f"features: rank {rank} says so on stderr", file=sys.stderr)
    dist.destroy_process_group()
    sys.exit(0)
''')

FAILING = textwrap.dedent('''
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    tensor = torch.ones(4)
    dist.all_reduce(tensor)
    if dist.get_rank() == 2:
        raise RuntimeError("rank two gives up")
    dist.all_reduce(tensor)
''')


@pytest.fixture(scope="session")
def userjob_runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The FSDP2 and DDP examples, the features script (its output kept by ``--logs``) and a
    failing script, each run once on 4 gloo ranks under ``collviz run --headless --observe --record``."""
    folder = tmp_path_factory.mktemp("userjob")
    features, failing = folder / "features.py", folder / "failing.py"
    features.write_text(FEATURES)
    failing.write_text(FAILING)
    runs = {
        "fsdp": _record(folder, "fsdp", ROOT / "examples" / "fsdp_train.py", *_options(FSDP_ARGS)),
        "ddp": _record(folder, "ddp", ROOT / "examples" / "ddp_train.py", *_options(DDP_ARGS)),
        "features": _record(folder, "features", features, str(folder), options=("--logs", str(folder / "logs"))),
        "failing": _record(folder, "failing", failing),
    }
    runs["logs"] = folder / "logs"
    runs["times"] = {rank: json.loads((folder / f"times{rank}.json").read_text()) for rank in range(RANKS)
                     if (folder / f"times{rank}.json").exists()}
    return runs


def _ok(runs: dict, name: str) -> list:
    result, trace = runs[name]
    assert result.returncode == 0, f"{name} failed:\n{result.stdout[-3000:]}\n{result.stderr}"
    return trace.events


def _calls(events: list, rank: int) -> list[Collective]:
    return [e for e in events if isinstance(e, Collective) and e.rank == rank and e.edge == "end"]


def _steps(events: list, rank: int) -> dict[int, str]:
    return {e.index: e.name for e in events if isinstance(e, Phase) and e.rank == rank and e.edge == "begin"}


# ---- FSDP2 ---------------------------------------------------------------------------------------


def _fsdp_units(dim: int, layers: int, world: int) -> tuple[list[int], int]:
    """Each FSDP2 unit's shard (elements per rank: every parameter cut on dim 0, padded to a
    multiple of the world size) for the example's model built here; and the root unit's index."""
    model = _example("fsdp_train").build_model(dim, layers)

    def shard(parameters) -> int:
        return sum(math.ceil(p.shape[0] / world) * math.prod(p.shape[1:]) for p in parameters)

    units = [shard(block.parameters()) for block in model[:-1]] + [shard(model[-1].parameters())]
    return units, len(units) - 1


def test_fsdp_steps_hold_the_all_gathers_and_reduce_scatters_the_model_implies(userjob_runs):
    events = _ok(userjob_runs, "fsdp")
    units, root = _fsdp_units(FSDP_ARGS["dim"], FSDP_ARGS["layers"], RANKS)
    # forward gathers every unit; backward gathers again every unit but the root (FSDP2 keeps the
    # root's parameters after forward); every unit's gradients are reduce-scattered once
    gathers = Counter(units) + Counter(size for index, size in enumerate(units) if index != root)
    scatters = Counter(size * RANKS for size in units)
    for rank in range(RANKS):
        steps = _steps(events, rank)
        assert list(steps.values()) == [f"train step {k}" for k in range(FSDP_ARGS["steps"])]
        by_step = defaultdict(list)
        for call in _calls(events, rank):
            by_step[call.phase].append(call)
        for index in steps:
            calls = by_step[index]
            assert Counter(c.count for c in calls if c.op == "all_gather") == gathers
            assert Counter(c.count for c in calls if c.op == "reduce_scatter") == scatters
            assert {c.op for c in calls} == {"all_gather", "reduce_scatter"}  # nothing else: no extra collectives
            for call in calls:
                assert call.group == "0 (default_pg)" and call.group_ranks == [0, 1, 2, 3] and call.dtype == "float32"
                assert call.bytes_in == 4 * call.count
                assert call.bytes_out == (RANKS * call.bytes_in if call.op == "all_gather" else call.bytes_in // RANKS)
                assert call.duration_ns > 0 and call.clock == "host"


def test_fsdp_run_ends_ok_and_says_what_it_did_not_capture(userjob_runs):
    events = _ok(userjob_runs, "fsdp")
    start = next(e for e in events if isinstance(e, RunStart))
    assert start.scenario == "fsdp_train.py" and start.world_size == RANKS
    assert "values, provenance and transfers not captured" in start.example
    assert start.options[NOT_RECORDED_OPTION] == NOT_CAPTURED
    assert "picks its own backend" in start.backend_reason
    assert sorted((e.rank, e.device, e.backend) for e in events if isinstance(e, RankStart)) == [
        (r, "cpu", "gloo") for r in range(RANKS)]
    assert next(e for e in events if isinstance(e, RunEnd)).status == "ok"
    assert all(e.status == "ok" for e in events if isinstance(e, RankEnd))
    summary = userjob_runs["fsdp"][0].stdout
    assert "train step 1" in summary and "reduce_scatter" in summary and "transfers not captured" in summary


def test_fsdp_memory_counts_the_watched_shards(userjob_runs):
    events = _ok(userjob_runs, "fsdp")
    units, _ = _fsdp_units(FSDP_ARGS["dim"], FSDP_ARGS["layers"], RANKS)
    shard_bytes = 4 * sum(units)  # FSDP2's parameters are each rank's padded shards
    for rank in range(RANKS):
        samples = [e for e in events if isinstance(e, Memory) and e.rank == rank]
        assert [m.phase for m in samples] == list(_steps(events, rank))
        for sample in samples:  # AdamW: two moment buffers per parameter (and a step count each)
            assert sample.source == "watched"
            assert sample.by_category["params"] == shard_bytes
            assert 2 * shard_bytes <= sample.by_category["optimizer state"] <= 2 * shard_bytes + 8 * 64


def test_a_steps_memory_follows_its_end_and_no_later_steps_event_comes_before_it(userjob_runs):
    events = _ok(userjob_runs, "fsdp")
    for rank in range(RANKS):
        mine = sorted((e for e in events if e.rank == rank), key=lambda e: e.seq)
        phases = [e.phase for e in mine if isinstance(e, (Collective, Memory))]
        assert phases == sorted(phases)
        for before, event in zip(mine, mine[1:]):
            if isinstance(event, Memory):
                assert isinstance(before, Phase) and (before.edge, before.index) == ("end", event.phase)


# ---- DDP -----------------------------------------------------------------------------------------


def test_ddp_all_reduces_every_gradient_once_a_step(userjob_runs):
    events = _ok(userjob_runs, "ddp")
    model = _example("ddp_train").build_model(DDP_ARGS["dim"], DDP_ARGS["layers"])
    total = sum(p.numel() for p in model.parameters())  # under DDP's first bucket (1 MiB): one all-reduce
    for rank in range(RANKS):
        steps = _steps(events, rank)
        names = list(steps.values())
        first = names.index("train step 0")
        assert names[first:] == [f"train step {k}" for k in range(DDP_ARGS["steps"])]
        calls = _calls(events, rank)
        before = [c for c in calls if c.phase < first]
        assert any(c.op == "broadcast" and c.count == total and c.dtype == "float32" for c in before), \
            "DDP broadcasts rank 0's parameters when it wraps the model"
        for index in list(steps)[first:]:
            reduced = [c for c in calls if c.phase == index and c.op == "all_reduce"]
            assert [(c.count, c.dtype, c.group) for c in reduced] == [(total, "float32", "0 (default_pg)")]
            assert reduced[0].duration_ns > 0
        # outside steps, each call is a step of its own
        assert [len([c for c in calls if c.phase == index]) for index in list(steps)[:first]] == [1] * first


# ---- the observer's edge cases -------------------------------------------------------------------


def test_features_steps_subgroups_inference_mode_and_exit_zero(userjob_runs):
    events = _ok(userjob_runs, "features")
    for rank in range(RANKS):
        steps = _steps(events, rank)
        world = "on group 0 (default_pg)"
        assert list(steps.values()) == [f"all_reduce #1 {world}", f"barrier #2 {world}", "first", "second", "timed"]
        calls = _calls(events, rank)
        by_step = {index: [(c.op, c.count, c.dtype, tuple(c.group_ranks)) for c in calls if c.phase == index]
                   for index in steps}
        pair = (0, 1) if rank < 2 else (2, 3)
        assert by_step[2] == [("all_reduce", 16, "float32", (0, 1, 2, 3))]
        assert by_step[3] == [("all_gather", 3, "float64", pair), ("all_reduce", 2, "int64", (0, 1, 2, 3))]
    labels = {c.group for c in _calls(events, 0) + _calls(events, 2) if c.op == "all_gather"}
    assert labels == {"1", "2"}, "each pair by torch's name for it (new_group gives no description)"


def test_each_ranks_events_keep_phase_order_even_when_a_call_outlives_its_step(userjob_runs):
    events = _ok(userjob_runs, "features")
    for rank in range(RANKS):
        mine = sorted((e for e in events if e.rank == rank), key=lambda e: e.seq)
        phases = [e.phase for e in mine if isinstance(e, Collective)]
        assert phases == sorted(phases)
        ended: set[int] = set()
        for event in mine:
            if isinstance(event, Phase) and event.edge == "end":
                ended.add(event.index)
            if isinstance(event, Collective):
                assert event.phase not in ended, "a step's end comes after every call in it"


def test_sync_calls_take_no_longer_than_the_scripts_own_clock_says(userjob_runs):
    events = _ok(userjob_runs, "features")
    assert sorted(userjob_runs["times"]) == list(range(RANKS))
    for rank, own in userjob_runs["times"].items():
        timed_step = next(index for index, name in _steps(events, rank).items() if name == "timed")
        durations = [c.duration_ns for c in _calls(events, rank) if c.phase == timed_step]
        assert len(durations) == len(own) == 3
        for seen, measured in zip(durations, own):
            # a sync call ends where torch.distributed's own wait on it returns: inside the
            # script's window around the call
            assert 0 < seen <= measured


def test_logs_keeps_each_ranks_own_output_in_its_file(userjob_runs):
    _ok(userjob_runs, "features")
    logs = userjob_runs["logs"]
    assert sorted(path.name for path in logs.glob("rank*.log")) == [f"rank{rank}.log" for rank in range(RANKS)]
    for rank in range(RANKS):
        lines = [line for line in (logs / f"rank{rank}.log").read_text().splitlines() if line.startswith("features:")]
        assert sorted(lines) == [f"features: rank {rank} says so on stderr", f"features: rank {rank} says so on stdout"]


def test_watched_memory_is_the_models_bytes(userjob_runs):
    events = _ok(userjob_runs, "features")
    samples = [e for e in events if isinstance(e, Memory) and e.rank == 0]
    assert [m.label for m in samples] == ["step end"] * 3
    assert samples[0].by_category["params"] == 4 * (4 * 4 + 4)  # Linear(4, 4): weight and bias, float32
    assert samples[0].by_category["grads"] == 4 * (4 * 4 + 4)
    assert samples[0].live_bytes == sum(samples[0].by_category.values())


# ---- failures and mistakes -----------------------------------------------------------------------


def test_a_failing_script_names_the_rank_and_its_error(userjob_runs):
    result, trace = userjob_runs["failing"]
    assert result.returncode == 1, result.stderr
    cause = next(line for line in result.stderr.splitlines() if line.startswith("collviz: rank "))
    assert cause.startswith("collviz: rank 2 failed") and "RuntimeError: rank two gives up (at failing.py:9)" in cause
    end = next(e for e in trace.events if isinstance(e, RunEnd))
    assert end.status == "failed" and "rank 2" in end.detail
    assert "its stderr ended" not in cause, "the error is the traceback's, which the cause already names"
    # the rank's own traceback reaches the terminal prefixed, as under torchrun; collviz adds none of its own
    assert "[rank2]: Traceback (most recent call last):" in result.stderr.splitlines()
    assert not any(line.startswith("Traceback") for line in result.stderr.splitlines())


@pytest.mark.parametrize("args, expected", [
    (["run", "--nproc", "4", "no-such-script.py"], "no-such-script.py: no such file"),
    (["run", "--nproc", "4", "README.md"], "README.md: not a Python script"),
    (["run", "--nproc", "4", "examples"], "examples: not a Python script"),
    (["run", "--nproc", "0", "examples/ddp_train.py"], "--nproc 0: must be between 1 and 64"),
    (["run", "--nproc", "2", "all-reduce"], "all-reduce: not a Python script"),
    (["run", "--viewer", "tcp://127.0.0.1:5555", "examples/ddp_train.py"], "--viewer runs under torchrun"),
    (["run", "--secret-file", "s", "examples/ddp_train.py"], "--secret-file goes with --viewer"),
    (["run", "--logs", "README.md", "examples/ddp_train.py"], "--logs README.md: exists and is not a folder"),
])
def test_bad_targets_are_one_line(capsys, monkeypatch, args, expected):
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("RANK", raising=False)
    status = main(args)
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and err.startswith("collviz: error: ") and expected in err


def test_a_script_that_does_not_compile_is_refused_before_any_rank_starts(capsys, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def train(:\n    pass\n")
    assert main(["run", "--nproc", "4", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{broken}:1: not Python that compiles" in err


def test_marks_do_nothing_outside_collviz():
    with collviz.step("anything") as mark:
        collviz.watch(object())  # not even checked: nothing is watching
    assert mark is not None


from support.processes import free_port  # noqa: E402 - a free port whose successor is free too


# ---- under torchrun, streaming to a viewer -------------------------------------------------------


def test_torchrun_ranks_of_a_script_stream_to_a_listening_viewer(tmp_path):
    env = {**os.environ, "COLLVIZ_SECRET": "collviz-test-secret-0123456789"}
    port, trace = free_port(), tmp_path / "torchrun.cvz"
    viewer = subprocess.Popen(
        [sys.executable, "-m", "collviz.app.cli", "view", "--listen", f"127.0.0.1:{port}", "--headless",
         "--record", str(trace)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ranks = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "collviz.app.cli", "run", "--viewer", f"tcp://127.0.0.1:{port}",
         str(ROOT / "examples" / "ddp_train.py"), "--steps", "2", "--dim", "16", "--layers", "2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = ranks.communicate(timeout=240)
        assert ranks.returncode == 0, output
        assert "step 1: loss" in output, "the script's own output goes to torchrun's terminal"
        viewer.communicate(timeout=60)
    finally:
        ranks.kill()
        viewer.kill()
    assert viewer.returncode == 0
    events = read_trace(trace).events
    start = next(e for e in events if isinstance(e, RunStart))
    assert start.scenario == "ddp_train.py" and start.world_size == 2
    total = 2 * (16 * 16 + 16)
    for rank in (0, 1):
        reduced = [c for c in _calls(events, rank) if c.op == "all_reduce"]
        assert [(c.count, c.group_ranks) for c in reduced] == [(total, [0, 1])] * 2


# ---- the per-call path's pieces ------------------------------------------------------------------


def test_signatures_say_where_each_op_takes_its_group_and_async_flag():
    # positions read off the ops' schemas as torch documents them, e.g.
    # c10d::allreduce_(Tensor[] tensors, ProcessGroup process_group, ReduceOp reduce_op, Tensor? sparse_indices,
    #                  bool async_op=True, int timeout=-1)
    expected = {"allreduce_": (1, 4), "_allgather_base_": (2, 3), "_reduce_scatter_base_": (2, 4), "barrier": (1, 3),
                "broadcast_": (1, 4), "allgather_coalesced_": (2, 3)}
    for name, (group_at, async_at) in expected.items():
        assert c10d_signature(getattr(torch.ops.c10d, name).default) == C10dSignature(group_at, async_at), name
    allreduce = C10dSignature(1, 4)
    assert c10d_async(("tensors", "group", "op", None), allreduce)  # async_op=True is dropped as a default
    assert not c10d_async(("tensors", "group", "op", None, False), allreduce)
    assert c10d_async(("tensors", "group", "op", None, True), allreduce)
    assert c10d_async(("tensors", "group"), C10dSignature(1, None))


class _FakeWork:
    """A Work that completes when told to (or fails), for the completion thread."""

    def __init__(self, fails: bool = False) -> None:
        self.done = threading.Event()
        self.fails = fails

    def is_completed(self) -> bool:
        return self.done.is_set()


def _fake_wait(work: _FakeWork) -> None:
    work.done.wait(10)
    if work.fails:
        raise RuntimeError("a peer died")


def test_the_completion_thread_stamps_every_call_once_in_issue_order_and_failures_untimed():
    stamped: list[tuple[str, bool, int]] = []
    reported = threading.Event()

    def completed(ended, now_ns):
        stamped.extend((call, ok, now_ns) for call, ok in ended)
        if len(stamped) == 4:
            reported.set()

    stamper = CompletionStamper(_fake_wait, completed)
    stamper.start()
    works = {name: _FakeWork(fails=name == "c") for name in "abcd"}
    stamper.add(works["a"], "a")
    stamper.add(works["b"], "b")  # issued while the thread waits on a: queued, no wake needed
    time.sleep(0.05)
    works["b"].done.set()
    works["c"].done.set()  # b completes before a: stamped with a, by the same wake
    stamper.add(works["c"], "c")
    before_a = time.monotonic_ns()
    works["a"].done.set()
    time.sleep(0.05)
    stamper.add(works["d"], "d")  # the thread is idle now: this wakes it
    works["d"].done.set()
    assert reported.wait(5)
    stamper.stop()
    assert [(call, ok) for call, ok, _ in stamped] == [("a", True), ("b", True), ("c", False), ("d", True)]
    a_time, b_time, c_time, d_time = (now for _, _, now in stamped)
    assert before_a <= a_time == b_time == c_time < d_time
