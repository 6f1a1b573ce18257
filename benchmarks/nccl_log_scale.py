"""NCCL logs at the sizes that were quadratic, and a fuzz of failing, cut and glued logs.

Part 1, scale: each log below is opened by ``collviz replay LOG --headless`` in a child process
(wall time and peak RSS from ``wait4``), beside ``grep -c NCCL`` on the same file — the floor of
reading it at all — as a ratio. Issue 41's goals: a 100 MB one-line log and a 10⁶-rank ring line
each in at most 10 s and 1 GiB (before: an 80 KB line without a colon took 83 s, a 20,000-rank
ring line 45 s, a 100 MB line never ended).

Part 2, fuzz: a real 4-GPU log (nccl#671) changed at random — a WARN line put anywhere, a ring
order line cut (to 20 ranks of a larger job, or ending ``...``), its lines glued into a few long
ones — each opened in this process and checked: a WARN fails the run on its rank, a cut ring
is never closed and is said cut, glued lines read as the log did. No case may take over 30 s.

    python benchmarks/nccl_log_scale.py [--mutants 200] [--seed 1] [--quick]

``--quick``: 1 MB logs, a 100,000-rank ring and 12 mutants (the test suite runs it so the benchmark
cannot break silently).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

TARGET_S = 10.0
TARGET_BYTES = 1024**3
CASE_LIMIT_S = 30.0
REAL = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "nccl" / "real" / "nccl-671-one-process-4-gpus.log"
COMM = "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks {n} nNodes 1 localRanks 8 localRank 0 MNNVL 0\n"


def _ring(n: int) -> Iterator[str]:
    """A ``Channel 00/02 :`` order line of ``n`` ranks, in pieces."""
    yield COMM.format(n=n) + "h:1:2 [0] NCCL INFO Channel 00/02 :"
    for start in range(0, n, 10_000):
        yield "".join(f" {r:3d}" for r in range(start, min(n, start + 10_000)))


def _repeated(head: str, piece: str, size: int) -> Iterator[str]:
    """``head`` then ``piece`` over and over to about ``size`` characters, in 1 MB pieces."""
    yield head
    block = piece * max(1, 1_000_000 // len(piece))
    for _ in range(max(1, size // len(block))):
        yield block


def write_logs(folder: Path, megabytes: int, big_ring: int) -> dict[str, Path]:
    """The scale cases: name → a log file made in ``folder``, written in pieces (this process
    stays small: a child's peak RSS counts the pages it shares with its parent at the fork)."""
    size = megabytes * 1_000_000
    logs: dict[str, Iterable[str]] = {
        "80 KB line, no ':' or space": [COMM.format(n=4), "x" * 80_000 + " NCCL INFO"],
        f"{megabytes} MB one line, no ':' or space": _repeated(COMM.format(n=4), "x", size),
        f"{megabytes} MB one line of glued records": _repeated("", COMM.format(n=4).rstrip() + " ", size),
        "20,000-rank ring line": _ring(20_000),
        f"{big_ring:,}-rank ring line": _ring(big_ring),
    }
    paths = {}
    for number, (name, pieces) in enumerate(logs.items()):
        paths[name] = folder / f"scale-{number}.log"
        with paths[name].open("w") as out:
            out.writelines(pieces)
            out.write("\n")
    return paths


def measured(argv: list[str]) -> tuple[float, int, int]:
    """Wall seconds, peak RSS (bytes) and exit status of ``argv`` as a child."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    return time.perf_counter() - started, usage.ru_maxrss * 1024, os.waitstatus_to_exitcode(status)


def scale(folder: Path, megabytes: int, big_ring: int) -> bool:
    """Part 1: print each case's row; whether every goal was met."""
    grep = shutil.which("grep")
    print(f"{'log':34} {'size':>9} {'collviz':>8} {'peak RSS':>9} {'exit':>4} {'grep -c':>8} {'ratio':>7}  goal")
    met = True
    for name, path in write_logs(folder, megabytes, big_ring).items():
        wall, rss, status = measured([sys.executable, "-m", "collviz", "replay", str(path), "--headless"])
        floor = measured([grep, "-c", "NCCL", str(path)])[0] if grep else float("nan")
        ok = wall <= TARGET_S and rss <= TARGET_BYTES and status in (0, 1)
        met = met and ok
        print(f"{name:34} {path.stat().st_size / 1e6:7.1f}MB {wall:7.2f}s {rss / 2**20:7.0f}MiB {status:4} "
              f"{floor:7.2f}s {wall / floor:6.0f}x  {'met' if ok else 'NOT MET'}")
    return met


def _warning_mutant(lines: list[str], rng: random.Random) -> tuple[list[str], int]:
    """A WARN line of rank ``r`` (como's pid 60725 drives GPUs 0-3 as ranks 0-3) put anywhere."""
    rank = rng.randrange(4)
    line = f"como:60725:{rng.randrange(60800, 60900)} [{rank}] transport/net_ib.cc:1075 NCCL WARN NET/IB : error 12"
    at = rng.randrange(len(lines) + 1)
    return [*lines[:at], line, *lines[at:]], rank


def _cut_ring_mutant(rng: random.Random) -> tuple[list[str], int]:
    """A job of ``size`` ranks whose ring order line is cut: 20 ranks printed (NCCL <= 2.22), or fewer ending ``...``."""
    size = rng.randrange(21, 5000)
    order = list(range(size))
    rng.shuffle(order)
    shown = 20 if rng.random() < 0.5 else rng.randrange(2, 20)
    tail = "" if shown == 20 else "..."
    return [COMM.format(n=size).rstrip(), "h:1:2 [0] NCCL INFO Channel 00/02 :" + "".join(f" {r:3d}" for r in order[:shown])
            + tail], shown


def _glued_mutant(lines: list[str], rng: random.Random) -> list[str]:
    """The log's lines glued into a few long ones, at random places, with random spacing."""
    glued, current = [], []
    for line in lines:
        current.append(line)
        if rng.random() < 0.1:
            glued.append((" " * rng.randrange(1, 9)).join(current))
            current = []
    return [*glued, " ".join(current)] if current else glued


def fuzz(folder: Path, mutants: int, seed: int) -> bool:
    """Part 2: print a row per kind of mutant; whether every mutant read right within the limit."""
    from collviz.runtime.sources import open_artifacts  # imported only now: part 1's children fork a small process
    from collviz.runtime.wire.protocol import RankEnd, RankStart, Transfer

    rng = random.Random(seed)
    lines = REAL.read_text().splitlines()
    reference = open_artifacts([REAL])
    ranks = sorted(e.rank for e in reference.events if isinstance(e, RankStart))
    rows: dict[str, list[float]] = {"WARN line anywhere": [], "ring line cut": [], "lines glued": []}
    wrong: list[str] = []
    for number in range(mutants):
        kind = list(rows)[number % len(rows)]
        path = folder / f"mutant-{number}.log"
        if kind == "WARN line anywhere":
            text, rank = _warning_mutant(lines, rng)
        elif kind == "ring line cut":
            text, shown = _cut_ring_mutant(rng)
        else:
            text = _glued_mutant(lines, rng)
        path.write_text("\n".join(text) + "\n")
        started = time.perf_counter()
        run = open_artifacts([path])
        rows[kind].append(time.perf_counter() - started)
        if kind == "WARN line anywhere":
            errors = [e.rank for e in run.events if isinstance(e, RankEnd) and e.status == "error"]
            if run.exit_status != 1 or errors != [rank]:
                wrong.append(f"{path.name}: a WARN of rank {rank} read as exit {run.exit_status}, errors on {errors}")
        elif kind == "ring line cut":
            hops = {(e.src, e.dst) for e in run.events if isinstance(e, Transfer)}
            if len(hops) != shown - 1 or not any("is cut in the log" in w for w in run.warnings):
                wrong.append(f"{path.name}: {shown} ranks shown, {len(hops)} hops drawn")
        elif sorted(e.rank for e in run.events if isinstance(e, RankStart)) != ranks:
            wrong.append(f"{path.name}: glued lines lost ranks")
        path.unlink()
    print(f"\n{'fuzz mutant':22} {'count':>6} {'slowest':>9}")
    for kind, seconds in rows.items():
        print(f"{kind:22} {len(seconds):6} {max(seconds, default=0):8.3f}s")
    slow = max((s for seconds in rows.values() for s in seconds), default=0) > CASE_LIMIT_S
    for line in wrong[:10]:
        print(f"  wrong: {line}")
    print(f"every mutant read right: {'yes' if not wrong else f'no ({len(wrong)})'}; none over {CASE_LIMIT_S:.0f} s: "
          f"{'no' if slow else 'yes'}")
    return not wrong and not slow


def main() -> None:
    """Make the logs, time collviz on them, fuzz, print the tables; exit 1 if a goal was missed."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mutants", type=int, default=210)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="1 MB logs, 12 mutants: a fast check that it runs")
    args = parser.parse_args()
    megabytes, big_ring = (1, 100_000) if args.quick else (100, 1_000_000)
    with tempfile.TemporaryDirectory(prefix="collviz-nccl-scale-") as folder:
        met = scale(Path(folder), megabytes, big_ring)
        read_right = fuzz(Path(folder), 12 if args.quick else args.mutants, args.seed)
    print(f"\ngoals ({TARGET_S:.0f} s, {TARGET_BYTES / 2**30:.0f} GiB per log; fuzz right, none over "
          f"{CASE_LIMIT_S:.0f} s): {'met' if met and read_right else 'NOT MET'}")
    raise SystemExit(0 if read_right else 1)


if __name__ == "__main__":
    main()
