"""collviz beside the torch that is installed: the supported range, what an older torch gets (one
line, exit 2, before any process starts), and the verified releases doctor reports and CI runs."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
import tomllib

import pytest
import torch
import torch.distributed as dist
from packaging.requirements import Requirement

from collviz.runtime import compat

from support.cli import run_cli
from support.paths import ROOT
from support.reference import run_on_gloo_ranks


VERIFIED = runpy.run_path(str(ROOT / "runtime" / "compat" / "verified.py"))
"""The verified releases as .ci/run reads them (the file run on its own, not through collviz)."""


def _cli_with(patch: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``collviz ARGV`` in a fresh interpreter after the Python statements ``patch`` have run."""
    code = f"{patch}\nfrom collviz.app.cli import main\nraise SystemExit(main({list(argv)!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("version, expected", [
    ("2.8.0a0+5228986c39.nv25.05", (2, 8)), ("2.13.0+cpu", (2, 13)), ("2.10.0.dev20250601+cu128", (2, 10)),
    ("3.0.0", (3, 0)),
])
def test_a_release_is_read_from_vendor_local_and_nightly_versions(version, expected):
    assert compat.release(version) == expected


def test_a_string_that_is_not_a_version_is_an_error():
    with pytest.raises(ValueError, match="not a torch version: 'nightly'"):
        compat.release("nightly")


@pytest.mark.parametrize("version, refused", [
    ("2.7.1+cu126", True), ("2.6.0", True), ("1.13.1", True),
    ("2.8.0a0+5228986c39.nv25.05", False), ("2.8.0+cu128", False), ("2.11.0+cu130", False), ("2.13.0+cpu", False),
])
def test_the_floor_is_2_8_and_a_vendor_build_of_it_qualifies(version, refused):
    refusal = compat.floor_refusal(version)
    assert refusal == (f"this torch is {version}; collviz needs torch ≥ 2.8" if refused else None)


@pytest.mark.parametrize("version, admitted", [
    ("2.8.0a0+5228986c39.nv25.05", True), ("2.8.0+cu128", True), ("2.11.0+cu130", True), ("2.13.0+cpu", True),
    ("2.7.1", False), ("2.6.0+cu124", False),
])
def test_the_declared_torch_requirement_keeps_any_supported_torch(version, admitted):
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch_requirement = next(Requirement(d) for d in dependencies if Requirement(d).name == "torch")
    assert torch_requirement.specifier.contains(version) is admitted  # pip's own rule for pre-releases


def test_the_fallbacks_match_the_installed_torch():
    installed = compat.release(torch.__version__)
    from torch.distributed import distributed_c10d
    assert compat.GroupName is (distributed_c10d.GroupName if installed >= (2, 10) else str)
    assert compat.GroupName("0") == "0"
    import inspect
    from torch.nn.parallel import DistributedDataParallel
    has_list = "bucket_cap_mb_list" in inspect.signature(DistributedDataParallel).parameters
    assert compat.DDP_BUCKET_CAP_MB_LIST.present is has_list
    assert has_list is (installed >= compat.DDP_BUCKET_CAP_MB_LIST.since)  # the release the table names


def test_a_torch_older_than_the_floor_is_refused_in_one_line_before_any_run():
    result = _cli_with("import torch; torch.__version__ = '2.7.1+cu126'", "all-reduce", "--gpus", "2", "--headless")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "collviz: error: this torch is 2.7.1+cu126; collviz needs torch ≥ 2.8\n"


def test_ddp_on_a_torch_without_per_bucket_caps_is_refused_in_one_line_before_any_run(tmp_path):
    patch = ("import dataclasses, collviz.runtime.compat as c\n"
             "c.DDP_BUCKET_CAP_MB_LIST = dataclasses.replace(c.DDP_BUCKET_CAP_MB_LIST, present=False)")
    trace = tmp_path / "ddp.cvz"
    result = _cli_with(patch, "ddp", "--gpus", "2", "--headless", "--record", str(trace))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"collviz: error: scenario ddp needs torch ≥ 2.11 (this is {torch.__version__})\n"
    assert not trace.exists()  # refused before anything started


def test_a_lesson_skips_an_item_this_torch_cannot_run_saying_why(tmp_path):
    lesson = tmp_path / "ddp-only.toml"
    lesson.write_text('name = "ddp-only"\ntitle = "t"\ndescription = "d"\n\n'
                      '[[item]]\nscenario = "ddp"\ntitle = "DDP"\n\n'
                      '[[item]]\ncompare = ["ddp", "fsdp"]\ntitle = "DDP beside FSDP"\n')
    patch = ("import dataclasses, collviz.runtime.compat as c\n"
             "c.DDP_BUCKET_CAP_MB_LIST = dataclasses.replace(c.DDP_BUCKET_CAP_MB_LIST, present=False)")
    result = _cli_with(patch, "lesson", str(lesson), "--headless")
    refusal = f"collviz: scenario ddp needs torch ≥ 2.11 (this is {torch.__version__}): item skipped"
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["collviz lesson ddp-only — 1/2: DDP", "collviz lesson ddp-only — 2/2: DDP beside FSDP"]
    assert result.stderr.splitlines() == [refusal, refusal]


