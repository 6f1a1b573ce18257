"""Randomised faults against real runs: every process gone, the documented exit code, no run
folder left silently, and a trace that reads.

For each trial: start ``python -m collviz <run> --headless --record T`` (all-reduce with many
timed calls, fsdp, or a bench sweep) with its own TMPDIR, wait until every rank has started, wait
a random 0–1.5 s more, then deliver one fault — SIGKILL of a random rank, or SIGINT, SIGTERM,
SIGHUP or SIGKILL to the launcher. Expected: exit 1 (a killed rank; or 0 when the run had already
finished), 128 + N for a signal N to the launcher (130, 143, 129; 0 when it came after the end),
and for SIGKILL of the launcher, no worker left within 5 s (they die with it) and its run folder
removed by the next run (``remove_stale_run_folders``). Prints one table row per (run, fault).

    python benchmarks/fault_trial.py [--trials 3] [--seed 1] [--quick]

``--quick`` runs one trial of all-reduce with a rank killed (the test suite runs it so the benchmark
cannot break silently).
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from collviz.runtime.sessions.local import remove_stale_run_folders
from collviz.runtime.wire.protocol import RankStart, RunEnd
from collviz.runtime.wire.trace import TraceError, read_trace

RUNS = {
    "all-reduce": ["all-reduce", "--gpus", "4", "--size", "1MiB", "--iters", "300"],
    "fsdp": ["fsdp", "--gpus", "4"],
    "bench": ["bench", "--gpus", "4", "--sizes", "1K:4M", "--iters", "10"],
}
FAULTS = ("kill -9 a rank", "SIGINT", "SIGTERM", "SIGHUP", "SIGKILL launcher")
SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGHUP": signal.SIGHUP,
           "SIGKILL launcher": signal.SIGKILL}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _worker_pids(trace: Path, proc: subprocess.Popen, timeout_s: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            pids = [e.pid for e in read_trace(trace).events if isinstance(e, RankStart)]
        except TraceError:
            pids = []
        if len(pids) == 4:
            return pids
        time.sleep(0.05)
    return []


def trial(run: str, fault: str, rng: random.Random, folder: Path) -> dict[str, object]:
    """One run and one fault; what was observed."""
    name = f"{run}-{fault.replace(' ', '_')}-{rng.randrange(10**9)}"
    trace = folder / f"{name}.cvz"
    tmp = folder / name  # this trial's TMPDIR: its run folder, if one is left, is found here
    tmp.mkdir()
    argv = [sys.executable, "-m", "collviz", *RUNS[run], "--backend", "gloo", "--record", str(trace)]
    if run != "bench":
        argv.append("--headless")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, env={**os.environ, "TMPDIR": str(tmp)})
    pids = _worker_pids(trace, proc)
    time.sleep(rng.uniform(0, 1.5))
    finished_before = proc.poll() is not None
    if fault == "kill -9 a rank":
        victim = rng.choice(pids)
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass
        expected = {0, 1}
    else:
        try:
            proc.send_signal(SIGNALS[fault])
        except ProcessLookupError:
            pass
        expected = {0, -signal.SIGKILL} if fault == "SIGKILL launcher" else {0, 128 + SIGNALS[fault]}
    try:
        _, err = proc.communicate(timeout=30)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        code = "hang"
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in pids if _alive(p)]
    folders = [f for f in tmp.iterdir() if f.name.startswith("collviz-")]
    announced = all(str(f) in err for f in folders)
    if fault == "SIGKILL launcher":  # nothing can run in a SIGKILLed process: the next run removes its folder
        removed = remove_stale_run_folders(tmp)
        announced = sorted(removed) == sorted(str(f) for f in folders)
        folders = [f for f in folders if f.exists()]
    try:
        events = read_trace(trace).events
        readable, ended = True, any(isinstance(e, RunEnd) for e in events)
    except TraceError:
        readable, ended = False, False
    return {"code_ok": code in expected or (finished_before and code == 0), "left": len(left),
            "silent_folders": 0 if announced else len(folders), "readable": readable, "ended": ended}


def main() -> None:
    """Run the trials and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=3, help="trials per (run, fault)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="one trial, a rank of all-reduce killed: a fast check")
    args = parser.parse_args()
    runs, faults = (["all-reduce"], FAULTS[:1]) if args.quick else (list(RUNS), FAULTS)
    if args.quick:
        args.trials = 1
    rng = random.Random(args.seed)
    rows: dict[tuple[str, str], collections.Counter[str]] = collections.defaultdict(collections.Counter)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        for run in runs:
            for fault in faults:
                for _ in range(args.trials):
                    seen = trial(run, fault, rng, Path(scratch))
                    row = rows[(run, fault)]
                    row["trials"] += 1
                    row["documented exit code"] += seen["code_ok"]
                    row["processes left"] += seen["left"]
                    row["run folders left silently"] += seen["silent_folders"]
                    row["trace readable"] += seen["readable"]
                    row["trace has RunEnd"] += seen["ended"]
    columns = ["trials", "documented exit code", "processes left", "run folders left silently", "trace readable",
               "trace has RunEnd"]
    print(f"{sum(r['trials'] for r in rows.values())} trials in {time.monotonic() - started:.0f} s")
    print("| run | fault | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for (run, fault), row in rows.items():
        print(f"| {run} | {fault} | " + " | ".join(str(row[c]) for c in columns) + " |")


if __name__ == "__main__":
    main()
