"""Perfetto export: recorded traces become Chrome trace-event JSON that passes a structural check.

The checker below is written from the Trace Event Format document (the "JSON Object Format" with
``traceEvents``), not from the exporter: every event has ``ph``, ``ts``, ``pid`` and ``tid``;
complete events ("X") carry ``dur`` and, on one (pid, tid) track, either do not overlap or nest
properly; async slices ("b"/"e") pair by (cat, id, name); flow events ("s"/"f") pair by (cat, id)
and each binds to a slice enclosing its timestamp on its own track; counters ("C") carry numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from collviz.app.cli import main
from collviz.runtime.reports.export import perfetto_trace
from collviz.runtime.wire.protocol import Collective, Memory, Phase, Transfer
from collviz.runtime.wire.trace import read_trace
from conftest import run_cli

PHASES_WITH_NAME = {"X", "B", "E", "i", "I", "C", "b", "e", "n", "s", "t", "f", "M"}
METADATA_NAMES = {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}


def _ns(value: float) -> int:
    """A trace timestamp (µs) as integer ns, so nesting is judged without float noise."""
    return round(value * 1000)


def check_trace_events(document: dict) -> list[str]:
    """Every way ``document`` breaks the Trace Event Format's structural rules, as sentences."""
    problems: list[str] = []
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        return ["no traceEvents list"]
    slices: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    asyncs: dict[tuple, list[dict]] = defaultdict(list)
    flows: dict[tuple, list[dict]] = defaultdict(list)
    for i, event in enumerate(events):
        where = f"event {i} ({event.get('ph')!r} {event.get('name')!r})"
        for key in ("ph", "ts", "pid", "tid"):
            if key not in event:
                problems.append(f"{where}: missing {key}")
        if any(key not in event for key in ("ph", "ts", "pid", "tid")):
            continue
        ph = event["ph"]
        if ph not in PHASES_WITH_NAME:
            problems.append(f"{where}: unknown phase type")
        if not isinstance(event["ts"], (int, float)) or isinstance(event["ts"], bool) or event["ts"] < 0:
            problems.append(f"{where}: ts is not a non-negative number")
        if not isinstance(event["pid"], int) or not isinstance(event["tid"], int):
            problems.append(f"{where}: pid/tid are not integers")
        if not isinstance(event.get("name"), str):
            problems.append(f"{where}: no name")
        track = (event["pid"], event["tid"])
        if ph == "X":
            if not isinstance(event.get("dur"), (int, float)) or event["dur"] < 0:
                problems.append(f"{where}: complete event without a non-negative dur")
            else:
                slices[track].append((_ns(event["ts"]), _ns(event["ts"] + event["dur"])))
        elif ph == "C":
            args = event.get("args")
            if not isinstance(args, dict) or not args or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in args.values()
            ):
                problems.append(f"{where}: counter args are not all numbers")
        elif ph in ("b", "e"):
            if "id" not in event or "cat" not in event:
                problems.append(f"{where}: async event without id and cat")
            asyncs[(event.get("cat"), event.get("id"), event["name"])].append(event)
        elif ph in ("s", "t", "f"):
            if "id" not in event or "cat" not in event:
                problems.append(f"{where}: flow event without id and cat")
            flows[(event.get("cat"), event.get("id"))].append(event)
        elif ph == "M":
            if event["name"] not in METADATA_NAMES or not isinstance(event.get("args"), dict):
                problems.append(f"{where}: unknown metadata or no args")
        elif ph in ("i", "I") and event.get("s", "t") not in ("g", "p", "t"):
            problems.append(f"{where}: instant scope must be g, p or t")
    problems += _nesting_problems(slices)
    problems += _async_problems(asyncs)
    problems += _flow_problems(flows, slices)
    return problems