def test_doctor_json_gives_fields_and_the_releases_ci_verifies():
    result = run_cli("doctor", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    installed = str(torch.__version__)
    assert report["torch"]["version"] == installed
    assert report["torch"]["verified_versions"] == list(VERIFIED["VERIFIED_TORCH"])
    assert report["torch"]["verified"] is (installed.split("+")[0] in VERIFIED["VERIFIED_TORCH"])
    assert report["torch"]["pinned"] == VERIFIED["PINNED_TORCH"] and report["torch"]["floor"] == "2.8"
    assert report["torch"]["cuda"] == torch.version.cuda
    assert report["backends"]["gloo"] is torch.distributed.is_gloo_available()
    import textual
    assert report["packages"]["textual"] == textual.__version__
    assert isinstance(report["gpus"]["visible"], int) and set(report["auto"]) == {"1", "2", "4", "8"}


def test_ci_runs_the_full_suite_on_the_pinned_torch_and_the_floor_on_the_others():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "runtime/compat/verified.py" in ci and ".ci/floor" in ci
    assert '"torch==$pinned"' in ci and "torch==2" not in ci  # read from verified.py, not written twice
    assert VERIFIED["PINNED_TORCH"] in VERIFIED["VERIFIED_TORCH"]


def test_serve_without_its_extra_says_how_to_install_it():
    result = _cli_with("import sys; sys.modules['textual_serve'] = None",
                       "serve", str(ROOT / "tests" / "fixtures" / "all-reduce.cvz"))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == 'collviz: error: collviz serve needs its extra: pip install "collviz[serve]"\n'


def _compat_at(version: str) -> dict:
    """What collviz.runtime.compat decides in a fresh interpreter whose torch says it is ``version``."""
    code = (f"import json, torch; torch.__version__ = {version!r}\n"
            "from collviz.runtime import compat as c\n"
            "print(json.dumps({'avg': c.GLOO_REDUCE_SCATTER_AVG.present, 'pp_bug': c.PIPELINE_FIRST_STEP.affected}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("version, averages, pp_bug", [
    ("2.8.0+cu128", False, False),  # below both: gloo sums for AVG; pipelining has no greeting step yet
    ("2.9.0+cu128", True, True), ("2.9.1", True, True),  # at both
    ("2.10.0+cu128", True, False),  # above both: torch fixed the greeting's dtype
    ("2.13.0+cpu", True, False),
])
def test_the_averaging_reduce_scatter_and_the_pipelining_bug_are_read_from_the_release(version, averages, pp_bug):
    assert _compat_at(version) == {"avg": averages, "pp_bug": pp_bug}


def _average_reduce_scatter(rank: int, n: int):
    """Rank ``rank`` of ``n`` gloo ranks: its shard of a reduce-scatter with AVG of ``rank * 10 + k``, k < 2n."""
    shard = torch.empty(2)
    dist.reduce_scatter_tensor(shard, torch.arange(2 * n, dtype=torch.float32) + rank * 10, op=dist.ReduceOp.AVG)
    yield shard.tolist()


def test_gloo_s_reduce_scatter_averages_where_compat_says_it_does():
    """Plain torch on 4 gloo ranks (run on every verified torch by .ci/floor): the sum of k + 10r over
    r < 4 is 4k + 60, the average k + 15; rank r holds k = 2r and 2r + 1."""
    shards = dict(run_on_gloo_ranks(_average_reduce_scatter, 4))
    averages = {0: [15.0, 16.0], 1: [17.0, 18.0], 2: [19.0, 20.0], 3: [21.0, 22.0]}
    sums = {0: [60.0, 64.0], 1: [68.0, 72.0], 2: [76.0, 80.0], 3: [84.0, 88.0]}
    assert shards == (averages if compat.GLOO_REDUCE_SCATTER_AVG.present else sums)


def test_an_averaging_reduce_scatter_on_a_gloo_that_sums_for_avg_is_refused_in_one_line():
    result = _cli_with("import torch; torch.__version__ = '2.8.0+cu128'",
                       "reduce-scatter", "--op", "avg", "--gpus", "2", "--backend", "gloo", "--headless")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "collviz: error: reduce-scatter --op avg on gloo needs torch ≥ 2.9 (this is 2.8.0+cu128)\n"


def _gpipe_step(rank: int, n: int):
    """Rank ``rank`` of ``n`` gloo ranks: one plain GPipe step of a stage of one Linear layer each,
    4 microbatches (torch.distributed.pipelining alone); the last stage yields its losses."""
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    torch.manual_seed(0)
    stage = PipelineStage(torch.nn.Linear(4, 4), rank, n, torch.device("cpu"))
    schedule = ScheduleGPipe(stage, n_microbatches=4, loss_fn=torch.nn.functional.mse_loss)
    losses: list = []
    if rank == 0:
        schedule.step(torch.ones(8, 4))
    else:
        schedule.step(target=torch.zeros(8, 4), losses=losses)
    yield len(losses)


def test_a_plain_gpipe_step_on_gloo_fails_where_compat_names_torch_s_bug():
    """torch's own pipelining on 2 gloo ranks (run on every verified torch by .ci/floor): one loss per
    microbatch on the last stage, or — on a release with pytorch/pytorch#165143 — a rank that fails."""
    if compat.PIPELINE_FIRST_STEP.affected:
        with pytest.raises(AssertionError, match="failed|did not finish"):
            run_on_gloo_ranks(_gpipe_step, 2, timeout_s=60)
    else:
        assert sorted(run_on_gloo_ranks(_gpipe_step, 2)) == [(0, 0), (1, 4)]


@pytest.mark.parametrize("version", ["2.9.0+cu128", "2.9.1"])
def test_pp_on_torch_2_9_is_refused_in_one_line_naming_torch_s_bug(version, tmp_path):
    trace = tmp_path / "pp.cvz"
    result = _cli_with(f"import torch; torch.__version__ = {version!r}", "pp", "--gpus", "2", "--headless",
                       "--record", str(trace))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"collviz: error: scenario pp cannot run on torch 2.9 (this is {version}): torch's bug pytorch/pytorch#165143, "
        "a pipeline schedule's first step sends an int64 that the next stage receives as a float32; fixed in 2.10\n")
    assert not trace.exists()  # refused before anything started
