"""The GPU tier (``pytest -m gpu``): every scenario on NCCL at 2 and 4 ranks on whatever GPUs there
are (ranks share GPUs when there are fewer, each with its own NCCL host id, over NCCL's socket
transport), each checked against the same scenario on gloo, plus bench's table read by its real
format, ``--memory-viz``, desync, a hang and its blame, a dead rank, Ctrl-C and the viewer on an
NCCL fsdp trace.

Skipped, saying why, where NVML sees no GPU (this module never touches CUDA itself: the runs are
``collviz`` child processes, and GPUs are counted through NVML as the launcher counts them).

Sized for the 300 s per-test timeout: each test records only the runs it reads (at most two CLI
runs), through one module-wide cache, so a test never pays for another's runs.

Where NCCL's semantics differ from gloo's, NCCL's are checked: a reduce leaves a non-root's
buffer as it was (gloo leaves partial sums there); an average is checked against the mean of the
recorded inputs (NCCL averages natively, gloo sums then divides). Tolerances: exact for integers,
rtol 1e-6 for float32 (reduction order), 1e-2 for 16-bit floats. Training: losses to 1e-5; every
rank's own gradient to 1e-5 relative to the largest element; parameters after AdamW to 5e-4, since
Adam divides a gradient by its own running magnitude, so an element whose gradient is near zero
on both (attention key biases) moves by a full step of either sign from a rounding difference.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from collviz.runtime.observation.nvml import gpu_count
from collviz.runtime.reports.bench_table import parse_table
from collviz.runtime.wire.protocol import Buffer, Check, Collective, RunEnd, RunStart
from collviz.runtime.wire.trace import TraceContents, read_trace

from support.cli import run_cli
from support.scenarios import COLLECTIVE_SCENARIOS


GPUS = gpu_count()
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(GPUS == 0, reason="no GPU visible through NVML: the GPU tier needs one")]

TRAINING = ("ring-all-reduce", "ddp", "fsdp", "hsdp", "fsdp-tp", "tp", "moe", "pp")
RANKS = (2, 4)
RUN_TIMEOUT_S = 240
"""One CLI run's limit: two of them fit a test's 300 s only if each is far quicker, as they are."""

Recorded = Callable[..., TraceContents]


def _needs(name: str, ranks: int) -> str | None:
    """Why ``name`` does not run on ``ranks`` ranks (None: it does)."""
    if name in ("hsdp", "fsdp-tp") and ranks < 4:
        return "needs 4 ranks (a 2 × 2 mesh)"
    return None


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """``recorded(name, backend, ranks, *options)``: that run's trace, recorded the first time a
    test asks for it (a failed run fails the test that asked, with its output)."""
    folder = tmp_path_factory.mktemp("gpu")
    cache: dict[tuple, TraceContents] = {}

    def record(name: str, backend: str, ranks: int, *options: str) -> TraceContents:
        key = (name, backend, ranks, options)
        if key not in cache:
            path = folder / f"{len(cache)}-{name}-{backend}-{ranks}.cvz"
            result = run_cli(name, "--gpus", str(ranks), "--backend", backend, "--headless", *options,
                             "--record", str(path), timeout=RUN_TIMEOUT_S)
            assert result.returncode == 0, f"{name} {options} on {backend} × {ranks}:\n{result.stdout[-3000:]}\n{result.stderr}"
            cache[key] = read_trace(path)
        return cache[key]

    return record


def _buffers(trace: TraceContents, moments: tuple[str, ...]) -> dict[tuple[int, str], Buffer]:
    return {(b.rank, b.name): b for b in trace.events if isinstance(b, Buffer) and b.moment in moments}


def _rel(dtype: str) -> float:
    return 1e-2 if dtype in ("float16", "bfloat16") else 1e-6


def _start(trace: TraceContents) -> RunStart:
    return next(e for e in trace.events if isinstance(e, RunStart))


@pytest.mark.parametrize("ranks", RANKS)
@pytest.mark.parametrize("name", COLLECTIVE_SCENARIOS)
def test_every_collective_on_nccl_equals_gloo_with_nccls_own_semantics_and_is_timed(recorded, name, ranks):
    nccl, gloo = recorded(name, "nccl", ranks), recorded(name, "gloo", ranks)
    start = _start(nccl)
    assert start.backend == "nccl" and start.device_kind == "cuda"
    if ranks > GPUS:
        assert f"{ranks} ranks share" in start.backend_reason and "not NVLink" in start.backend_reason
    got, want = _buffers(nccl, ("after", "result")), _buffers(gloo, ("after", "result"))
    before = _buffers(nccl, ("before",))
    assert got.keys() == want.keys()
    root = int(start.options.get("root", 0))
    for (rank, buffer_name), buffer in want.items():
        assert got[(rank, buffer_name)].shape == buffer.shape, (rank, buffer_name)
        if buffer.values is None:
            continue
        expected = buffer.values
        if name == "reduce" and rank != root:  # NCCL leaves a non-root's buffer as it was
            expected = before[(rank, buffer_name)].values
        assert got[(rank, buffer_name)].values == pytest.approx(expected, rel=_rel(buffer.dtype)), (rank, buffer_name)
    ends = [c for c in nccl.events if isinstance(c, Collective) and c.edge == "end"]
    assert ends and all(c.duration_ns and c.duration_ns > 0 for c in ends)
    assert next(e for e in nccl.events if isinstance(e, RunEnd)).status == "ok"


@pytest.mark.parametrize("name", ["all-reduce", "reduce-scatter"])
def test_an_average_on_nccl_is_the_mean_of_the_ranks_inputs(recorded, name):
    ranks = 4
    trace = recorded(name, "nccl", ranks, "--op", "avg", "--size", "4KiB")
    inputs = {b.rank: b.values for b in trace.events if isinstance(b, Buffer) and b.moment == "before"
              and b.role in ("input", "inout")}
    mean = [sum(values[i] for values in inputs.values()) / ranks for i in range(len(inputs[0]))]
    after = {b.rank: b for b in trace.events if isinstance(b, Buffer) and b.moment == "after"}
    assert sorted(after) == list(range(ranks))
    for rank, buffer in after.items():
        part = len(mean) // ranks
        expected = mean if name == "all-reduce" else mean[rank * part:(rank + 1) * part]
        assert buffer.values == pytest.approx(expected, rel=1e-6), rank


@pytest.mark.parametrize("ranks", RANKS)
@pytest.mark.parametrize("name", TRAINING)
def test_every_training_scenario_on_nccl_matches_gloo(recorded, name, ranks):
    if _needs(name, ranks):
        pytest.skip(_needs(name, ranks))
    nccl, gloo = recorded(name, "nccl", ranks), recorded(name, "gloo", ranks)
    checks = [c for c in nccl.events if isinstance(c, Check)]
    assert checks and all(c.ok for c in checks), [c for c in checks if not c.ok]
    got, want = _buffers(nccl, ("after", "result")), _buffers(gloo, ("after", "result"))
    compared = 0
    for key, buffer in want.items():
        if key not in got or buffer.values is None:
            continue
        compared += 1
        if key[1] == "loss":
            assert got[key].values == pytest.approx(buffer.values, rel=1e-5), key
        elif "grad" in key[1]:
            largest = max(abs(v) for v in buffer.values) or 1.0
            assert got[key].values == pytest.approx(buffer.values, abs=1e-5 * largest), key
        else:
            assert got[key].values == pytest.approx(buffer.values, abs=5e-4), key
    assert compared, "no buffer of the gloo run was found in the NCCL run"


@pytest.mark.parametrize("name", ["fsdp", "hsdp", "fsdp-tp", "tp", "moe", "ddp"])
def test_training_collectives_have_their_own_gpu_time(recorded, name):
    """Every collective inside torch's code is timed on the GPU (CUDA events on its stream, the
    synchronous calls that return no Work included), so the cost pane shows the call's own time
    and busbw, not the phase's."""
    trace = recorded(name, "nccl", 4)
    ends = [c for c in trace.events if isinstance(c, Collective) and c.edge == "end" and c.op != "barrier"]
    assert ends
    assert all(c.clock == "gpu" and c.duration_ns and c.duration_ns > 0 for c in ends), \
        [(c.op, c.clock, c.duration_ns) for c in ends if c.clock != "gpu" or not c.duration_ns][:5]


