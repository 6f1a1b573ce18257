"""What start-up must not do again (benchmarks/startup.py measures how long it takes): a headless
run imports no viewer, the workers import nothing after the fork, and torch's objects are frozen
out of the garbage collector's reach before it.

One real 2-rank headless all-reduce runs in a child interpreter whose ``os.fork`` and ``os._exit``
are wrapped to write down, in the launcher and in every worker, what was imported and frozen.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

_PROBE = """
import gc, json, os, sys
record, fork, leave = sys.argv[1], os.fork, os._exit
before_fork = {}

def write(role, **fields):
    with open(record, "a") as out:
        out.write(json.dumps({"role": role, **fields}) + "\\n")

def probing_fork():
    before_fork.update(modules=set(sys.modules), frozen=gc.get_freeze_count())
    return fork()

def probing_exit(status):
    if "modules" in before_fork:
        write("worker", imported=sorted(set(sys.modules) - before_fork["modules"]), frozen=before_fork["frozen"])
    leave(status)

os.fork, os._exit = probing_fork, probing_exit
from collviz.app.cli import main
status = main(["all-reduce", "--gpus", "2", "--backend", "gloo", "--headless"])
write("launcher", status=status, textual="textual" in sys.modules, viewer="collviz.app.app" in sys.modules)
leave(0)
"""


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The records of one probed 2-rank headless run: its launcher's and each worker's."""
    record = tmp_path_factory.mktemp("startup") / "record.jsonl"
    result = subprocess.run([sys.executable, "-c", _PROBE, str(record)], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "result: ok" in result.stdout
    rows = [json.loads(line) for line in Path(record).read_text().splitlines()]
    return {"launcher": [r for r in rows if r["role"] == "launcher"], "workers": [r for r in rows if r["role"] == "worker"]}


def test_the_run_ended_well_with_two_workers(probed):
    assert [r["status"] for r in probed["launcher"]] == [0]
    assert len(probed["workers"]) == 2


def test_a_headless_run_never_imports_the_viewer(probed):
    launcher = probed["launcher"][0]
    assert not launcher["textual"] and not launcher["viewer"]


def test_the_workers_import_nothing_after_the_fork(probed):
    assert [r["imported"] for r in probed["workers"]] == [[], []]


def test_torchs_objects_are_frozen_before_the_fork(probed):
    # importing torch alone leaves well over 100,000 objects the collector tracks
    assert all(r["frozen"] > 100_000 for r in probed["workers"])
