"""The eight collectives on 4 real gloo ranks: values, provenance, transfers, bandwidth, memory.

Expected values come from tests/support/reference.py (plain torch.distributed, no collviz) on inputs the
test builds itself from the scenario files or the documented generation rule.
"""

from __future__ import annotations

import math

import tomllib

import pytest
import torch

from collviz.runtime.programs.collectives import buffers_per_rank, make_output, resolve_spec
from collviz.runtime.scenario_files.loading import find_scenario
from collviz.runtime.wire.protocol import Buffer, Check, Collective, Freed, Memory, RunEnd, Transfer
from collviz.runtime.wire.trace import read_trace

from support.cli import run_cli
from support.paths import SCENARIOS
from support.reference import run_reference
from support.scenarios import COLLECTIVE_SCENARIOS


N = 4
OUTPUT_OF = {"gather": "gathered", "all_gather": "gathered", "scatter": "shard",
             "reduce_scatter": "reduced_shard", "all_to_all": "received"}


def _flatten(nested) -> list:
    if isinstance(nested, list):
        return [x for item in nested for x in _flatten(item)]
    return [nested]


def case_for(name: str) -> tuple:
    """(name, op, per-rank flat inputs, dtype, root, reduce_op) for a 4-rank run, built here."""
    data = tomllib.loads((SCENARIOS / f"{name}.toml").read_text())
    op = data["collective"]
    root = data.get("root", 0)
    example = next((e for e in data.get("example", []) if e["gpus"] == N), None)
    reduce_op = (example or {}).get("reduce_op") or data.get("reduce_op") or "sum"
    one_source = op in ("broadcast", "scatter")
    if example is not None:
        inputs = [_flatten(x) for x in example["inputs"]]
    else:
        count = 2 * N
        inputs = [[r * count + i + 1 for i in range(count)] for r in range(N)]
    if one_source:
        inputs = [inputs[root] if r == root else ([0] * len(inputs[root]) if op == "broadcast" else []) for r in range(N)]
    return name, op, inputs, data.get("dtype", "float32"), root, reduce_op


@pytest.fixture(scope="session")
def reference() -> dict:
    """Plain torch.distributed results for all eight cases, one 4-rank run."""
    return run_reference([case_for(name) for name in COLLECTIVE_SCENARIOS], N)


def _buffers(trace, moment: str) -> dict[tuple[int, str], Buffer]:
    return {(e.rank, e.name): e for e in trace.events if isinstance(e, Buffer) and e.moment == moment}


@pytest.mark.parametrize("name", COLLECTIVE_SCENARIOS)
def test_inputs_and_results_match_plain_torch_distributed(name, collective_traces, reference):
    trace = collective_traces[name]
    _, op, inputs, dtype, root, _ = case_for(name)
    before = _buffers(trace, "before")
    after = _buffers(trace, "after")
    input_name = next(b.name for b in before.values() if b.role in ("input", "inout"))
    for rank in range(N):
        if inputs[rank]:
            torch.testing.assert_close(
                torch.tensor(before[(rank, input_name)].values, dtype=getattr(torch, dtype)),
                torch.tensor(inputs[rank], dtype=getattr(torch, dtype)),
            )
        expected = reference[name][rank]
        result_name = OUTPUT_OF.get(op, input_name)
        if expected is None:
            assert (rank, result_name) not in after, f"rank {rank} should have no {result_name}"
            continue
        recorded = after[(rank, result_name)]
        torch.testing.assert_close(
            torch.tensor(recorded.values, dtype=getattr(torch, dtype)),
            torch.tensor(expected, dtype=getattr(torch, dtype)),
            msg=lambda m: f"{name} rank {rank}: {m}",
        )
    assert next(e for e in trace.events if isinstance(e, RunEnd)).status == "ok"


def test_reduce_on_gloo_leaves_partial_results_and_provenance_explains_them(collective_traces, reference):
    """Non-destination ranks really hold partial sums; each element's provenance names the ranks
    whose inputs add up to it."""
    _, _, inputs, _, root, _ = case_for("reduce")
    after = _buffers(collective_traces["reduce"], "after")
    changed = 0
    for rank in range(N):
        buffer = after[(rank, "x")]
        assert buffer.values == reference["reduce"][rank]
        for run in buffer.provenance:
            for i in range(run.start, run.start + run.length):
                assert buffer.values[i] == sum(inputs[r][i] for r in run.ranks)
        if rank != root and buffer.values != inputs[rank]:
            changed += 1
    assert changed > 0, "gloo left every non-destination buffer unchanged: the partial-sum case is not exercised"


def test_provenance_all_gather_chunk_i_comes_from_rank_i(collective_traces):
    after = _buffers(collective_traces["all-gather"], "after")
    for rank in range(N):
        runs = after[(rank, "gathered")].provenance
        chunk = after[(rank, "gathered")].shape[-1] * after[(rank, "gathered")].shape[0] // N
        assert [(r.start, r.length, r.ranks) for r in runs] == [(i * chunk, chunk, [i]) for i in range(N)]


