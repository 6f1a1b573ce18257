"""``collviz replay TRACE --headless`` and ``--json`` of a 1M-event trace: read through its index
and read whole, side by side (issue 43 item 8; goal ≤ 1 s through the index).

Per rank count, the flood trace of ``benchmarks/viewer.py`` (all-gathers with buffers, transfers
and memory samples; ~1,000,000 events) is written once with its index (as collviz records), and
copied without it: the careful reader's path, which every trace took before (and one whose index
predates index version 3 still takes). Each round runs every command once, in turn, as a user
would (a fresh ``python -m collviz``, its output to a file): wall seconds and CPU seconds (user +
system of the command), and the bytes it printed. This checkout's two paths must print the same
bytes: the script stops if they differ.

    python benchmarks/replay_headless.py [--events 1000000] [--ranks 8,64] [--rounds 3]
                                         [--before DIR] [--quick]

``--before DIR`` also runs the collviz of another checkout (``git worktree add DIR main``) on the
trace with its index, through a ``PYTHONPATH`` folder as ``startup.py --before`` does (its output
may differ where the summary changed: its bytes are shown). ``--quick`` is 40,000 events at 8 ranks, one round (the test suite runs it
so the benchmark cannot break silently).
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from startup import ENVIRONMENT, Timings, checkout_environment  # noqa: E402
from viewer import write_flood  # noqa: E402

GOAL_S = 1.0
"""Issue 43's goal for a 1M-event trace read through its index."""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def replayed(trace: Path, option: str, output: Path, environment: dict[str, str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of ``collviz replay TRACE option``, and the SHA-256 of what it printed
    (left in ``output``)."""
    cpu, start = _children_cpu(), time.perf_counter()
    with open(output, "wb") as sink:
        subprocess.run([sys.executable, "-m", "collviz", "replay", str(trace), option], check=True, stdout=sink,
                       stderr=subprocess.PIPE, env=environment)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    return wall, cpu, hashlib.sha256(output.read_bytes()).hexdigest()


def measure(ranks: int, events: int, rounds: int, folder: Path, before: dict[str, str] | None) -> list[str]:
    """Every command at ``ranks`` ranks, ``rounds`` times: the table's rows."""
    indexed = folder / f"flood-{ranks}.cvz"
    count = write_flood(indexed, events, ranks)
    whole = folder / f"whole-{ranks}.cvz"
    shutil.copyfile(indexed, whole)
    paths = {"through its index": (indexed, ENVIRONMENT), "read whole (no index)": (whole, ENVIRONMENT)}
    if before is not None:
        paths["before (--before DIR), through its index"] = (indexed, before)
    rows = [f"\n{count:,} events, {ranks} ranks ({indexed.stat().st_size / 1e6:.0f} MB; median of {rounds})",
            f"{'command':<60} {'wall s':>8} {'CPU s':>8} {'printed':>9}  goal (CPU)  rounds (wall)"]
    for option in ("--headless", "--json"):
        timings = {name: Timings() for name in paths}
        digests: dict[str, set[str]] = {name: set() for name in paths}
        printed: dict[str, int] = {}
        for _ in range(rounds):
            for name, (trace, environment) in paths.items():
                output = folder / "out.txt"
                wall, cpu, digest = replayed(trace, option, output, environment)
                timings[name].add(wall, cpu)
                digests[name].add(digest)
                printed[name] = output.stat().st_size
        if len(set().union(*(found for name, found in digests.items() if not name.startswith("before")))) != 1:
            raise SystemExit(f"replay {option} printed different outputs by path at {ranks} ranks")
        for name, timing in timings.items():
            cpu = statistics.median(timing.cpu)
            goal = f"≤ {GOAL_S:g} {'yes' if cpu <= GOAL_S else 'NO '}" if name == "through its index" else ""
            spread = " ".join(f"{w:.2f}" for w in timing.wall)
            rows.append(f"{'replay ' + option + ', ' + name:<60} {statistics.median(timing.wall):>8.2f} {cpu:>8.2f}"
                        f" {printed[name] / 1e6:>7.2f}MB  {goal:<10}  {spread}")
    return rows


def main() -> None:
    """Write the traces, time every command, print one table per rank count."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--ranks", default="8,64", help="rank counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, metavar="DIR", help="also run the collviz of this checkout")
    parser.add_argument("--quick", action="store_true", help="40,000 events at 8 ranks, one round")
    args = parser.parse_args()
    if args.quick:
        args.events, args.ranks, args.rounds = 40_000, "8", 1
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        before = checkout_environment(args.before, folder / "before") if args.before is not None else None
        for ranks in (int(r) for r in args.ranks.split(",")):
            print("\n".join(measure(ranks, args.events, args.rounds, folder, before)), flush=True)
    print("\n(wall times on a shared machine swing with its load; CPU is the command's own, user + system)")


if __name__ == "__main__":
    main()