def _nesting_problems(slices: dict[tuple, list[tuple[int, int]]]) -> list[str]:
    """Complete events on one track must be disjoint or nested (a child inside its parent)."""
    problems = []
    for track, intervals in slices.items():
        stack: list[tuple[int, int]] = []
        for start, end in sorted(intervals, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack and end > stack[-1][1]:
                problems.append(f"track {track}: [{start}, {end}] ns overlaps [{stack[-1][0]}, {stack[-1][1]}] without nesting")
            stack.append((start, end))
    return problems


def _async_problems(asyncs: dict[tuple, list[dict]]) -> list[str]:
    problems = []
    for key, events in asyncs.items():
        kinds = Counter(e["ph"] for e in events)
        if kinds["b"] != kinds["e"]:
            problems.append(f"async {key}: {kinds['b']} begins, {kinds['e']} ends")
        begins = sorted(e["ts"] for e in events if e["ph"] == "b")
        ends = sorted(e["ts"] for e in events if e["ph"] == "e")
        if any(end < begin for begin, end in zip(begins, ends)):
            problems.append(f"async {key}: ends before it begins")
    return problems


def _flow_problems(flows: dict[tuple, list[dict]], slices: dict[tuple, list[tuple[int, int]]]) -> list[str]:
    """Each flow id has one start and one finish, each bound to a slice enclosing it on its track."""
    problems = []
    for key, events in flows.items():
        kinds = Counter(e["ph"] for e in events)
        if kinds["s"] != 1 or kinds["f"] != 1:
            problems.append(f"flow {key}: {kinds['s']} starts and {kinds['f']} finishes (need one each)")
        for event in events:
            t = _ns(event["ts"])
            if not any(start <= t <= end for start, end in slices.get((event["pid"], event["tid"]), [])):
                problems.append(f"flow {key} {event['ph']}: no slice encloses ts {event['ts']} on track "
                                f"({event['pid']}, {event['tid']})")
    return problems


def _has_scenario(name: str) -> bool:
    listing = subprocess.run([sys.executable, "-m", "collviz.app.cli", "list"], capture_output=True, text=True,
                             timeout=120, stdin=subprocess.DEVNULL)
    return any(line.split()[:1] == [name] for line in listing.stdout.splitlines())


RECORDED = [
    pytest.param("all-gather", id="all-gather"),
    pytest.param("reduce", id="reduce"),
    pytest.param("ring-all-reduce", id="ring-all-reduce"),
    pytest.param("fsdp", id="fsdp"),  # the acceptance trace (skipped where `collviz fsdp` does not exist)
]


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory):
    """Record a scenario on 4 gloo ranks once per module; returns the trace path."""
    folder = tmp_path_factory.mktemp("export")
    paths: dict[str, Path] = {}

    def recorded(name: str) -> Path:
        if name not in paths:
            if not _has_scenario(name):
                pytest.skip(f"`collviz {name}` does not exist yet (not in `collviz list`)")
            path = folder / f"{name}.cvz"
            result = run_cli(name, "--gpus", "4", "--backend", "gloo", "--headless", "--record", str(path))
            assert result.returncode == 0, result.stderr
            paths[name] = path
        return paths[name]

    return recorded


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
    memory_ranks = {e.rank for e in events if isinstance(e, Memory)}
    assert {e["pid"] for e in trace_events if e["ph"] == "C"} == memory_ranks


def test_overlapping_collectives_become_async_slices():
    """Two calls in flight at once on one rank (as FSDP's prefetch does) must not overlap as "X"."""
    events = read_trace(Path(__file__).parent / "fixtures" / "all-gather.cvz").events
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
    trace = str(Path(__file__).parent / "fixtures" / "all-gather.cvz")
    argv = [a.format(tmp=tmp_path, trace=trace) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("collviz: error: ") and needle in err[0], err


def test_pipeline_spans_become_slices_of_their_measured_length():
    """The pp fixture: every stage's forward and backward of each microbatch is one "X" slice on
    the rank's pipeline thread, exactly as long as measured; the document stays valid."""
    from collviz.runtime.reports.export import PIPELINE_TID
    from collviz.runtime.wire.protocol import Span

    events = read_trace(Path(__file__).parent / "fixtures" / "pp.cvz").events
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
