"""A real AMD MI300X torch.profiler trace (``tests/fixtures/profiler_mi300/``, its source and hand
reading in that folder's README): a training step with no process group, read as not a
distributed trace, in one line, as worked out by hand."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from collviz.runtime.errors import UsageError
from collviz.runtime.sources import open_artifacts

from support.paths import FIXTURES

TRACE = FIXTURES / "profiler_mi300" / "mi300x-ddp-resnet18-excerpt.json"
REFUSAL = "a Chrome trace without torch.profiler's distributedInfo (not a distributed torch.profiler trace)"


def test_the_excerpt_is_what_its_readme_says():
    """8 MI300X devices, no distributedInfo, 63 events of which 3 kernels, none of a collective."""
    trace = json.loads(TRACE.read_text())
    assert [d["name"] for d in trace["deviceProperties"]] == ["AMD Instinct MI300X"] * 8
    assert "distributedInfo" not in trace
    events = trace["traceEvents"]
    assert (len(events), sum(e.get("cat") == "kernel" for e in events)) == (63, 3)
    assert not any(word in e["name"].lower() for e in events for word in ("nccl", "rccl", "c10d", "record_param_comms"))


def test_an_mi300x_trace_without_a_process_group_is_refused_naming_why():
    with pytest.raises(UsageError, match=re.escape(f"{TRACE.name}: {REFUSAL}")):
        open_artifacts([TRACE])


def test_replay_refuses_it_in_one_line_with_exit_2():
    done = subprocess.run([sys.executable, "-m", "collviz", "replay", str(TRACE), "--headless"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert REFUSAL in line and "Traceback" not in done.stderr
