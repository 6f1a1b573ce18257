"""The Perfetto export's clock anchor: a trace records its writer's two clocks, and the export puts
its events on Unix time the way torch.profiler's traces do, so the two line up. Checked against a
real torch.profiler trace recorded in the test around the same moments."""

from __future__ import annotations

import json
import platform
import time

import torch
from torch.profiler import ProfilerActivity, profile

from collviz.runtime.reports.export import perfetto_trace
from collviz.runtime.wire.protocol import Phase, RankStart, RunStart, encode
from collviz.runtime.wire.trace import ClockAnchor, TraceWriter, read_trace

HOST = platform.node()


def run_start(host: str = HOST) -> RunStart:
    return RunStart(run="r", rank=-1, seq=0, t_ns=time.monotonic_ns(), scenario="s", world_size=1, backend="gloo",
                    device_kind="cpu", backend_reason="", mode="live", host=host)


def phase(edge: str, seq: int) -> Phase:
    return Phase(run="r", rank=0, seq=seq, t_ns=time.monotonic_ns(), index=0, name="work", edge=edge)


def test_a_trace_records_its_writers_clocks(tmp_path):
    before_m, before_u = time.monotonic_ns(), time.time_ns()
    writer = TraceWriter(tmp_path / "t.cvz")
    after_m, after_u = time.monotonic_ns(), time.time_ns()
    writer.write([encode(run_start())])
    writer.close()
    clock = read_trace(tmp_path / "t.cvz").clock
    assert clock.host == HOST
    assert before_m <= clock.monotonic_ns <= after_m and before_u <= clock.unix_ns <= after_u
    assert clock.unix_ns_of(clock.monotonic_ns + 5) == clock.unix_ns + 5


def test_the_export_lines_up_with_a_torch_profiler_trace(tmp_path):
    """A phase begins, 20 ms later torch runs an op under the profiler, 20 ms later the phase ends:
    on Unix time, collviz's phase holds the profiler's op, about 20 ms from either end."""
    writer = TraceWriter(tmp_path / "t.cvz")
    events = [run_start()]
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        events.append(phase("begin", 0))
        time.sleep(0.02)
        with torch.profiler.record_function("between"):
            torch.ones(64).add_(1)
        time.sleep(0.02)
        events.append(phase("end", 1))
    writer.write(encode(e) for e in events)
    writer.close()
    profiler.export_chrome_trace(str(tmp_path / "torch.json"))
    theirs = json.loads((tmp_path / "torch.json").read_text())
    [op] = [e for e in theirs["traceEvents"] if e.get("name") == "between" and e.get("ph") == "X"]
    op_start = theirs["baseTimeNanoseconds"] / 1e3 + float(op["ts"])  # Unix µs, as torch.profiler defines it
    op_end = op_start + float(op["dur"])

    contents = read_trace(tmp_path / "t.cvz")
    ours = perfetto_trace(contents.events, contents.clock)
    [work] = [e for e in ours["traceEvents"] if e.get("name") == "work"]
    work_start = ours["baseTimeNanoseconds"] / 1e3 + work["ts"]
    work_end = work_start + work["dur"]
    assert work_start < op_start < op_end < work_end
    assert 15_000 < op_start - work_start < 40_000 and 15_000 < work_end - op_end < 40_000  # µs
    clock = ours["otherData"]["clock"]
    assert clock["t_ns"].startswith("CLOCK_MONOTONIC") and clock["ts_0_t_ns"] == events[0].t_ns
    assert clock["ts_0_unix_ns"] == ours["baseTimeNanoseconds"]


def test_without_an_anchor_or_on_other_hosts_unix_time_is_labelled_absent():
    events = [run_start(), RankStart(run="r", rank=0, seq=0, t_ns=time.monotonic_ns(), device="cpu", backend="gloo",
                                     host="node-7", pid=1)]
    unanchored = perfetto_trace(events)
    assert "baseTimeNanoseconds" not in unanchored
    assert unanchored["otherData"]["clock"]["ts_0_unix_ns"] is None
    assert "no clock anchor" in unanchored["otherData"]["clock"]["why_no_unix_time"]
    elsewhere = perfetto_trace(events, ClockAnchor.now())
    assert "baseTimeNanoseconds" not in elsewhere
    assert f"ranks ran on {', '.join(sorted({HOST, 'node-7'}))}" in elsewhere["otherData"]["clock"]["why_no_unix_time"]
