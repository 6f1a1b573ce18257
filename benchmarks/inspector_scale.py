"""A job's artifacts at the sizes that were quadratic or unbounded, each ÷ its goal (10 s, 1 GiB RSS).

Each case runs in a fresh process (its peak RSS is its own), on input written here:

- ``inspector-line``: NCCL Inspector output whose last line is 100 MB with no newline, read by the
  Inspector reader (it skips a stretch that is not JSON to its line's end, once);
- ``inspector-comms``: 10,000 Inspector communicators: 2,500 processes' files (one import opens
  at most 4,096), each a rank of the 2,500-rank world and of eight of 10,000 two-rank communicators
  (10,000 took 55 s before: a world's rank tuple sorted and hashed per call, each communicator's
  placement a pass over every record);
- ``fr-pickle``: a Flight Recorder pickle (10 MB) whose entries are 5 million references to one
  entry (86 s and 1.87 GB before: each reference read as an entry);
- ``fr-pg-config``: two ranks' dumps whose pg_config names 10⁶ ranks, opened and exported
  (export wrote 4 million events before: a process per rank named).

    python benchmarks/inspector_scale.py [--quick]

``--quick`` runs every case at a hundredth of its size (the test suite runs it so the benchmark
cannot break silently).
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from collviz.runtime.reports.export import perfetto_trace
from collviz.runtime.sources import open_artifacts
from collviz.runtime.sources.nccl_inspector import import_inspector

GOAL_S = 10.0
GOAL_RSS_MB = 1024.0
BASE_US = 1764097200000000
CASES = ("inspector-line", "inspector-comms", "fr-pickle", "fr-pg-config")


def _record(comm: str, rank: int, nranks: int, pid: int) -> str:
    """One Inspector record (NCCL 2.30's layout): an 8 MiB all-reduce, #0 on ``comm``."""
    return json.dumps({
        "header": {"id": comm, "comm_name": "unknown", "rank": rank, "n_ranks": nranks, "nnodes": 1},
        "metadata": {"inspector_output_format_version": "v4.0", "dump_timestamp_us": BASE_US, "hostname": "node",
                     "pid": pid},
        "coll_perf": {"coll": "AllReduce", "coll_sn": 0, "coll_msg_size_bytes": 8 << 20, "coll_exec_time_us": 5663.0,
                      "coll_timing_source": "kernel_gpu", "coll_algobw_gbs": 1.481301, "coll_busbw_gbs": 2.96}})


def _entry(seq: int) -> dict:
    """A Flight Recorder entry as torch 2.13 writes it: all_reduce #``seq`` of 8 floats, 1 ms."""
    return {"record_id": seq, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": seq,
            "p2p_seq_id": 0, "op_id": seq, "profiling_name": "nccl:all_reduce", "time_created_ns": 10**18 + seq * 10**6,
            "input_sizes": [[8]], "input_dtypes": ["Float"], "output_sizes": [[8]], "output_dtypes": ["Float"],
            "state": "completed", "retired": True, "timeout_ms": 600_000, "is_p2p": False, "duration_ms": 1.0}


def _dump(entries: list, ranks: int) -> dict:
    return {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(ranks)))}},
            "pg_status": {}, "entries": entries}


def write(case: str, folder: Path, scale: float) -> Path:
    """The input of ``case`` at ``scale`` (1: the full size) in ``folder``."""
    if case == "inspector-line":
        path = folder / "node-pid1.log"
        path.write_text(_record("0x1", 0, 1, 1) + "\n" + "x" * int(100_000_000 * scale))
        return path
    if case == "inspector-comms":
        n = max(8, int(2_500 * scale))
        for p in range(n):  # for k = 1..4 the pair (p, p+k) around a ring: 4n two-rank communicators
            lines = [_record("0xworld", p, n, p)]
            for k in range(1, 5):
                lines += [_record(f"0x{p:x}{k}", 0, 2, p), _record(f"0x{(p - k) % n:x}{k}", 1, 2, p)]
            (folder / f"node-pid{p}.log").write_text("\n".join(lines) + "\n")
        return folder
    if case == "fr-pickle":
        entry = _entry(1)
        (folder / "nccl_trace_rank_0").write_bytes(pickle.dumps(_dump([entry] * int(5_000_000 * scale), 1), protocol=4))
        return folder
    for rank in range(2):
        (folder / f"rank_{rank}.json").write_text(json.dumps(_dump([_entry(s) for s in (1, 2, 3)], int(1_000_000 * scale))))
    return folder


def run_case(case: str, path: Path) -> str:
    """Read ``path`` as ``case`` does; what was read, in a few words."""
    if case == "inspector-line":
        run = import_inspector([(path, path.read_text())], [])
    else:
        run = open_artifacts([path])
    if case == "fr-pg-config":
        return f"{len(perfetto_trace(run.events)['traceEvents']):,} export events"
    return f"{len(run.events):,} events"


def child(case: str, scale: float) -> None:
    """Write, then time ``case`` in this process; print seconds, peak RSS (MB) and what was read."""
    with tempfile.TemporaryDirectory() as folder:
        path = write(case, Path(folder), scale)
        started = time.perf_counter()
        read = run_case(case, path)
        seconds = time.perf_counter() - started
    print(json.dumps({"s": seconds, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "read": read}))


def main() -> None:
    """Every case in its own process; the table of each against its goals."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="every case at a hundredth of its size")
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--scale", type=float, default=1.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        child(args.case, args.scale)
        return
    scale = 0.01 if args.quick else 1.0
    print(f"{'case':<16} {'seconds':>8} {'÷ 10 s':>7} {'RSS MB':>8} {'÷ 1 GiB':>8}  read")
    worst = 0.0
    for case in CASES:
        done = subprocess.run([sys.executable, __file__, "--case", case, "--scale", str(scale)], capture_output=True,
                              text=True, timeout=300)
        if done.returncode:
            sys.exit(f"{case} failed:\n{done.stderr[-2000:]}")
        found = json.loads(done.stdout.strip().splitlines()[-1])
        worst = max(worst, found["s"] / GOAL_S, found["rss_mb"] / GOAL_RSS_MB)
        print(f"{case:<16} {found['s']:>8.2f} {found['s'] / GOAL_S:>7.2f} {found['rss_mb']:>8.0f} "
              f"{found['rss_mb'] / GOAL_RSS_MB:>8.2f}  {found['read']}")
    print(f"worst ratio to its goal: {worst:.2f} ({'met' if worst <= 1 else 'NOT met'})")


if __name__ == "__main__":
    main()
