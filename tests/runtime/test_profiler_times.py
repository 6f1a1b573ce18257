"""Each call imported from a torch.profiler trace carries the time of the gloo work slice that ran it,
read here by hand from the trace's own JSON (``ts`` and ``dur`` in µs): a lower bound as well as an
upper one, so a duration read in the wrong unit cannot pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collviz.runtime.sources import open_artifacts
from collviz.runtime.wire.protocol import Collective

from support import artifact_jobs as jobs


@pytest.fixture
def profiled(job_artifacts: dict[str, Path]) -> Path:
    """The healthy job's artifacts (its profiler traces under ``profile/``), made once a session."""
    return job_artifacts["healthy"]


def _work_slices(path: Path) -> list[tuple[float, float]]:
    """(start ns, duration ns) of every gloo work slice in one rank's trace, from its µs figures."""
    content = json.loads(path.read_text())
    return [(e["ts"] * 1000, e["dur"] * 1000) for e in content["traceEvents"]
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("gloo:")]


def test_each_call_takes_its_work_slices_start_and_duration_in_nanoseconds(profiled):
    run = open_artifacts([profiled / "profile"])
    assert run.exit_status == 0
    for rank in range(jobs.WORLD):
        slices = _work_slices(profiled / "profile" / f"trace_{rank}.json")
        ends = [e for e in run.events if isinstance(e, Collective) and e.edge == "end" and e.rank == rank]
        assert len(ends) == len(jobs.HEALTHY_CALLS) and len(slices) >= len(ends)
        for call in ends:
            # the call is one of the rank's work slices: it ends where the slice ends and lasts as
            # long (to the ns)
            assert any(abs(call.t_ns - (start + took)) <= 1 and abs(call.duration_ns - took) <= 1
                       for start, took in slices), (rank, call.op, call.t_ns, call.duration_ns, slices)
