"""The run plan and the backend table: which row a run takes, where each rank runs, what the banner
says, and what a plan refuses — for GPU counts this machine does not have (``gpus=`` stands in for
NVML's count), so the choices a GPU machine makes are checked here too."""

from __future__ import annotations

from pathlib import Path

import pytest

from collviz.runtime.backends import BACKEND_NAMES, BACKENDS, choose_backend, script_backend
from collviz.runtime.errors import UsageError
from collviz.runtime.wire.protocol import NvmlMemory
from collviz.runtime.plan import MAX_RANKS, MemoryNeed, RunPlan, plan_run
from collviz.runtime.scenario_files.loading import find_scenario


def test_backend_names_are_the_tables():
    assert BACKEND_NAMES == ("auto", "nccl", "gloo")
    assert [row.name for row in BACKENDS] == ["nccl", "nccl-shared", "gloo"]


@pytest.mark.parametrize("gpus, ranks, row", [
    (0, 4, "gloo"),
    (4, 4, "nccl"),
    (8, 4, "nccl"),
    (1, 4, "nccl-shared"),
    (2, 4, "nccl-shared"),
    (3, 8, "nccl-shared"),
])
def test_auto_takes_nccl_whenever_a_gpu_is_visible(gpus, ranks, row):
    assert choose_backend("auto", ranks, gpus=gpus).row.name == row


def test_ranks_share_gpus_round_robin_each_with_its_own_host_id(monkeypatch):
    monkeypatch.delenv("NCCL_SOCKET_IFNAME", raising=False)
    choice = choose_backend("auto", 4, gpus=1)
    assert choice.backend == "nccl" and choice.device_kind == "cuda"
    placements = [choice.placement(rank) for rank in range(4)]
    assert [p.device_index for p in placements] == [0, 0, 0, 0]
    host_ids = [p.environment["NCCL_HOSTID"] for p in placements]
    assert len(set(host_ids)) == 4
    assert all(p.environment["NCCL_SOCKET_IFNAME"] == "lo" for p in placements)
    assert choice.ranks_on_device(0) == 4
    assert "4 ranks share 1 GPU: NCCL over its socket transport, not NVLink" in choice.reason
    assert "not a 4-GPU machine's" in choice.reason

    two = choose_backend("auto", 8, gpus=3)
    assert [two.placement(rank).device_index for rank in range(8)] == [0, 1, 2, 0, 1, 2, 0, 1]
    assert [two.ranks_on_device(index) for index in range(3)] == [3, 3, 2]


def test_ranks_sharing_a_gpu_use_the_socket_transport_the_banner_names(monkeypatch):
    monkeypatch.delenv("NCCL_NET", raising=False)
    shared = choose_backend("auto", 4, gpus=1)
    assert {shared.placement(rank).environment["NCCL_NET"] for rank in range(4)} == {"Socket"}
    assert "NCCL over its socket transport" in shared.reason
    monkeypatch.setenv("NCCL_NET", "IB")
    chosen = choose_backend("auto", 4, gpus=1)
    assert "NCCL_NET" not in chosen.placement(0).environment
    assert "NCCL over NCCL_NET=IB, not NVLink" in chosen.reason and "socket" not in chosen.reason


@pytest.mark.parametrize("gpus, ranks, local_ranks", [
    (1, 4, [0, 0, 0, 0]),
    (2, 4, [0, 1, 0, 1]),
    (4, 4, [0, 1, 2, 3]),
    (0, 4, [0, 1, 2, 3]),
])
def test_a_script_with_more_ranks_than_gpus_gets_a_local_rank_naming_a_gpu_and_its_own_host_id(
        monkeypatch, gpus, ranks, local_ranks):
    monkeypatch.delenv("NCCL_NET", raising=False)
    choice = script_backend(ranks, gpus=gpus)
    assert [choice.local_rank(rank) for rank in range(ranks)] == local_ranks
    assert all(index < max(gpus, ranks) for index in local_ranks)
    host_ids = [choice.placement(rank).environment.get("NCCL_HOSTID") for rank in range(ranks)]
    if 0 < gpus < ranks:
        assert choice.row.shares_gpus and len(set(host_ids)) == ranks
        assert "4 ranks share" in choice.reason
    else:
        assert host_ids == [None] * ranks


def test_a_scripts_ranks_see_torchruns_variables_with_local_rank_naming_their_shared_gpu(tmp_path, monkeypatch):
    from collviz.runtime.plan import plan_script, worker_config
    from collviz.runtime.userjob.script import check_script
    from collviz.runtime.wire.transport import Endpoints
    from collviz.runtime.worker import torchrun_environment

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    plan = plan_script(check_script(script), 4, gpus=2)
    config = worker_config(plan, run="r", init_method="tcp://127.0.0.1:29500", endpoints=Endpoints.in_directory(str(tmp_path)))
    environments = [torchrun_environment(config, rank) for rank in range(4)]
    assert [e["LOCAL_RANK"] for e in environments] == ["0", "1", "0", "1"]
    assert [e["RANK"] for e in environments] == ["0", "1", "2", "3"]
    assert {e["LOCAL_WORLD_SIZE"] for e in environments} == {"4"}


