"""The GPU tier (``pytest -m gpu``): every scenario on NCCL at 2 and 4 ranks on whatever GPUs there
are (ranks share GPUs when there are fewer, each with its own NCCL host id), each checked against
the same scenario on gloo, plus bench with NCCL's own report, desync, a hang, a dead rank, Ctrl-C
and the viewer on an NCCL fsdp trace.

Skipped, saying why, where NVML sees no GPU (this module never touches CUDA itself: the runs are
``collviz`` child processes, and GPUs are counted through NVML as the launcher counts them).

Tolerances: a collective's result on NCCL against gloo's on the same inputs: exact for integers,
rtol 1e-6 for floats (NCCL's reduction order differs from gloo's). Training: losses to 1e-5; every
rank's own gradient to 1e-5 relative to the largest element; parameters after AdamW to 5e-4, since
Adam divides a gradient by its own running magnitude, so an element whose gradient is near zero
on both (attention key biases) moves by a full step of either sign from a rounding difference.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from collviz.runtime.observation.nvml import gpu_count
from collviz.runtime.wire.protocol import Buffer, Check, Collective, RunEnd, RunStart
from collviz.runtime.wire.trace import TraceContents, read_trace
from conftest import COLLECTIVE_SCENARIOS, run_cli

GPUS = gpu_count()
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(GPUS == 0, reason="no GPU visible through NVML: the GPU tier needs one")]

TRAINING = ("ring-all-reduce", "ddp", "fsdp", "hsdp", "fsdp-tp", "tp", "moe", "pp")
RANKS = (2, 4)


def _needs(name: str, ranks: int) -> str | None:
    """Why ``name`` does not run on ``ranks`` ranks (None: it does)."""
    if name in ("hsdp", "fsdp-tp") and ranks < 4:
        return "needs 4 ranks (a 2 × 2 mesh)"
    return None


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, int], TraceContents]:
    """Every scenario on NCCL and on gloo at each rank count, recorded once."""
    folder = tmp_path_factory.mktemp("gpu")
    traces = {}
    for ranks in RANKS:
        for name in (*COLLECTIVE_SCENARIOS, *TRAINING):
            if _needs(name, ranks):
                continue
            for backend in ("nccl", "gloo"):
                path = folder / f"{name}-{backend}-{ranks}.cvz"
                result = run_cli(name, "--gpus", str(ranks), "--backend", backend, "--headless", "--record", str(path),
                                 timeout=600)
                assert result.returncode == 0, f"{name} on {backend} × {ranks}:\n{result.stdout[-3000:]}\n{result.stderr}"
                traces[(name, backend, ranks)] = read_trace(path)
    return traces


def _after(trace: TraceContents) -> dict[tuple[int, str], Buffer]:
    return {(b.rank, b.name): b for b in trace.events if isinstance(b, Buffer) and b.moment in ("after", "result")}


@pytest.mark.parametrize("ranks", RANKS)
@pytest.mark.parametrize("name", COLLECTIVE_SCENARIOS)
def test_every_collective_on_nccl_equals_gloo_and_is_timed(runs, name, ranks):
    nccl, gloo = runs[(name, "nccl", ranks)], runs[(name, "gloo", ranks)]
    start = next(e for e in nccl.events if isinstance(e, RunStart))
    assert start.backend == "nccl" and start.device_kind == "cuda"
    if ranks > GPUS:
        assert f"{ranks} ranks share" in start.backend_reason and "not NVLink" in start.backend_reason
    got, want = _after(nccl), _after(gloo)
    assert got.keys() == want.keys()
    for key, buffer in want.items():
        assert got[key].shape == buffer.shape, key
        if buffer.values is not None:
            assert got[key].values == pytest.approx(buffer.values, rel=1e-6), key
    ends = [c for c in nccl.events if isinstance(c, Collective) and c.edge == "end"]
    assert ends and all(c.duration_ns and c.duration_ns > 0 for c in ends)
    assert next(e for e in nccl.events if isinstance(e, RunEnd)).status == "ok"


@pytest.mark.parametrize("ranks", RANKS)
@pytest.mark.parametrize("name", TRAINING)
def test_every_training_scenario_on_nccl_matches_gloo(runs, name, ranks):
    if _needs(name, ranks):
        pytest.skip(_needs(name, ranks))
    nccl, gloo = runs[(name, "nccl", ranks)], runs[(name, "gloo", ranks)]
    assert all(c.ok for c in nccl.events if isinstance(c, Check)), [c for c in nccl.events if isinstance(c, Check)]
    got, want = _after(nccl), _after(gloo)
    for key, buffer in want.items():
        if key not in got or buffer.values is None:
            continue
        if key[1] == "loss":
            assert got[key].values == pytest.approx(buffer.values, rel=1e-5), key
        elif "grad" in key[1]:
            largest = max(abs(v) for v in buffer.values) or 1.0
            assert got[key].values == pytest.approx(buffer.values, abs=1e-5 * largest), key
        else:
            assert got[key].values == pytest.approx(buffer.values, abs=5e-4), key


@pytest.mark.parametrize("name", ["fsdp", "hsdp", "fsdp-tp", "tp", "moe", "ddp"])
def test_training_collectives_have_their_own_gpu_time(runs, name):
    """Every collective inside torch's code is timed on the GPU (CUDA events on its stream), so
    the cost pane shows the call's own time and busbw, not the phase's."""
    trace = runs[(name, "nccl", 4)]
    ends = [c for c in trace.events if isinstance(c, Collective) and c.edge == "end" and c.op != "barrier"]
    assert ends
    assert all(c.clock == "gpu" and c.duration_ns and c.duration_ns > 0 for c in ends), \
        [(c.op, c.clock, c.duration_ns) for c in ends if c.clock != "gpu" or not c.duration_ns][:5]


def test_fsdp_on_nccl_shows_block_0s_all_gather_with_its_time_and_busbw_in_the_cost_pane(runs):
    from collviz.app.model import EventLog, costs_at

    trace = runs[("fsdp", "nccl", 4)]
    log = EventLog(trace.events)
    step = next(i for i, phase in log.phases.items() if phase.name == "block 0 forward: all-gather")
    costs, _ = costs_at(log, len(log), step)
    (gather,) = [c for c in costs if c.op == "all_gather"]
    assert gather.timed == "call" and gather.seconds and gather.rate is not None and gather.rate.busbw > 0


def test_bench_on_nccl_prints_ncclls_own_algorithm_and_protocol_per_size():
    result = run_cli("bench", "all-reduce", "--gpus", "2", "--backend", "nccl", "--sizes", "1K:64K", "--iters", "3",
                     "--warmup", "1", timeout=600)
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.lstrip()[:1].isdigit()]
    assert rows and all("NCCL: " in row for row in rows), result.stdout


def test_memory_viz_writes_each_ranks_cuda_snapshot_with_the_gathered_buffer(tmp_path):
    """``--memory-viz``: each rank's snapshot is torch's (segments, device traces) and holds the
    allocation of the all-gather's 2 × 1 MiB output."""
    import pickle

    folder = tmp_path / "mv"
    result = run_cli("all-gather", "--gpus", "2", "--backend", "nccl", "--size", "1MiB", "--headless",
                     "--memory-viz", str(folder), timeout=300)
    assert result.returncode == 0, result.stderr
    for rank in range(2):
        snapshot = pickle.loads((folder / f"rank{rank}.pickle").read_bytes())
        assert {"segments", "device_traces"} <= set(snapshot), rank
        allocs = [entry for trace in snapshot["device_traces"] for entry in trace if entry.get("action") == "alloc"]
        assert any(entry["size"] >= 2 * 2**20 for entry in allocs), (rank, [entry["size"] for entry in allocs])