def test_provenance_all_reduce_every_element_from_all_ranks(collective_traces):
    after = _buffers(collective_traces["all-reduce"], "after")
    for rank in range(N):
        buffer = after[(rank, "grad")]
        numel = len(buffer.values)
        assert [(r.start, r.length, r.ranks) for r in buffer.provenance] == [(0, numel, list(range(N)))]


def test_provenance_reduce_scatter_chunk_from_all_ranks(collective_traces):
    after = _buffers(collective_traces["reduce-scatter"], "after")
    for rank in range(N):
        buffer = after[(rank, "reduced_shard")]
        assert all(run.ranks == list(range(N)) for run in buffer.provenance)
        assert sum(run.length for run in buffer.provenance) == len(buffer.values)


def test_all_gather_followup_computes_queries_from_the_gathered_matrix(collective_traces):
    """Rank 0 multiplies the gathered W_query by the three input embeddings, for real."""
    data = tomllib.loads((SCENARIOS / "all-gather.toml").read_text())
    example = next(e for e in data["example"] if e["gpus"] == N)
    w_query = torch.tensor([row for shard in example["inputs"] for row in shard], dtype=torch.float32)
    embeddings = torch.tensor(data["followup"]["right"], dtype=torch.float32)
    result = _buffers(collective_traces["all-gather"], "result")
    queries = result[(0, data["followup"]["name"])]
    assert queries.shape == [4, 3]
    torch.testing.assert_close(torch.tensor(queries.values).reshape(4, 3), w_query @ embeddings.T)
    assert not any(rank != 0 for rank, _ in result)
    # the note's printed queries are shown beside torch's, and the check says whether they agree
    printed = torch.tensor(data["followup"]["note_result"], dtype=torch.float64)
    differ = int(((printed - (w_query @ embeddings.T).double()).abs() > 0.0051).sum())
    shown = result[(0, f"{data['followup']['name']} as {data['followup']['note_source']} prints them")]
    assert shown.values == printed.reshape(-1).tolist()
    (check,) = [c for c in collective_traces["all-gather"].events
                if isinstance(c, Check) and c.name.startswith(data["followup"]["note_source"])]
    assert check.ok is (differ == 0) and (differ == 0 or check.detail.startswith("a common slip: "))
    assert differ == 0, "the shipped lesson's worked queries agree with torch's"
    assert check.name == "the lesson's queries" and ".md" not in check.detail


def test_reduce_scatter_names_each_parameter_and_the_part_each_rank_keeps(collective_traces):
    data = tomllib.loads((SCENARIOS / "reduce-scatter.toml").read_text())
    names = next(e for e in data["example"] if e["gpus"] == N)["names"]
    trace = collective_traces["reduce-scatter"]
    before, after = _buffers(trace, "before"), _buffers(trace, "after")
    inputs = next(e for e in data["example"] if e["gpus"] == N)["inputs"]
    sums = [math.fsum(inputs[r][part] for r in range(N)) for part in range(N)]
    assert len({round(total, 6) for total in sums}) == N, "every part's sum differs, so the screen shows who kept which"
    for rank in range(N):
        assert before[(rank, "grad")].labels == names
        assert after[(rank, "reduced_shard")].labels == [names[rank]]  # rank r keeps part r
        assert after[(rank, "reduced_shard")].values == pytest.approx([sums[rank]], rel=1e-6)


@pytest.mark.parametrize("name", COLLECTIVE_SCENARIOS)
def test_logical_transfers_bring_each_received_element_from_its_sources(name, collective_traces):
    trace = collective_traces[name]
    after = _buffers(trace, "after")
    transfers = [e for e in trace.events if isinstance(e, Transfer)]
    assert transfers and all(t.kind == "logical" and t.dst == t.rank for t in transfers)
    for t in transfers:
        buffer = after[(t.dst, t.buffer)]
        covered = [run for run in buffer.provenance if run.start < t.start + t.length and t.start < run.start + run.length]
        assert covered and all(t.src in run.ranks for run in covered)
        itemsize = torch.empty((), dtype=getattr(torch, buffer.dtype)).element_size()
        assert t.bytes == t.length * itemsize


# nccl-tests (doc/PERFORMANCE.md): S and the busbw factor, written out independently per op.
def _expected_algo_bytes(op: str, count: int, itemsize: int) -> int:
    per_rank = count * itemsize
    return {
        "all_reduce": per_rank, "broadcast": per_rank, "reduce": per_rank, "all_to_all": per_rank,
        "all_gather": per_rank * N, "gather": per_rank * N,
        "reduce_scatter": per_rank, "scatter": per_rank,  # per-rank output (count/N) × N
    }[op]


@pytest.mark.parametrize("name", COLLECTIVE_SCENARIOS)
def test_collective_events_carry_nccl_tests_algorithm_size_and_timing(name, collective_traces):
    trace = collective_traces[name]
    _, op, inputs, dtype, root, _ = case_for(name)
    ends = [e for e in trace.events if isinstance(e, Collective) and e.edge == "end"]
    assert sorted(e.rank for e in ends) == list(range(N))
    itemsize = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    count = len(inputs[root]) if op in ("broadcast", "scatter") else len(inputs[0])
    for e in ends:
        assert e.op == op and e.group_ranks == list(range(N)) and e.group_seq == 1  # from #1, as imports number
        assert e.duration_ns > 0
        assert e.algo_bytes == _expected_algo_bytes(op, count, itemsize)