def test_a_chosen_socket_interface_and_machines_beyond_this_one_are_left_alone(monkeypatch):
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth0")
    assert "NCCL_SOCKET_IFNAME" not in choose_backend("auto", 4, gpus=1).placement(2).environment
    monkeypatch.delenv("NCCL_SOCKET_IFNAME")
    across = choose_backend("auto", 2, gpus=1, one_machine=False)
    assert "NCCL_SOCKET_IFNAME" not in across.placement(5, local_rank=1).environment
    assert across.placement(5, local_rank=1).environment["NCCL_HOSTID"].endswith("rank5")


def test_one_gpu_per_rank_and_gloo_need_no_environment():
    one_each = choose_backend("auto", 4, gpus=4)
    assert [one_each.placement(r).device_index for r in range(4)] == [0, 1, 2, 3]
    assert all(not one_each.placement(r).environment for r in range(4))
    gloo = choose_backend("gloo", 4, gpus=4)
    assert gloo.device_kind == "cpu" and gloo.placement(3).device_index is None and gloo.gpus == 0
    assert gloo.reason == "gloo on CPU (--backend gloo)"
    assert choose_backend("auto", 4, gpus=0).reason == "gloo on CPU: no GPU is visible"


def test_nccl_without_a_gpu_and_an_unknown_backend_are_one_line_errors():
    with pytest.raises(UsageError, match="--backend nccl needs a GPU, but none is visible"):
        choose_backend("nccl", 2, gpus=0)
    assert choose_backend("nccl", 4, gpus=1).row.name == "nccl-shared"  # no longer refused
    with pytest.raises(UsageError, match="choose auto, nccl or gloo"):
        choose_backend("mpi", 2, gpus=0)


def test_plan_run_builds_and_validates_the_whole_plan(tmp_path: Path):
    scenario = find_scenario("all-reduce")
    plan = plan_run(scenario, backend="gloo", timeout_s=5, record=tmp_path / "t.cvz")
    assert plan.world_size == scenario.default_gpus and plan.program.phase_count > 0
    assert plan.backend.ranks == plan.world_size and plan.banner == "gloo on CPU (--backend gloo)"
    with pytest.raises(UsageError, match=f"--gpus {MAX_RANKS + 1}: must be between 1 and {MAX_RANKS}"):
        plan_run(scenario, MAX_RANKS + 1, backend="gloo")
    with pytest.raises(UsageError, match="--timeout 0.5"):
        plan_run(scenario, 2, backend="gloo", timeout_s=0.5)
    with pytest.raises(ValueError, match="backend chosen for 2 ranks, run has 4"):
        RunPlan(scenario=scenario, world_size=4, backend=choose_backend("gloo", 2), program=plan.program)
    assert not plan_run(scenario, 2, backend="gloo", nccl_tuning=True).nccl_tuning  # only NCCL prints tuning


def test_the_memory_check_uses_each_gpus_free_memory_shared_among_its_ranks(monkeypatch):
    free_per_gpu = {0: 10 << 30, 1: 1 << 30}
    monkeypatch.setattr("collviz.runtime.observation.nvml.device_memory",
                        lambda index: NvmlMemory(used=(80 << 30) - free_per_gpu[index], total=80 << 30))
    scenario = find_scenario("all-reduce")
    # 4 ranks on 2 GPUs: 2 ranks on each; GPU 1 has 1 GiB free, 80 % of it is 819.2 MiB
    need = MemoryNeed("--size 100MiB on 4 ranks", 100 << 20, 4)  # 400 MiB per rank, 800 MiB per GPU
    plan_run(scenario, 4, gpus=2, memory=need)
    too_big = MemoryNeed("--size 128MiB on 4 ranks", 128 << 20, 4)  # 512 MiB per rank, 1 GiB on GPU 1
    with pytest.raises(UsageError, match="on GPU 1 \\(2 ranks × 128 MiB × 4 buffers\\) but 1 GiB of it is free"):
        plan_run(scenario, 4, gpus=2, memory=too_big)


def test_the_memory_check_on_cpu_uses_what_is_available(monkeypatch):
    monkeypatch.setattr("collviz.runtime.plan.available_memory", lambda: 1 << 30)
    with pytest.raises(UsageError, match="needs about 2 GiB \\(4 ranks × 128 MiB × 4 buffers\\) but 1 GiB"):
        plan_run(find_scenario("all-reduce"), 4, backend="gloo", memory=MemoryNeed("x", 128 << 20, 4))
