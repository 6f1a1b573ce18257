"""Every tensor a scenario hands to a collective is made on the rank's planned device: checked on
gloo by :class:`device_check.DeviceCheck` in every worker of every scenario (NCCL refuses a CPU
tensor, gloo takes it, so only this check shows the mistake before a GPU run), and the check
itself unit-tested against a fake planned device. Likewise CUDA's lack of an integer matrix
product, for the worked example's follow-up."""

from __future__ import annotations

import json
import time

import pytest
import torch
import torch.distributed as dist

import collviz.runtime.sessions.local as local
from collviz.runtime.plan import plan_run
from collviz.runtime.programs.algorithms.plans import ALGORITHMS
from collviz.runtime.programs.bench import bench_scenario, build_bench
from collviz.runtime.programs.devices import rank_tensor
from collviz.runtime.scenario_files.loading import find_scenario
from collviz.runtime.programs.program import RunOptions
from collviz.runtime.sessions.contract import RunOutcome
from collviz.runtime.sessions.local import LocalSession
from collviz.runtime.wire.protocol import Buffer
from collviz.runtime.wire.trace import read_trace

from support.bare_job import py_spy_dump
from support.device_check import DeviceCheck, MisplacedTensor, NoIntegerMatmul


COLLECTIVES = ("broadcast", "reduce", "all-reduce", "gather", "all-gather", "scatter", "reduce-scatter", "all-to-all")
TRAINING = ("ring-all-reduce", "tp", "ddp", "fsdp", "hsdp", "fsdp-tp", "moe", "pp")


def test_the_check_refuses_a_tensor_off_the_planned_device(one_rank_group):
    with DeviceCheck(torch.device("meta")) as check, pytest.raises(MisplacedTensor, match="on cpu, not on the planned meta"):
        dist.all_reduce(torch.ones(4, device="cpu"))
    assert check.checked == 1


def test_the_check_refuses_a_tensor_made_without_naming_a_device(one_rank_group):
    with DeviceCheck(torch.device("cpu"), code=(__file__,)) as check:
        dist.all_reduce(torch.ones(4, device="cpu"))
        dist.all_reduce(torch.ones(4).to("cpu"))
        dist.all_reduce(rank_tensor(torch.device("cpu"), torch.int64, shape=3))
        with pytest.raises(MisplacedTensor, match=r"made without naming a device"):
            dist.all_reduce(torch.zeros(4, dtype=torch.int64)[1:])
    assert check.checked == 4


def test_rank_tensor_takes_values_or_a_shape_on_the_device_it_is_given():
    made = rank_tensor(torch.device("meta"), torch.int64, shape=(2, 3), fill=7)
    assert made.device.type == "meta" and made.shape == (2, 3) and made.dtype == torch.int64
    assert rank_tensor(torch.device("cpu"), torch.float32, values=[[1, 2]]).tolist() == [[1.0, 2.0]]
    with pytest.raises(ValueError, match="either values or a shape"):
        rank_tensor(torch.device("cpu"), torch.float32)


launch_worker = local.worker_main
"""The real worker, which the wrappers below run (the tests put a wrapper in its place)."""


def _checked_worker(config, rank, local_rank=None):
    """The real worker, with every c10d op checked against the rank's planned device (gloo: cpu)."""
    with DeviceCheck(torch.device("cpu")):
        launch_worker(config, rank, local_rank)


def _run(plan) -> RunOutcome:
    """The run of ``plan`` to its end; one still running after 240 s (seen once under a soak's
    load, hsdp at 4 ranks: it takes 3–6 s) is stopped, and where each rank then stood is printed
    (py-spy), so the failure says what the ranks waited for."""
    session = LocalSession(plan)
    session.start()
    deadline = time.monotonic() + 240
    while not session.finished and time.monotonic() < deadline:
        session.poll(0.05)
    if not session.finished:
        for rank, pid in sorted(session.pids.items()):
            status, threads = py_spy_dump(pid)
            print(f"rank {rank} (pid {pid}), py-spy exit {status}:", json.dumps(threads, indent=1)[:6000])
        session.stop()
    assert session.outcome is not None
    return session.outcome


def _cases() -> list[tuple[str, object]]:
    cases: list[tuple[str, object]] = [(name, RunOptions()) for name in COLLECTIVES]
    cases += [(f"{name} --algo", RunOptions(algo=ALGORITHMS[name.replace("-", "_")][0])) for name in COLLECTIVES]
    cases += [(name, RunOptions()) for name in TRAINING]
    return cases


@pytest.mark.parametrize("name, options", _cases(), ids=[name for name, _ in _cases()])
def test_every_scenario_hands_collectives_tensors_on_its_planned_device(monkeypatch, name, options):
    monkeypatch.setattr(local, "worker_main", _checked_worker)
    scenario = find_scenario(name.removesuffix(" --algo"))
    outcome = _run(plan_run(scenario, 4, backend="gloo", options=options))
    assert outcome.status == "ok", outcome.detail


def test_bench_hands_collectives_tensors_on_its_planned_device(monkeypatch):
    monkeypatch.setattr(local, "worker_main", _checked_worker)
    program = build_bench(list(ALGORITHMS), [4096], 4, iters=1, warmup=0)
    outcome = _run(plan_run(bench_scenario(), 4, backend="gloo", program=program))
    assert outcome.status == "ok", outcome.detail


def _cuda_like_worker(config, rank, local_rank=None):
    """The real worker, with integer matrix products refused as CUDA refuses them."""
    with NoIntegerMatmul():
        launch_worker(config, rank, local_rank)


def test_the_worked_examples_follow_up_in_an_integer_dtype_needs_no_integer_matmul(monkeypatch, tmp_path):
    monkeypatch.setattr(local, "worker_main", _cuda_like_worker)
    trace = tmp_path / "int.cvz"
    outcome = _run(plan_run(find_scenario("all-gather"), 4, backend="gloo", options=RunOptions(dtype="int64"),
                            record=trace))
    assert outcome.status == "ok", outcome.detail
    events = read_trace(trace).events
    gathered = next(e for e in events if isinstance(e, Buffer) and e.rank == 0 and e.name == "gathered"
                    and e.moment == "after")
    scenario = find_scenario("all-gather")
    right = torch.tensor(scenario.followup.right, dtype=torch.int64)
    expected = torch.tensor(gathered.values, dtype=torch.int64).reshape(gathered.shape) @ right.T
    result = next(e for e in events if isinstance(e, Buffer) and e.rank == 0 and e.name == scenario.followup.name)
    assert result.dtype == "int64" and result.values == expected.reshape(-1).tolist()
