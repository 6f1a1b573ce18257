"""Start-up: ``collviz all-reduce --gpus N --headless`` ÷ the fork floor, at several N, side by side.

The fork floor is the least a forking launcher can do: one Python that imports torch once, forks
N ranks that join a gloo group, run one all_reduce and leave with ``os._exit``, and ends the same
way (``_fork_floor.py``). The bare launcher (N fresh interpreters, each importing torch) is shown
beside it for scale. Also ``collviz --version`` (goal ≤ 0.3 s). Goal (issue 23): collviz ÷ floor
≤ 1.2 at 4 and 64 ranks. Rounds alternate the commands, so machine noise hits them alike.

Every command runs once untimed before the rounds, with bytecode writing allowed: no round pays
for compiling collviz's modules, as no start of an installed collviz does (pip compiles them at
install). A checkout run with ``PYTHONDONTWRITEBYTECODE=1`` compiles about 100 of them on every
start (0.2 s on 2 cores): that is the checkout's cost, not collviz's.

``--timeline`` records each collviz round's trace and says where its time went, from the
command's start (the events' ``t_ns`` and this script share CLOCK_MONOTONIC): the forks done
(RunStart), every rank in the process group (RankStart), the scenario over (RankEnd), every
worker reaped (RunEnd), the command's exit.

    python benchmarks/startup.py [--ranks 4,64] [--rounds 5] [--timeline] [--before DIR] [--quick]

Every figure is the command's wall time and, beside it, its CPU: user + system time of the
command and of every process it waited for (the launcher reaps its workers), which a machine shared
with other work disturbs far less than the wall clock.

``--before DIR`` also runs the collviz of another checkout (e.g. ``git worktree add DIR main``),
alternated with the floor and this checkout's in every round (the two take turns going first);
each runs through a ``PYTHONPATH``
folder that maps its package folders as its pyproject.toml's ``package-dir`` does.

``--quick`` is one round at 2 ranks (the test suite runs it so the benchmark cannot break silently).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bare import free_port  # noqa: E402

HERE = Path(__file__).resolve().parent
BARE = HERE / "_bare.py"
FLOOR = HERE / "_fork_floor.py"


ENVIRONMENT = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
"""The commands' environment: this one, with bytecode writing allowed (see the module's docstring)."""


@dataclass
class Timings:
    """One command's rounds: wall seconds and CPU seconds (its own and its reaped children's)."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def add(self, wall: float, cpu: float) -> None:
        """Record one round."""
        self.wall.append(wall)
        self.cpu.append(cpu)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _seconds(command: list[str], environment: dict[str, str] = ENVIRONMENT) -> tuple[float, float]:
    """Wall and CPU seconds of ``command`` (CPU: it and every process it reaped)."""
    cpu, start = _children_cpu(), time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=environment)
    return time.perf_counter() - start, _children_cpu() - cpu


def bare_launcher(ranks: int) -> float:
    """Seconds for N fresh interpreters: import torch, init gloo, one all_reduce, exit."""
    start = time.perf_counter()
    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, str(BARE), str(rank), str(ranks), port]) for rank in range(ranks)]
    for proc in procs:
        assert proc.wait() == 0
    return time.perf_counter() - start


def fork_floor(ranks: int) -> tuple[float, float]:
    """Wall and CPU seconds for one Python that imports torch once and forks N gloo ranks (one all_reduce)."""
    return _seconds([sys.executable, str(FLOOR), str(ranks)])


def _collviz_command(ranks: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "collviz.app.cli", "all-reduce", "--gpus", str(ranks), "--backend", "gloo",
            "--headless", *extra]


def checkout_environment(checkout: Path, folder: Path) -> dict[str, str]:
    """The commands' environment running ``checkout``'s collviz: ``folder`` gets a ``collviz``
    package whose entries link to the checkout's folders as its pyproject.toml's ``package-dir``
    maps them, and goes first on ``PYTHONPATH`` (before any installed collviz)."""
    checkout = checkout.resolve()
    package_dirs = tomllib.loads((checkout / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    top = folder / "collviz"
    top.mkdir(parents=True)
    for entry in (checkout / package_dirs["collviz"]).iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    for package, path in package_dirs.items():
        if package != "collviz":
            top.joinpath(*package.split(".")[1:]).symlink_to(checkout / path)
    return {**ENVIRONMENT, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), ENVIRONMENT.get("PYTHONPATH")]))}


def collviz_headless(ranks: int, environment: dict[str, str] = ENVIRONMENT) -> tuple[float, float]:
    """Wall and CPU seconds for the whole ``collviz all-reduce --gpus N --headless`` command."""
    return _seconds(_collviz_command(ranks), environment)


