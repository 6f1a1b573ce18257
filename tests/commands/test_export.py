"""Perfetto export: recorded traces become Chrome trace-event JSON that passes a structural check.

The checker below is written from the Trace Event Format document (the "JSON Object Format" with
``traceEvents``), not from the exporter: every event has ``ph``, ``ts``, ``pid`` and ``tid``;
complete events ("X") carry ``dur`` and, on one (pid, tid) track, either do not overlap or nest
properly; async slices ("b"/"e") pair by (cat, id, name); flow events ("s"/"f") pair by (cat, id)
and each binds to a slice enclosing its timestamp on its own track; counters ("C") carry numbers.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from collviz.app.cli import main
from collviz.runtime.reports.export import perfetto_trace
from collviz.runtime.wire.protocol import Collective, Memory, Phase, Transfer
from collviz.runtime.wire.trace import read_trace

from support.paths import FIXTURES
from support.recordings import ScenarioRuns
from support.traces import check_trace_events


RECORDED = [
    pytest.param("all-gather", id="all-gather"),
    pytest.param("reduce", id="reduce"),
    pytest.param("ring-all-reduce", id="ring-all-reduce"),
    pytest.param("fsdp", id="fsdp"),  # the acceptance trace
]


@pytest.fixture(scope="module")
def record(scenario_runs: ScenarioRuns, training_runs):
    """A scenario's trace on 4 gloo ranks, recorded once per session; returns its path (fsdp's is
    the one ``compare ddp fsdp`` records for ``training_runs``: the same plan as a plain run's)."""
    recorded_by_compare = training_runs["paths"]
    return lambda name: recorded_by_compare[name] if name in ("ddp", "fsdp") else scenario_runs(name).path


