"""torch.profiler traces opened as collviz runs: sizes, groups and times of a real CPU job's calls,
the documented NCCL trace's kernel times, damaged values, and the forms torch 1.13 and 2.0 wrote.

The CPU traces are real (the ``job_artifacts`` fixture's healthy job, 4 gloo ranks, with each call's
wall time as the job measured it); the GPU traces are written here from torch's documentation and
Holistic Trace Analysis' test data (no GPU here to record one).
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from collviz.runtime.reports.summary import render_summary
from collviz.runtime.sources import open_artifacts
from collviz.runtime.wire.protocol import Collective, RunStart

from support import artifact_jobs as jobs
from support.artifact_imports import WORLD_GROUP, gpu_trace, only


def test_profiler_traces_give_sizes_groups_and_times(job_artifacts):
    folder = job_artifacts["healthy"]
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


def test_gpu_profiler_traces_take_each_calls_kernel_time(tmp_path):
    for rank in range(2):
        (tmp_path / f"gpu_{rank}.json").write_text(json.dumps(gpu_trace(rank)))
    run = open_artifacts([tmp_path])
    assert run.exit_status == 0 and not run.warnings
    ends = [e for e in run.events if isinstance(e, Collective) and e.edge == "end"]
    found = {(e.rank, e.op): (e.dtype, e.count, e.bytes_in, e.bytes_out, e.duration_ns, e.group) for e in ends}
    for rank in range(2):
        assert found[(rank, "all_reduce")] == ("bfloat16", 4096, 8192, 8192, (80 + rank) * 1000, WORLD_GROUP)
        assert found[(rank, "all_gather")] == ("bfloat16", 1024, 2048, 4096, (40 + rank) * 1000, WORLD_GROUP)
    assert "not verified here (no GPU)" in only(run.events, RunStart)[0].description


def test_impossible_values_in_a_trace_are_damaged_input_and_busbw_takes_the_calls_group(tmp_path):
    """Two ranks of a 4-rank job on their own 2-rank group: rank 0's all-reduce kernel has a negative
    duration (shown untimed, never as 1 ns), a third call claims 10^30 elements (left out); the
    all-gather's busbw takes the factor of 2 ranks, (n−1)/n = 1/2, not the job's 3/4."""
    for rank in range(2):
        trace = gpu_trace(rank)
        trace["distributedInfo"]["world_size"] = 4
        events = trace["traceEvents"]
        if rank == 0:
            next(e for e in events if e["name"].startswith("ncclDevKernel_AllReduce"))["dur"] = -80.0
        huge = json.loads(json.dumps(events[0]))
        huge["args"].update({"External id": 12, "In msg nelems": 10**30, "Out msg nelems": 10**30})
        events.append(huge)
        (tmp_path / f"gpu_{rank}.json").write_text(json.dumps(trace))
    run = open_artifacts([tmp_path])
    ends = {(e.rank, e.op): e for e in only(run.events, Collective) if e.edge == "end"}
    assert ends[(0, "all_reduce")].duration_ns is None and ends[(1, "all_reduce")].duration_ns == 81_000
    assert sorted(ends) == [(0, "all_gather"), (0, "all_reduce"), (1, "all_gather"), (1, "all_reduce")]
    text = "\n".join(run.warnings)
    assert "rank 0: 1 calls with a zero, negative or impossible duration (shown untimed): damaged input" in text
    assert "rank 1: 1 calls with a size beyond any device (left out): damaged input" in text
    summary = render_summary(run.events)
    assert "busbw = algbw × (n−1)/n = 1/2 = 0.5" in summary and "3/4" not in summary
    assert "time (per rank): r1 0.081 ms\n" in summary  # rank 0's damaged time is not shown as one


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
    for event in only(run.events, Collective):
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
