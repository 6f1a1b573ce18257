"""The pipeline bubble, measured: GPipe and 1F1B at several microbatch counts, beside (p−1)/(m+p−1).

Runs ``collviz pp`` once per (schedule, microbatches) on gloo ranks, recording each run, and
reads the measured bubble (the mean over stages of the time a stage was not computing, between
the step's first and last span on any rank) and each stage's activation high-water mark from the
trace. ``--wide`` runs a heavier model (d_model 256, 64 tokens, 32 sequences), so that compute
rather than message latency and Python overhead dominates and the measurement approaches the
formula's assumptions.

    python benchmarks/pipeline_bubble.py [--gpus 4] [--microbatches 4 8] [--wide] [--quick]

``--quick`` runs 1F1B once on 2 ranks with 2 microbatches (the test suite runs it so the benchmark
cannot break silently).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from collviz.runtime.reports.pipeline import activation_rise, ideal_bubble, timeline_of
from collviz.runtime.wire.protocol import Memory, Span
from collviz.runtime.wire.trace import read_trace

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "pp.toml"


def _wide_scenario(folder: Path) -> Path:
    """pp.toml with a heavier model: d_model 256, seq 64, batch 32."""
    text = SCENARIO.read_text()
    for key, value in (("d_model", 256), ("seq", 64), ("batch", 32)):
        text = "\n".join(f"{key} = {value}" if line.startswith(f"{key} =") else line for line in text.splitlines())
    (folder / "wide").mkdir()
    path = folder / "wide" / "pp.toml"  # a scenario's name must be its file's
    path.write_text(text + "\n")
    return path


def measure(target: str, gpus: int, schedule: str, microbatches: int, folder: Path) -> tuple[float, list[int]]:
    """(measured bubble, each stage's activation rise in bytes) of one recorded run."""
    trace_path = folder / f"{schedule}-{microbatches}.cvz"
    run = subprocess.run([sys.executable, "-m", "collviz.app.cli", target, "--gpus", str(gpus), "--backend", "gloo",
                          "--schedule", schedule, "--microbatches", str(microbatches), "--headless",
                          "--record", str(trace_path)], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if run.returncode:
        raise SystemExit(f"pp --schedule {schedule} --microbatches {microbatches} failed: {run.stderr.strip()}")
    events = read_trace(trace_path).events
    spans = [e for e in events if isinstance(e, Span)]
    memory = [e for e in events if isinstance(e, Memory)]
    rises = [activation_rise(memory, rank, spans[0].phase) for rank in range(gpus)]
    return timeline_of(spans).mean_bubble(), rises


def main() -> None:
    """Run every (schedule, microbatches) pair and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--microbatches", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--wide", action="store_true", help="a heavier model: compute dominates")
    parser.add_argument("--quick", action="store_true", help="1F1B on 2 ranks, 2 microbatches: a fast check that it runs")
    args = parser.parse_args()
    schedules = ("1f1b",) if args.quick else ("gpipe", "1f1b")
    if args.quick:
        args.gpus, args.microbatches = 2, [2]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        target = str(_wide_scenario(folder)) if args.wide else "pp"
        print(f"pp on {args.gpus} gloo ranks ({'wide model' if args.wide else 'pp.toml'}), {os.cpu_count()} CPU cores")
        print(f"{'schedule':>8} {'m':>3} {'bubble measured':>16} {'(p−1)/(m+p−1)':>14}  activation rise per stage (KiB)")
        for schedule in schedules:
            for m in args.microbatches:
                bubble, rises = measure(target, args.gpus, schedule, m, folder)
                print(f"{schedule:>8} {m:>3} {bubble:>16.3f} {ideal_bubble(args.gpus, m):>14.3f}  "
                      + " ".join(f"{r / 1024:7.0f}" for r in rises))


if __name__ == "__main__":
    main()
