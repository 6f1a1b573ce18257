"""Headless replay and export of a 612 MB trace (40 Buffer events of 1.7M values each) ÷ 10 s.

Such a trace is not one collviz writes (it ships at most 1,024 values per buffer and summarises
larger tensors) but one a damaged or foreign recorder could. The reader leaves value lists longer
than ``MAX_LOADED_VALUES`` encoded instead of building 68M Python floats, so both commands stay
far below the target; before that, headless replay did not finish in 20 s.

    python benchmarks/large_trace.py [--events 40] [--values 1700000] [--quick]

``--quick`` writes 4 buffers of 100,000 values (the test suite runs it so the benchmark cannot break
silently; the reader's bound is still crossed).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from collviz.runtime.wire.protocol import Buffer, RunEnd, RunStart, encode
from collviz.runtime.wire.trace import TraceWriter

TARGET_S = 10.0


def write_trace(path: Path, events: int, values: int) -> None:
    """RunStart, ``events`` Buffers of ``values`` float64 values over 4 ranks, RunEnd."""
    run = "large"
    start = RunStart(run=run, rank=-1, seq=0, t_ns=0, scenario="large", world_size=4, backend="gloo",
                     device_kind="cpu", backend_reason="synthetic", mode="live", phase_count=1)
    payload = [float(i % 1000) + 0.5 for i in range(values)]
    writer = TraceWriter(path)
    writer.write([encode(start)])
    for i in range(events):
        writer.write([encode(Buffer(run=run, rank=i % 4, seq=i // 4, t_ns=i, phase=0, name=f"grad{i}", role="grad",
                                    moment="after", shape=[values], dtype="float64", values=payload))])
    writer.write([encode(RunEnd(run=run, rank=-1, seq=1, t_ns=events, status="ok"))])
    writer.close()


def timed(argv: list[str]) -> tuple[float, int, str]:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "collviz", *argv], capture_output=True, text=True, timeout=120)
    return time.perf_counter() - started, result.returncode, next(iter(result.stderr.strip().splitlines()), "")


def main() -> None:
    """Write the trace, time both commands, print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=40)
    parser.add_argument("--values", type=int, default=1_700_000)
    parser.add_argument("--quick", action="store_true", help="4 buffers of 100,000 values: a fast check that it runs")
    args = parser.parse_args()
    if args.quick:
        args.events, args.values = 4, 100_000
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "large.cvz"
        write_trace(trace, args.events, args.values)
        size = trace.stat().st_size / 1e6
        rows = [("replay --headless", timed(["replay", str(trace), "--headless"])),
                ("export --perfetto", timed(["export", str(trace), "--perfetto", str(Path(folder) / "o.json")]))]
    print(f"trace: {size:,.0f} MB, {args.events} buffers of {args.values:,} values")
    print("| command | seconds | target | exit | first stderr line |\n|---|---|---|---|---|")
    for name, (seconds, code, line) in rows:
        print(f"| {name} | {seconds:.2f} | < {TARGET_S:g} | {code} | {line} |")


if __name__ == "__main__":
    main()
