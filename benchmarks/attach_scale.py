"""How fast ``collviz attach`` refreshes a large job: a synthetic job of W worker servers (one
process, ``_fr_servers.py``), each serving a real Flight Recorder answer of N calls (taken from a
real gloo rank, ``_fr_rank.py``, then given to every rank of a W-rank group: one rank has not
entered the last call, every other rank waits in it).

Measured side by side on the same answers: one full reading of every rank (every answer fetched in
parallel, decoded and analysed: who waits on whom), as attach reads now (each entry skimmed, only
the calls from the last one every rank completed decoded: ``runtime/live/tail.py``) and as it
read before (every answer decoded whole and every call analysed). Printed: bytes per reading, the
median time of a reading and the refresh rate it allows, the slowest rank's answer, and the ratio.

    python benchmarks/attach_scale.py [--ranks 64] [--entries 2000] [--readings 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from collviz.runtime.live.reading import Reading, waits_of
from collviz.runtime.live.recorder_reader import RECORDERS, RecorderReader
from collviz.runtime.live.workers import Answer, Worker, ask_all, find_sockets
from collviz.runtime.sources.flight_recorder import Dump, import_dumps
from collviz.runtime.wire.protocol import Stall

HERE = Path(__file__).parent
BEHIND = 5
"""The rank that has not entered the last call (mod the number of ranks)."""


def _real_dump(entries: int, folder: Path) -> dict:
    path = folder / "real.json"
    subprocess.run([sys.executable, str(HERE / "_fr_rank.py"), str(entries), "--dump", str(path)], check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})
    return json.loads(path.read_bytes())


def _job(real: dict, ranks: int, folder: Path) -> None:
    """rank<r>.json for every rank: the real calls in a group of ``ranks``; rank BEHIND has not
    entered the last call, which every other rank is still in."""
    real["pg_config"] = {"": {"name": "", "desc": "", "ranks": json.dumps(list(range(ranks)))}}
    last = real["entries"][-1]
    for rank in range(ranks):
        entries = real["entries"][:-1] if rank == BEHIND % ranks else [*real["entries"][:-1], {**last, "retired": False}]
        (folder / f"rank{rank}.json").write_text(json.dumps({**real, "entries": entries}))


def _old_read(workers: Sequence[Worker], answers: dict[str, dict[int, Answer]]) -> list[Stall]:
    """The reading as attach did it before: every answer decoded whole, every call analysed."""
    dumps = []
    for worker in workers:
        content = json.loads(answers[RECORDERS[0]][worker.rank].body or b"")
        dumps.append(Dump(worker.path, worker.rank, content))
    return [event for event in import_dumps(dumps, []).events if isinstance(event, Stall)]


def main() -> None:
    """Serve the synthetic job, time the readings, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--readings", type=int, default=5, help="timed readings each way (default 5)")
    parser.add_argument("--quick", action="store_true", help="8 ranks of 200 calls, 2 readings (seconds)")
    args = parser.parse_args()
    ranks, entries, readings = (8, 200, 2) if args.quick else (args.ranks, args.entries, args.readings)
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        _job(_real_dump(entries, folder), ranks, folder)
        servers = subprocess.Popen([sys.executable, str(HERE / "_fr_servers.py"), str(folder)], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
        try:
            if servers.stdout is None or servers.stdout.readline().strip() != "ready":
                raise SystemExit("attach_scale: the synthetic servers did not start")
            workers = find_sockets(str(folder / "sockets"))
            fetched: list[dict[int, Answer]] = []

            def ask(asked: Sequence[Worker], handler: str, timeout_s: float) -> dict[int, Answer]:
                answers = ask_all(asked, handler, timeout_s)
                if handler == RECORDERS[0]:
                    fetched.append(answers)
                return answers

            now: list[float] = []
            reading: Reading | None = None
            for _ in range(readings):
                start = time.perf_counter()
                reading = RecorderReader(workers, 10.0, ask=ask, from_first=False).read()
                now.append(time.perf_counter() - start)
            start = time.perf_counter()  # the old way is slow: once is enough
            answers = {handler: ask_all(workers, handler, 10.0) for handler in RECORDERS}
            fetch_s = time.perf_counter() - start
            stalls = _old_read(workers, answers)
            before_s = time.perf_counter() - start
        finally:
            servers.communicate("")
    assert reading is not None
    missing = sorted({r for wait in waits_of(reading).values() for r in wait.missing})
    old_missing = sorted(set(range(ranks)) - {r for stall in stalls for r in stall.waiting})
    if missing != [BEHIND % ranks] or old_missing != missing:
        raise SystemExit(f"attach_scale: the readings found {missing} and {old_missing} missing, not [{BEHIND % ranks}]")
    size = sum(len(answer.body or b"") for answer in fetched[-1].values())
    slowest = max(answer.took_s for answer in fetched[-1].values())
    after_s = statistics.median(now)
    print(f"attach_scale: {ranks} synthetic worker servers, {entries} real calls each; {size / 1e6:.1f} MB per reading; "
          f"rank {BEHIND % ranks} found missing both ways")
    print(f"{'reading':<44}{'median':>9}{'refresh rate':>14}")
    print(f"{'before: every answer decoded, every call':<44}{before_s:>8.2f}s{1 / before_s:>11.2f} Hz")
    print(f"{'now: skimmed, the calls not all completed':<44}{after_s:>8.2f}s{1 / after_s:>11.2f} Hz")
    print(f"{'  of which fetching every answer':<44}{fetch_s:>8.2f}s"
          f"   (slowest rank's answer {slowest * 1e3:.0f} ms)")
    print(f"ratio before/now: {before_s / after_s:.1f}x")


if __name__ == "__main__":
    main()