MARKS = ("forked (RunStart)", "last RankStart", "last RankEnd", "reaped (RunEnd)", "exit")
"""The moments :func:`collviz_timeline` reports, in order."""


def collviz_timeline(ranks: int, environment: dict[str, str] = ENVIRONMENT) -> tuple[dict[str, float], float]:
    """The same command, recording its trace: seconds from its start to each of :data:`MARKS`,
    and its CPU seconds."""
    from collviz.runtime.wire.trace import read_trace

    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder, "startup.cvz")
        start = time.monotonic_ns()
        _, cpu = _seconds(_collviz_command(ranks, "--record", str(trace)), environment)
        end = time.monotonic_ns()
        events = [event for event in read_trace(trace).events if hasattr(event, "t_ns")]

    def last(kind: str) -> float:
        return (max(e.t_ns for e in events if type(e).__name__ == kind) - start) / 1e9

    return ({"forked (RunStart)": last("RunStart"), "last RankStart": last("RankStart"),
             "last RankEnd": last("RankEnd"), "reaped (RunEnd)": last("RunEnd"), "exit": (end - start) / 1e9}, cpu)


def _row(label: str, times: list[float]) -> str:
    return f"{label:>34} {statistics.median(times):>10.2f}  {' '.join(f'{t:.2f}' for t in times)}"


def _ratio(label: str, ours: Timings, floor: Timings) -> str:
    wall = statistics.median(ours.wall) / statistics.median(floor.wall)
    cpu = statistics.median(ours.cpu) / statistics.median(floor.cpu)
    return f"{label + ' ÷ fork floor':>34} {wall:>10.2f}  CPU {cpu:.2f}  (goal ≤ 1.2)"


def main() -> None:
    """Measure and print one table per rank count, then ``--version``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="4,64", help="rank counts, comma-separated (default 4,64)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--timeline", action="store_true",
                        help="also say where each collviz round's time went (it records a trace, then)")
    parser.add_argument("--before", type=Path, metavar="DIR",
                        help="also run the collviz of this checkout, alternated with this one")
    parser.add_argument("--quick", action="store_true", help="one round at 2 ranks: a fast check that it runs")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.ranks, args.timeline = 1, "2", True
    with tempfile.TemporaryDirectory() as links:
        trees = {"collviz": ENVIRONMENT}
        if args.before is not None:  # both through the same kind of folder: imported alike
            trees = {"before": checkout_environment(args.before, Path(links, "before")),
                     "after": checkout_environment(HERE.parent, Path(links, "after"))}
        measure(args, trees)


def measure(args: argparse.Namespace, trees: dict[str, dict[str, str]]) -> None:
    """The rounds at every rank count, each tree's command alternated with the floor; the tables."""
    fork_floor(2)  # untimed: bytecode written, files cached (see the module's docstring)
    for environment in trees.values():
        collviz_headless(2, environment)
    for ranks in (int(r) for r in args.ranks.split(",")):
        bare, floor = [], Timings()
        ours = {label: Timings() for label in trees}
        timelines: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
        for round_index in range(args.rounds):
            floor.add(*fork_floor(ranks))
            labels = list(trees)
            turn = round_index % len(labels)  # each tree goes first in turn: none always follows another
            for label in labels[turn:] + labels[:turn]:
                environment = trees[label]
                if args.timeline:
                    timeline, cpu = collviz_timeline(ranks, environment)
                    timelines[label].append(timeline)
                    ours[label].add(timeline["exit"], cpu)
                else:
                    ours[label].add(*collviz_headless(ranks, environment))
            if ranks <= 16:  # N fresh interpreters importing torch at once: a minute at 64 on 2 cores
                bare.append(bare_launcher(ranks))
        print(f"{ranks} ranks{'':>25} {'median (s)':>10}  all rounds")
        print(_row("fork floor (one import, N forks)", floor.wall))
        print(_row("… its CPU", floor.cpu))
        for label, timings in ours.items():
            print(_row(f"{label} --headless", timings.wall))
            print(_row("… its CPU", timings.cpu))
        if bare:
            print(_row(f"bare launcher ({ranks} fresh)", bare))
        for label, timings in ours.items():
            print(_ratio(label, timings, floor))
        for label, rounds in timelines.items():
            for mark in MARKS if rounds else ():
                print(_row(f"{label}: {mark}", [timeline[mark] for timeline in rounds]))
    for label, environment in trees.items():
        version = [_seconds([sys.executable, "-m", "collviz.app.cli", "--version"], environment)[0]
                   for _ in range(args.rounds)]
        print(_row(f"{label} --version", version) + "  (goal ≤ 0.3)")


if __name__ == "__main__":
    main()
