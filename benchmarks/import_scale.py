"""Opening a job-sized set of Flight Recorder dumps: seconds and peak memory of
``collviz replay DIR --headless``, beside torch's own analyser (``fr_trace``) on the same files.

A tiny real job (2 gloo ranks, all_reduce and all_gather) writes one Flight Recorder dump with
torch's own dump function; its entries are then repeated, renumbered and re-timed into one dump
per rank for ``--ranks`` ranks of ``--entries`` calls each, written as the pickle torch writes on a
watchdog timeout (``nccl_trace_rank_<r>``, the only form torch's analyser reads). Each command
runs in a child process; its wall time and peak RSS come from ``wait4``. The goal (issue 29 item
6) is 1,024 ranks × 2,000 entries in at most 10 s and 2 GiB on the 2-core machine.

    python benchmarks/import_scale.py [--ranks 1024] [--entries 2000] [--quick] [--no-torch]

``--quick``: 8 ranks × 200 entries (the test suite runs it so the benchmark cannot break silently).
"""

from __future__ import annotations

import argparse
import copy
import multiprocessing as mp
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 10.0
TARGET_BYTES = 2 * 1024**3
_WORLD = 2


def _real_rank(rank: int, meeting: str, out: str) -> None:
    """One rank of the tiny real job: a few calls, then rank 0 writes its dump."""
    os.environ["TORCH_FR_BUFFER_SIZE"] = "2000"
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import _dump_fr_trace

    try:
        dist.init_process_group("gloo", init_method=f"file://{meeting}", rank=rank, world_size=_WORLD)
        for _ in range(2):
            dist.all_reduce(torch.ones(1024))
            dist.all_gather_single(torch.empty(1024 * _WORLD), torch.ones(1024))
        time.sleep(0.5)  # gloo's Flight Recorder retires a call a moment after it returns
        if rank == 0:
            Path(out).write_bytes(_dump_fr_trace(True, False))
        dist.barrier()
        dist.destroy_process_group()  # after the barrier: every peer is there (a finally could wait on a stuck one)
    finally:
        os._exit(0)  # never the C++ teardown at exit


def real_dump() -> dict:
    """Rank 0's Flight Recorder dump of a tiny real gloo job, decoded."""
    ctx = mp.get_context("fork")
    with tempfile.TemporaryDirectory(prefix="collviz-fr-real-") as folder:
        out = os.path.join(folder, "dump")
        procs = [ctx.Process(target=_real_rank, args=(r, os.path.join(folder, "store"), out)) for r in range(_WORLD)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(60)
            if proc.is_alive():
                proc.kill()
        dump = pickle.loads(Path(out).read_bytes())
    if not dump.get("entries"):
        raise SystemExit("the real job's dump holds no entries")
    return dump


def scaled_dump(real: dict, rank: int, ranks: int, entries: int) -> dict:
    """``real`` as rank ``rank`` of a ``ranks``-rank job would have dumped ``entries`` calls: its
    entries repeated in turn, numbered from 1, each rank's clock a little apart."""
    template = real["entries"]
    made = []
    for i in range(entries):
        entry = copy.copy(template[i % len(template)])
        entry.update(record_id=i, collective_seq_id=i + 1, p2p_seq_id=0,
                     time_created_ns=entry["time_created_ns"] + i * 50_000 + rank * 7)
        made.append(entry)
    dump = dict(real, entries=made)
    dump["pg_config"] = {name: dict(config, ranks=str(list(range(ranks))))
                         for name, config in real["pg_config"].items()}
    return dump


def write_dumps(folder: Path, real: dict, ranks: int, entries: int) -> int:
    """One pickle per rank in ``folder``; returns the bytes written."""
    folder.mkdir(parents=True, exist_ok=True)
    total = 0
    for rank in range(ranks):
        data = pickle.dumps(scaled_dump(real, rank, ranks, entries))
        (folder / f"nccl_trace_rank_{rank}").write_bytes(data)
        total += len(data)
    return total


def measured(argv: list[str]) -> tuple[float, int, int, str]:
    """Wall seconds, peak RSS (bytes), exit status and the last line of stderr of ``argv`` as a child."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        lines = err.read().decode("utf-8", "replace").strip().splitlines()
    return wall, usage.ru_maxrss * 1024, child.returncode, lines[-1][:150] if lines else ""


def main() -> None:
    """Make the dumps, time both tools on them, print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="8 ranks x 200 entries: a fast check that it runs")
    parser.add_argument("--no-torch", action="store_true", help="leave out torch's analyser")
    args = parser.parse_args()
    if args.quick:
        args.ranks, args.entries = 8, 200
    real = real_dump()
    with tempfile.TemporaryDirectory(prefix="collviz-fr-scale-") as folder:
        dumps = Path(folder) / "dumps"
        started = time.perf_counter()
        size = write_dumps(dumps, real, args.ranks, args.entries)
        print(f"{args.ranks} ranks x {args.entries} entries ({args.ranks * args.entries:,} call-ranks), "
              f"{size / 1e6:.0f} MB of pickles made from a real gloo dump in {time.perf_counter() - started:.1f} s")
        rows = [("collviz replay --headless", [sys.executable, "-m", "collviz", "replay", str(dumps), "--headless"])]
        if not args.no_torch:
            rows.append(("torch fr_trace", [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace",
                                            str(dumps), "--prefix", "nccl_trace_rank_"]))
        print(f"{'':28} {'wall':>8} {'peak RSS':>10} {'exit':>5}  last line of stderr")
        for name, argv in rows:
            wall, rss, status, last = measured(argv)
            print(f"{name:28} {wall:7.1f}s {rss / 2**20:8.0f} MiB {status:5}  {last}")
            if name.startswith("collviz"):
                met = wall <= TARGET_S and rss <= TARGET_BYTES
                print(f"{'':28} goal {TARGET_S:.0f} s and {TARGET_BYTES / 2**30:.0f} GiB: {'met' if met else 'not met'}")


if __name__ == "__main__":
    main()
