"""``benchmarks/gpu_check.py``, the one command a GPU machine runs: ``--quick`` here (gloo, no GPU)
writes its report into the folder ``OUT`` names, says it is not a GPU check and calls nothing
passed; the report is on disk, with every earlier check's outcome, before each check starts; a
check over its budget is stopped and the next one runs; a missing package is named; the carried
wheels cover what collviz and the tier import; the tier tests it names are the tier's own.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from support.paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))  # the check's own modules (benchmarks/gpucheck/)

import gpu_check  # noqa: E402
from gpucheck.checks import TIER_TESTS, tier_outcomes  # noqa: E402
from gpucheck.context import Check, Context  # noqa: E402
from gpucheck.report import Finding  # noqa: E402
from gpucheck.running import Deadline  # noqa: E402
from gpucheck.wheels import CARRIED  # noqa: E402

CHECK_TITLES = [check.title for check in gpu_check.CHECKS]
CHECK_KEYS = [check.key for check in gpu_check.CHECKS]


def _outcomes(report: str) -> dict[str, str]:
    """Each check's title → its outcome, as the report's headings say."""
    return dict(re.findall(r"^## \d+\. (.+) — (.+)$", report, re.M))


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``gpu_check.py --quick`` run once, as a user starts it, into the ``OUT`` it is given: (the
    folder it ran in, what it printed); its report and logs are in ``out`` under that folder."""
    folder = tmp_path_factory.mktemp("gpu-check")
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--quick"], cwd=folder,
                            env={**os.environ, "OUT": str(folder / "out")}, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=600)
    return folder, result


@pytest.mark.slow
def test_quick_writes_its_report_into_OUT_and_calls_nothing_passed(quick_run):
    tmp_path, result = quick_run
    out = tmp_path / "out"
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    report = (out / "report.md").read_text()
    assert report.splitlines()[0].startswith("NOT A GPU CHECK: ")
    outcomes = _outcomes(report)
    assert list(outcomes) == CHECK_TITLES
    assert all(outcome == "ran on gloo" for title, outcome in outcomes.items() if "tier" not in title), outcomes
    assert outcomes[CHECK_TITLES[2]].startswith("skipped: no GPU"), outcomes
    assert not re.search(r"\| passed \|", report)
    expected_logs = {f"{number}-{check.key}.log" for number, check in enumerate(gpu_check.CHECKS, 1)}
    assert {path.name for path in out.iterdir()} == {"report.md", *expected_logs}, "8 files at most come back"
    assert not list(tmp_path.glob("gpu-check-*")), "OUT is where the report goes"


@pytest.mark.slow
def test_quick_perf_writes_its_rows_into_OUT_and_calls_nothing_passed(tmp_path: Path):
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--quick", "--perf"],
                            cwd=tmp_path, env={**os.environ, "OUT": str(out)}, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    report = (out / "perf.md").read_text()
    assert report.splitlines()[0].startswith("NOT A GPU CHECK: ")
    assert _outcomes(report) == {check.title: "ran on gloo" for check in gpu_check.PERF}
    assert "| 1 MiB |" in report and report.count("| 1024 |") == 2, "the 1 MiB row; bench's 1 KiB row at 2 and 4 ranks"
    assert {path.name for path in out.iterdir()} == {"perf.md", "perf-1-observer.log", "perf-2-latency.log"}


def _claims(held: bool, on_nccl: bool):
    return lambda context: Finding(held, on_nccl, [f"held {held}, on NCCL {on_nccl}"])


def test_the_report_holds_every_earlier_outcome_before_each_check_starts(tmp_path: Path):
    """Fake checks, each reading the report on disk as it starts: one that held on gloo, one that
    claims NCCL (the only way to "passed"), one failing on NCCL, one past its 3 s budget, one missing
    a module (never started), one raising; each part is written as it ends, and every one runs."""
    seen: dict[str, str] = {}

    def looking(key: str, body):
        def check(context: Context) -> Finding:
            seen[key] = (tmp_path / "report.md").read_text()
            return body(context)
        return check

    def sleeps(context: Context) -> Finding:
        context.python("-c", "import time; time.sleep(300)")
        raise AssertionError("the sleeper was not stopped")

    def raises(context: Context) -> Finding:
        raise ValueError("the check's own mistake")

    fakes = (Check("gloo", "held on gloo", 60, (), looking("gloo", _claims(True, False))),
             Check("nccl", "held on NCCL", 60, (), looking("nccl", _claims(True, True))),
             Check("wrong", "wrong on NCCL", 60, (), looking("wrong", _claims(False, True))),
             Check("sleeper", "sleeps", 3, (), looking("sleeper", sleeps)),
             Check("absent", "needs a module", 60, ("no_such_module_for_gpu_check",),
                   looking("absent", _claims(True, True))),
             Check("raiser", "raises", 60, (), looking("raiser", raises)))
    status = gpu_check.run_checks(fakes, tmp_path, "report.md", "fake check", dict(os.environ), False, [],
                                  Deadline.after(600))
    assert status == 1
    assert "| 1 | held on gloo | ran on gloo |" in seen["nccl"] and "held True, on NCCL False" in seen["nccl"]
    assert "| 2 | held on NCCL | running (started " in seen["nccl"]
    assert "| 3 | wrong on NCCL | not started |" in seen["nccl"]
    assert "| 2 | held on NCCL | passed |" in seen["wrong"]
    assert "| 4 | sleeps | timed out at its 3 s |" in seen["raiser"]
    assert "| 5 | needs a module | missing: no_such_module_for_gpu_check |" in seen["raiser"]
    assert "absent" not in seen, "a check missing a module is not started"
    outcomes = _outcomes((tmp_path / "report.md").read_text())
    assert outcomes == {"held on gloo": "ran on gloo", "held on NCCL": "passed", "wrong on NCCL": "failed",
                        "sleeps": "timed out at its 3 s", "needs a module": "missing: no_such_module_for_gpu_check",
                        "raises": "failed"}
    report = (tmp_path / "report.md").read_text()
    assert "ValueError: the check's own mistake" in report and "cannot import no_such_module_for_gpu_check" in report
    assert "time.sleep(300)" in (tmp_path / "4-sleeper.log").read_text()


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