@pytest.mark.parametrize("name", RECORDED)
def test_export_of_recorded_trace_is_structurally_valid(name, record, tmp_path):
    trace = record(name)
    out = tmp_path / f"{name}.json"
    assert main(["export", str(trace), "--perfetto", str(out)]) == 0
    document = json.loads(out.read_text())
    assert check_trace_events(document) == []
    events = read_trace(trace).events
    trace_events = document["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in trace_events if e["ph"] == "M" and e["name"] == "process_name"}
    assert all(names[rank].startswith(f"rank {rank}") for rank in range(4))
    phases = {(e.rank, e.index) for e in events if isinstance(e, Phase)}
    phase_slices = {(e["pid"], e["args"]["index"]) for e in trace_events if e["ph"] == "X" and e["cat"] == "phase"}
    assert phase_slices == phases
    calls = {(e.rank, e.group, e.group_seq, e.iteration) for e in events if isinstance(e, Collective)}
    call_slices = [e for e in trace_events if e["ph"] in ("X", "b") and e.get("cat") == "collective"]
    assert len(call_slices) == len(calls)
    transfers = [e for e in events if isinstance(e, Transfer)]
    starts = [e for e in trace_events if e["ph"] == "s"]
    assert len(starts) == len(transfers)
    assert transfers  # every scenario shows what moved, fsdp's all-gathers and reduce-scatters included
    measured = {(e.rank, e.group, e.group_seq, e.iteration): e.duration_ns for e in events
                if isinstance(e, Collective) and e.edge == "end" and e.duration_ns is not None}
    for call in (e for e in call_slices if e["ph"] == "X"):
        key = (call["pid"], call["args"]["group"], call["args"]["group_seq"], call["args"].get("iteration", 0))
        if key in measured:  # drawn exactly as long as measured (µs in the trace format)
            assert call["dur"] == pytest.approx(measured[key] / 1000, abs=1e-3), key
    assert {(e["pid"], e["args"]["dst"]) for e in starts} == {(t.src, t.dst) for t in transfers}
    assert (sorted((e["args"]["src"], e["args"]["dst"], e["args"]["hop"]) for e in starts)
            == sorted((t.src, t.dst, t.hop) for t in transfers))
    memory_ranks = {e.rank for e in events if isinstance(e, Memory)}
    assert {e["pid"] for e in trace_events if e["ph"] == "C"} == memory_ranks


def test_overlapping_collectives_become_async_slices():
    """Two calls in flight at once on one rank (as FSDP's prefetch does) must not overlap as "X"."""
    events = read_trace(FIXTURES / "all-gather.cvz").events
    template = next(e for e in events if isinstance(e, Collective) and e.rank == 0)
    start = template.t_ns

    def call(seq: int, edge: str, t_ns: int) -> Collective:
        return Collective(run=template.run, rank=0, seq=10_000 + seq * 2 + (edge == "end"), t_ns=t_ns,
                          phase=template.phase, edge=edge, op="all_gather", group="world", group_ranks=[0, 1, 2, 3],
                          group_seq=100 + seq, dtype="float32", count=4, bytes_in=16, bytes_out=64, algo_bytes=64)

    overlapping = [call(0, "begin", start), call(1, "begin", start + 1_000), call(0, "end", start + 5_000),
                   call(1, "end", start + 9_000)]
    document = perfetto_trace(events + overlapping)
    assert check_trace_events(document) == []
    assert any(e["ph"] == "b" and e["args"].get("group_seq") == 101 for e in document["traceEvents"])


def test_checker_catches_what_the_format_forbids():
    """The checker is not vacuous: each broken document yields a problem."""
    x = {"ph": "X", "name": "a", "pid": 0, "tid": 0, "ts": 0, "dur": 10}
    broken = {
        "missing pid": [{"ph": "i", "name": "a", "tid": 0, "ts": 0}],
        "overlap": [x, {**x, "ts": 5}],
        "unmatched flow": [x, {"ph": "s", "name": "f", "cat": "c", "id": 1, "pid": 0, "tid": 0, "ts": 1}],
        "unbound flow": [x, {"ph": "s", "name": "f", "cat": "c", "id": 1, "pid": 0, "tid": 0, "ts": 1},
                         {"ph": "f", "name": "f", "cat": "c", "id": 1, "pid": 1, "tid": 0, "ts": 1, "bp": "e"}],
        "text counter": [{"ph": "C", "name": "m", "pid": 0, "tid": 0, "ts": 0, "args": {"v": "1"}}],
        "unended async": [{"ph": "b", "name": "a", "cat": "c", "id": 1, "pid": 0, "tid": 0, "ts": 0}],
    }
    for label, events in broken.items():
        assert check_trace_events({"traceEvents": events}), label
    assert check_trace_events({"traceEvents": [x, {**x, "ts": 2, "dur": 3}, {**x, "ts": 10}]}) == []


@pytest.mark.parametrize("args,needle", [
    (["export", "/nonexistent/t.cvz", "--perfetto", "{tmp}/o.json"], "does not exist"),
    (["export", "{trace}", "--perfetto", "/nonexistent/dir/o.json"], "folder /nonexistent/dir does not exist"),
    (["export", "{trace}", "--perfetto", "{tmp}"], "is a folder, not a file"),
    (["export", "{trace}"], "--perfetto"),
    (["export", "{tmp}/not-a-trace.cvz", "--perfetto", "{tmp}/o.json"], "not a collviz trace"),
], ids=["missing trace", "unwritable output", "output is a folder", "no output", "not a trace"])
def test_bad_export_input(capsys, tmp_path, args, needle):
    (tmp_path / "not-a-trace.cvz").write_text("hello")
    trace = str(FIXTURES / "all-gather.cvz")
    argv = [a.format(tmp=tmp_path, trace=trace) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("collviz: error: ") and needle in err[0], err


def test_pipeline_spans_become_slices_of_their_measured_length():
    """The pp fixture: every stage's forward and backward of each microbatch is one "X" slice on
    the rank's pipeline thread, exactly as long as measured; the document stays valid."""
    from collviz.runtime.reports.export import PIPELINE_TID
    from collviz.runtime.wire.protocol import Span

    events = read_trace(FIXTURES / "pp.cvz").events
    document = perfetto_trace(events)
    assert check_trace_events(document) == []
    spans = [e for e in events if isinstance(e, Span)]
    slices = [e for e in document["traceEvents"] if e["ph"] == "X" and e["cat"] == "pipeline"]
    expected = Counter((s.rank, f"{'F' if s.kind == 'forward' else 'B'}{s.microbatch}") for s in spans)
    assert Counter((e["pid"], e["name"]) for e in slices) == expected and len(slices) == 2 * 4 * 4
    assert all(e["tid"] == PIPELINE_TID for e in slices)
    durations = {(s.rank, s.kind[0].upper(), s.microbatch): s.duration_ns for s in spans}
    for e in slices:
        assert e["dur"] == pytest.approx(durations[(e["pid"], e["name"][0], e["args"]["microbatch"])] / 1000, abs=1e-3)