def test_desync_and_hang_on_nccl_name_the_odd_rank():
    desync = run_cli("desync", "--gpus", "4", "--backend", "nccl", "--headless", timeout=300)
    assert desync.returncode == 1 and "rank 2 called all_gather" in desync.stderr
    hang = run_cli("hang", "--gpus", "4", "--backend", "nccl", "--headless", timeout=300)
    assert hang.returncode == 1 and "rank 2 never arrived" in hang.stderr


@pytest.mark.parametrize("how", ["dead rank", "ctrl-c"])
def test_a_dead_rank_or_ctrl_c_on_nccl_leaves_no_process_and_a_readable_trace(tmp_path, how):
    from test_failures import _alive, _wait_for_collectives

    trace = tmp_path / "long.cvz"
    proc = subprocess.Popen([sys.executable, "-m", "collviz.app.cli", "all-reduce", "--gpus", "4", "--backend", "nccl",
                             "--size", "4MiB", "--iters", "100000", "--headless", "--record", str(trace)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    pids = _wait_for_collectives(trace, proc, timeout_s=300)
    if how == "dead rank":
        import os

        os.kill(pids[2], signal.SIGKILL)
    else:
        proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == (1 if how == "dead rank" else 130)
    time.sleep(1)
    assert not any(_alive(pid) for pid in pids.values())
    assert next(e for e in read_trace(trace).events if isinstance(e, RunEnd)).status in ("failed", "interrupted")


async def test_the_viewer_shows_an_nccl_fsdp_calls_gpu_time_and_busbw(runs):
    """The viewer replaying an NCCL fsdp run, at block 0's forward all-gather: the cost pane gives
    that call's own GPU time and busbw, not the phase's time."""
    from collviz.app.app import make_app
    from collviz.app.widgets import CostPane

    source = runs[("fsdp", "nccl", 4)]
    app = make_app(events=source.events)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("home")
        for _ in range(200):
            if app.current_view().phase_name == "block 0 forward: all-gather":
                break
            await pilot.press("right")
        await pilot.pause(0.2)
        shown = str(app.screen.query_one(CostPane)._shown)
        assert "all_gather" in shown and "busbw = algbw" in shown and "GPU" in shown, shown
        assert "phase" not in shown.split("t = ", 1)[1].splitlines()[0], shown
        await pilot.press("q")