THE_IMAGES_OWN = {"torch", "numpy", "nvidia-ml-py"}
"""What the GPU image brings and the check must use, never carry."""


def _needed(roots: list[str]) -> set[str]:
    """Every distribution ``roots`` need, transitively, as this environment's metadata says (extras
    followed as each requirement asks), but the image's own and what only they need."""
    needed: set[str] = set()
    todo = [(Requirement(root), "") for root in roots]
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = _normal(requirement.name)
        if name in THE_IMAGES_OWN:
            continue
        wanted = {(name, e) for e in requirement.extras or {""}}
        if all(item in needed for item in wanted):
            continue
        needed |= wanted
        for extra_asked in requirement.extras or {""}:
            todo += [(Requirement(spec), extra_asked) for spec in metadata.requires(requirement.name) or []]
    return {name for name, _ in needed}


def test_the_carried_wheels_are_everything_collviz_and_the_tier_need_but_the_images_torch():
    collviz = [spec for spec in metadata.requires("collviz") if "extra ==" not in spec]
    needed = _needed(collviz + ["pytest", "pytest-timeout", "pytest-asyncio"])
    carried = {_normal(name) for name in CARRIED}
    assert needed <= carried, sorted(needed - carried)
    assert not carried & THE_IMAGES_OWN
    assert {"pyzmq", "msgspec", "textual", "pytest-asyncio", "setuptools"} <= carried


@pytest.mark.slow
def test_the_tier_tests_it_runs_are_the_tiers_own(quick_run):
    """Every test the check names is one the tier's pytest reported on (``-v``, in the check's log
    of the shared ``--quick`` run: skipped here, where NVML sees no GPU); a name the tier lacks is
    never reported (pytest refuses it as not found)."""
    tmp_path, _ = quick_run
    tier_log = (tmp_path / "out" / f"{CHECK_KEYS.index('tier') + 1}-tier.log").read_text()
    names = set(tier_outcomes(tier_log)[0])
    assert set(TIER_TESTS) <= names, sorted(set(TIER_TESTS) - names)
    assert len(set(TIER_TESTS)) == len(TIER_TESTS)


def test_the_tier_table_reads_pytests_verbose_lines_and_names_tests_not_reached():
    printed = "\n".join([
        "tests/runtime/test_gpu.py::" + TIER_TESTS[0] + " PASSED [  9%]",
        "tests/runtime/test_gpu.py::" + TIER_TESTS[1] + " FAILED [ 18%]",
        "tests/runtime/test_gpu.py::" + TIER_TESTS[7] + " SKIPPED (no GPU visible through NVML) [ 72%]",
        "FAILED tests/runtime/test_gpu.py::" + TIER_TESTS[1] + " - AssertionError: (0, 'output')",
    ])
    assert "[dead rank]" in TIER_TESTS[7], "a parameter id with a space"
    outcomes, table = tier_outcomes(printed)
    assert outcomes == {TIER_TESTS[0]: "passed", TIER_TESTS[1]: "failed", TIER_TESTS[7]: "skipped"}
    assert table[2:5] == [f"| `{TIER_TESTS[0]}` | passed |", f"| `{TIER_TESTS[1]}` | failed |",
                          f"| `{TIER_TESTS[2]}` | not reached |"]
    assert len(table) == 2 + len(TIER_TESTS)


def test_only_runs_the_named_checks_in_their_usual_order_and_refuses_an_unknown_key(tmp_path: Path, monkeypatch):
    """``--only`` as the command line reads it (the checks' bodies are the quick run's to test:
    here each check is the real one's key, title and budget with a body that logs a line and holds
    on gloo)."""
    out = tmp_path / "out"

    def holds_on_gloo(context: Context) -> Finding:
        context.log.write_text("held on gloo\n")
        return _claims(True, False)(context)

    monkeypatch.setattr(gpu_check, "CHECKS", tuple(dataclasses.replace(check, body=holds_on_gloo)
                                                   for check in gpu_check.CHECKS))
    monkeypatch.setattr(sys, "argv", ["gpu_check.py", "--quick", "--only", "observe,canary"])
    monkeypatch.setenv("OUT", str(out))
    assert gpu_check.main() == 0
    assert list(_outcomes((out / "report.md").read_text())) == [CHECK_TITLES[0], CHECK_TITLES[-1]], \
        "canary before observe, as the whole command runs them"
    assert {path.name for path in out.iterdir()} == {"report.md", "1-canary.log", "2-observe.log"}
    refused = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--only", "canary,nope"],
                             cwd=tmp_path, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.splitlines()[-1] == ("gpu_check.py: error: argument --only: no check nope (keys: algo, "
                                               "attach, canary, fsdp, latency, observe, observer, run, tier)")