def test_fsdp_on_nccl_shows_block_0s_all_gather_with_its_time_and_busbw_in_the_cost_pane(recorded):
    from collviz.app.model import EventLog, costs_at

    log = EventLog(recorded("fsdp", "nccl", 4).events)
    step = next(i for i, phase in log.phases.items() if phase.name == "block 0 forward: all-gather")
    costs, _ = costs_at(log, len(log), step)
    (gather,) = [c for c in costs if c.op == "all_gather"]
    assert gather.timed == "call" and gather.seconds and gather.rate is not None and gather.rate.busbw > 0


def test_bench_on_nccl_prints_checked_rows_with_ncclls_own_algorithm_and_protocol():
    result = run_cli("bench", "all-reduce", "--gpus", "2", "--backend", "nccl", "--sizes", "1K:64K", "--iters", "3",
                     "--warmup", "1", timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    rows = parse_table(result.stdout)
    assert [row.size for row in rows] == [1024 * 2**k for k in range(7)], result.stdout
    assert all(row.op == "all_reduce" and row.wrong == 0 and row.time_us > 0 for row in rows), result.stdout
    # nccl-tests' figures from the row's own size and time, at the table's 3 decimals (on an H200, 2
    # ranks sharing it took 4.8 ms a call, so the smallest sizes print busbw 0.000: 2026-11-28)
    for row in rows:
        algbw = row.size / (row.time_us * 1e-6) / 1e9
        assert row.algbw_gbps == pytest.approx(algbw, abs=6e-4) and \
            row.busbw_gbps == pytest.approx(algbw * 2 * (2 - 1) / 2, abs=6e-4), row
    assert all(row.nccl for row in rows), result.stdout  # NCCL's TUNING lines were read for every size


def test_memory_viz_writes_each_ranks_cuda_snapshot_with_the_gathered_buffer(tmp_path):
    """``--memory-viz``: each rank's snapshot is torch's (segments, device traces) and holds the
    allocation of the all-gather's 2 × 1 MiB output."""
    import pickle

    folder = tmp_path / "mv"
    result = run_cli("all-gather", "--gpus", "2", "--backend", "nccl", "--size", "1MiB", "--headless",
                     "--memory-viz", str(folder), timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    for rank in range(2):
        snapshot = pickle.loads((folder / f"rank{rank}.pickle").read_bytes())
        assert {"segments", "device_traces"} <= set(snapshot), rank
        allocs = [entry for trace in snapshot["device_traces"] for entry in trace if entry.get("action") == "alloc"]
        assert any(entry["size"] >= 2 * 2**20 for entry in allocs), (rank, [entry["size"] for entry in allocs])


def test_desync_on_nccl_names_the_odd_rank():
    desync = run_cli("desync", "--gpus", "4", "--backend", "nccl", "--headless", timeout=RUN_TIMEOUT_S)
    assert desync.returncode == 1 and "rank 2 called all_gather" in desync.stderr, desync.stderr


def test_a_hang_on_nccl_blames_the_rank_that_never_arrived_not_the_waiters_nccl_aborts():
    started = time.monotonic()
    hang = run_cli("hang", "--gpus", "4", "--backend", "nccl", "--headless", "--timeout", "10", timeout=RUN_TIMEOUT_S)
    assert hang.returncode == 1, hang.stderr
    assert "rank 2 never arrived" in hang.stderr, hang.stderr
    [final] = [line for line in hang.stderr.splitlines() if line.startswith("collviz: hang caused by")]
    assert final.startswith("collviz: hang caused by rank 2: "), final
    assert "; consequence: rank " in final and time.monotonic() - started < RUN_TIMEOUT_S


@pytest.mark.parametrize("how", ["dead rank", "ctrl-c"])
def test_a_dead_rank_or_ctrl_c_on_nccl_leaves_no_process_and_a_readable_trace(tmp_path: Path, how):
    from support.processes import alive, wait_for_collectives

    trace = tmp_path / "long.cvz"
    proc = subprocess.Popen([sys.executable, "-m", "collviz.app.cli", "all-reduce", "--gpus", "4", "--backend", "nccl",
                             "--size", "4MiB", "--iters", "100000", "--headless", "--record", str(trace)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    pids = wait_for_collectives(trace, proc, timeout_s=200)
    if how == "dead rank":
        os.kill(pids[2], signal.SIGKILL)
    else:
        proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == (1 if how == "dead rank" else 130), err
    if how == "dead rank":
        assert "rank 2 was killed by SIGKILL" in err, err
    time.sleep(1)
    assert not any(alive(pid) for pid in pids.values())
    assert next(e for e in read_trace(trace).events if isinstance(e, RunEnd)).status in ("failed", "interrupted")


async def test_the_viewer_shows_an_nccl_fsdp_calls_gpu_time_and_busbw(recorded):
    """The viewer replaying an NCCL fsdp run, at block 0's forward all-gather: the cost pane gives
    that call's own GPU time and busbw, not the phase's time."""
    from collviz.app.app import make_app
    from collviz.app.widgets import CostPane

    app = make_app(events=recorded("fsdp", "nccl", 4).events)
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
