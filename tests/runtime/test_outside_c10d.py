"""Collectives a profiler trace records outside torch.distributed (:mod:`collviz.runtime.sources.outside_c10d`),
on a real vLLM trace of a B200 job (tests/fixtures/profiler_outside_c10d/README.md: every figure
below is read from the file by hand)."""

from __future__ import annotations

import json

import pytest

from collviz.runtime.errors import UsageError
from collviz.runtime.sources import open_artifacts
from collviz.runtime.wire.protocol import Collective

from support.paths import FIXTURES

TRACE = FIXTURES / "profiler_outside_c10d" / "b200-vllm-rank0.json"
LISTED = ("rank 0: 73 collective calls made outside torch.distributed (custom all-reduce or symmetric memory: no "
          "process group to match them across ranks, so no step): multimem_all_reduce_kernel ×73 (2.120 ms)")


def test_a_vllm_traces_symmetric_memory_all_reduces_are_listed_with_their_time():
    run = open_artifacts([TRACE])
    assert run.exit_status == 0
    assert run.warnings == [LISTED, "no trace of ranks 1–7 (8 in the job)"]
    [end] = [e for e in run.events if isinstance(e, Collective) and e.edge == "end"]
    assert (end.op, end.group, end.dtype, end.count, end.bytes_in, end.bytes_out, end.duration_ns) == (
        "all_gather", "3", "bfloat16", 25_136, 50_272, 402_176, 21_953)


def test_without_kernels_the_cpu_operators_are_listed_and_a_trace_of_only_those_is_refused_saying_so(tmp_path):
    trace = json.loads(TRACE.read_text())
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e["name"].startswith("symm_mem::")]
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(trace))
    with pytest.raises(UsageError) as refused:
        open_artifacts([path])
    assert str(refused.value) == (
        f"{path}: the traces hold no collective calls (c10d:: slices or record_param_comms rows); they hold 73 "
        "collective calls made outside torch.distributed (custom all-reduce or symmetric memory), which no process "
        "group matches across ranks")


@pytest.mark.parametrize("kernel, shown", [
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, "
     "__nv_bfloat16*, int, int)", "vllm::cross_device_reduce_1stage"),
    ("void sglang::cross_device_reduce_2stage<__half, 8>(sglang::RankData*)", "sglang::cross_device_reduce_2stage"),
    ("void c10d::symmetric_memory::two_shot_all_reduce_kernel<float, 8>(float*)",
     "c10d::symmetric_memory::two_shot_all_reduce_kernel"),
])
def test_custom_all_reduce_kernels_are_named_without_their_template(tmp_path, kernel, shown):
    trace = json.loads(TRACE.read_text())
    gather = [e for e in trace["traceEvents"] if "symm_mem" not in e["name"] and "multimem" not in e["name"]]
    trace["traceEvents"] = gather + [{"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7,
                                      "ts": 1365627950000.0 + 100 * n, "dur": 12.5} for n in range(2)]
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(trace))
    run = open_artifacts([path])
    assert run.warnings[0].endswith(f"so no step): {shown} ×2 (0.025 ms)")


@pytest.mark.parametrize("kernel", ["ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)",
                                    "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"])
def test_a_generic_kernel_that_names_no_op_times_its_call_by_external_id(tmp_path, kernel):
    """NCCL's kernel for what it has no specialised kernel of (``ncclDevKernel_Generic``, NVIDIA/nccl
    src/device/common.cu) and RCCL's on AMD GPUs (``…_Generic_1``) name no operation: the B200
    trace's all_gather kernel renamed so is still its call's time, by its External id (21.953 µs)."""
    trace = json.loads(TRACE.read_text())
    for event in trace["traceEvents"]:
        if event["name"].startswith("ncclDevKernel_AllGather"):
            event["name"] = kernel
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(trace))
    run = open_artifacts([path])
    [end] = [e for e in run.events if isinstance(e, Collective) and e.edge == "end"]
    assert (end.op, end.duration_ns) == ("all_gather", 21_953)
    assert run.warnings == [LISTED, "no trace of ranks 1–7 (8 in the job)"]