def test_bus_factors_follow_nccl_tests():
    from collviz.runtime.observation.metrics import bandwidth, bus_factor

    for n in (2, 3, 4, 8):
        assert float(bus_factor("all_reduce", n)) == pytest.approx(2 * (n - 1) / n)
        for op in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
            assert float(bus_factor(op, n)) == pytest.approx((n - 1) / n)
        for op in ("broadcast", "reduce"):
            assert bus_factor(op, n) == 1
    bw = bandwidth("all_reduce", 4, 1_000_000, 0.001)
    assert bw.algbw == pytest.approx(1e9) and bw.busbw == pytest.approx(1.5e9)
    assert "2(n−1)/n" in bw.formula


@pytest.fixture(scope="session")
def big_all_gather(traces_dir):
    path = traces_dir / "all-gather-16MiB.cvz"
    result = run_cli("all-gather", "--gpus", "4", "--backend", "gloo", "--size", "16MiB", "--headless", "--record", str(path))
    assert result.returncode == 0, result.stderr
    return read_trace(path)


def test_memory_rises_by_the_gathered_size_and_falls_back(big_all_gather):
    gathered = 4 * 16 * 1024 * 1024  # 4 ranks × 16 MiB each, float32
    for rank in range(N):
        memory = {m.label: m for m in big_all_gather.events if isinstance(m, Memory) and m.rank == rank}
        base = memory["inputs allocated"].live_bytes
        assert base >= 16 * 1024 * 1024
        assert memory["output allocated"].live_bytes - base == gathered
        assert memory["gathered freed"].live_bytes == base
        assert memory["gathered freed"].peak_bytes >= base + gathered
        assert memory["W_query_shard freed"].live_bytes == base - 16 * 1024 * 1024
    freed = sorted((e.rank, e.name, e.bytes) for e in big_all_gather.events if isinstance(e, Freed))
    assert freed == sorted([(r, "gathered", gathered) for r in range(N)] +
                           [(r, "W_query_shard", 16 * 1024 * 1024) for r in range(N)])
    large = [b for b in big_all_gather.events if isinstance(b, Buffer) and b.name == "gathered" and b.moment == "after"]
    assert all(b.values is None and b.summary is not None for b in large)
    first_rank_values = 4 * 1024 * 1024  # generated: element i of rank r is r·count + i + 1
    assert all(b.summary.min == 1 and b.summary.max == N * first_rank_values for b in large)
    peaks = [m.peak_bytes for m in big_all_gather.events if isinstance(m, Memory)]
    assert max(peaks) <= buffers_per_rank("all_gather", N) * 16 * 1024 * 1024  # the plan's memory check holds


@pytest.mark.parametrize("name", COLLECTIVE_SCENARIOS)
def test_the_memory_check_counts_the_largest_output_a_rank_allocates(name):
    """``buffers_per_rank`` (what ``--size`` is multiplied by before a run) leaves room for the
    output ``make_output`` really allocates on every rank: world size × the input for a gather."""
    spec = resolve_spec(find_scenario(name), N, size_bytes=4096)
    outputs = [make_output(spec, rank, N, torch.device("cpu")) for rank in range(N)]
    largest = max(0 if out is None else out.numel() for out in outputs)
    gathers = spec.op in ("gather", "all_gather")
    assert largest == (N * spec.count if gathers else spec.count if spec.op == "all_to_all" else
                       0 if spec.op in ("broadcast", "reduce", "all_reduce") else spec.count // N)
    assert buffers_per_rank(spec.op, N) == 4 + (N if gathers else 1)


def test_summary_says_device_figures_are_not_available_on_cpu(collective_traces):
    from collviz.runtime.reports.summary import render_summary

    text = render_summary(collective_traces["all-reduce"].events)
    assert "memory: exact live tensor bytes from the storage tracker; CUDA allocator N/A; NVML N/A" in text
    assert "algbw = S/t" in text and "busbw = algbw × 2(n−1)/n = 2·3/4 = 1.5" in text


def test_summary_shows_device_figures_when_present():
    from collviz.runtime.wire.protocol import CudaMemory, NvmlMemory
    from collviz.runtime.reports.summary import render_summary

    gib = 1024**3
    memory = [
        Memory(run="r", rank=0, seq=i, t_ns=i, phase=0, label="x", live_bytes=1, peak_bytes=1,
               cuda=CudaMemory(allocated=1, reserved=2, max_allocated=(i + 1) * gib),
               nvml=NvmlMemory(used=(i + 2) * gib, total=80 * gib))
        for i in range(2)
    ]
    text = render_summary(memory)
    assert "CUDA allocator peak 2 GiB; NVML device used up to 3 GiB of 80 GiB" in text
