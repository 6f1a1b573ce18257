"""The NCCL version, shown once in the summary's run line wherever the source knows it: an NCCL
log's ``NCCL version`` line, a Flight Recorder dump's ``comm_lib_version`` (format 2.10) or
``nccl_version`` (formats 2.4 to 2.9), a profiler trace's ``distributedInfo.nccl_version``, and
collviz's own runs on CUDA (torch's ``torch.cuda.nccl.version()``). A source without one (gloo's
dumps, a CPU torch) shows none.

Expected versions are read by hand from the fixtures: ``job-4ranks.log``'s line 13
(``NCCL version 2.21.5+cuda12.4``), the B200 trace's ``distributedInfo`` (``"nccl_version": "2.27.5"``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from collviz.runtime.plan import nccl_version, plan_run, run_start_fields
from collviz.runtime.reports.summary import render_summary
from collviz.runtime.scenario_files.loading import find_scenario
from collviz.runtime.sources import open_artifacts
from collviz.runtime.wire.protocol import RunStart

from support.artifact_imports import NCCL_LOG
from support.fr_dumps import dump, entry
from support.paths import FIXTURES

B200_TRACE = FIXTURES / "profiler_outside_c10d" / "b200-vllm-rank0.json"


def _run_line(summary: str) -> str:
    """The summary's line naming the run (``run … · torch … · …``)."""
    [line] = [line for line in summary.splitlines() if line.startswith("run ")]
    return line


def _start(events) -> RunStart:
    [start] = [e for e in events if isinstance(e, RunStart)]
    return start


def test_an_nccl_logs_version_is_in_the_run_line_once():
    run = open_artifacts([NCCL_LOG])
    summary = render_summary(run.events)
    assert _start(run.events).nccl_version == "2.21.5+cuda12.4"
    assert _run_line(summary).endswith("· torch not recorded · NCCL 2.21.5+cuda12.4 · imported from artifacts")
    assert summary.count("2.21.5") == 1


def test_a_profiler_traces_version_is_in_the_run_line():
    run = open_artifacts([B200_TRACE])
    assert _start(run.events).nccl_version == "2.27.5"
    assert "· NCCL 2.27.5 · imported from artifacts" in _run_line(render_summary(run.events))


@pytest.mark.parametrize("field", ["comm_lib_version", "nccl_version"])
def test_a_flight_recorder_dumps_version_under_either_name(tmp_path: Path, field: str):
    """Four ranks, two all_reduces each; the version under format 2.10's name or 2.4–2.9's."""
    for rank in range(4):
        content = dump([entry(1), entry(2)])
        del content["comm_lib_version"]
        content[field] = "2.26.2"
        (tmp_path / f"rank_{rank}.json").write_text(json.dumps(content))
    run = open_artifacts([tmp_path])
    assert _start(run.events).nccl_version == "2.26.2"
    assert "· NCCL 2.26.2 · imported from artifacts" in _run_line(render_summary(run.events))


def test_dumps_without_a_version_show_none(tmp_path: Path):
    """gloo's dumps carry an empty comm_lib_version: the run line names no NCCL."""
    for rank in range(4):
        content = dump([entry(1)])
        content["comm_lib_version"] = ""
        (tmp_path / f"rank_{rank}.json").write_text(json.dumps(content))
    run = open_artifacts([tmp_path])
    assert _start(run.events).nccl_version == ""
    assert "NCCL" not in _run_line(render_summary(run.events))


def test_torchs_nccl_version_is_read_and_joined(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: (2, 27, 5))
    assert nccl_version() == "2.27.5"
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: (2, 28, 3, "a0"))
    assert nccl_version() == "2.28.3a0"

    def no_nccl():
        raise AttributeError("module 'torch._C' has no attribute '_nccl_version'")  # a CPU build's

    monkeypatch.setattr(torch.cuda.nccl, "version", no_nccl)
    assert nccl_version() == ""


def test_a_run_on_cuda_carries_torchs_nccl_version_and_one_on_cpu_none(monkeypatch: pytest.MonkeyPatch):
    """The plan of 4 ranks with 4 GPUs (given: none here) is on NCCL; with --backend gloo, on CPU."""
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: (2, 27, 5))
    scenario = find_scenario("all-reduce")
    on_nccl = plan_run(scenario, 4, gpus=4)
    assert on_nccl.backend.backend == "nccl"
    assert run_start_fields(on_nccl, 1)["nccl_version"] == "2.27.5"
    assert run_start_fields(plan_run(scenario, 4, backend="gloo"), 1)["nccl_version"] == ""
