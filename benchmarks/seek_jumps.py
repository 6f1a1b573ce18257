"""Seeking at 64 ranks: cold jumps (steps never visited nor built ahead) and stepping, each in a
fresh interpreter, this checkout beside another (issue 43 item 8; goal ≤ 5 ms of CPU a seek).

The 64-rank flood trace of ``benchmarks/viewer.py`` (all-gathers with buffers, transfers and
memory samples; ~1,000,000 events) is written once with its index: every step alike, or with
``--varied`` each step's calls taking their own times and its buffers holding their own values (a
training run's steps; a pane that keeps what it drew last rebuilds at every jump there). Each round opens it in the
headless viewer (160×50) in a fresh interpreter per order of seeks, and times the CPU (user +
system, both threads) of each ``action_seek_to``, which builds the view and updates every pane:

- *jumps* 8, 6, 4, 2, 7, 5, 3: the first four land on steps nothing has decoded yet (each move
  builds the view at the step after the one it lands on, so 7, 5 and 3 find some events decoded);
- *stepping* 1–8, then 1 and 8, as ``viewer.py`` seeks: each move finds its view built ahead.

The CPU clock, not the wall: on a shared machine the wall swings with the load, the process's own
CPU far less. ``--before DIR`` runs the collviz of another checkout (``git worktree add DIR
c1ed991``) through a ``PYTHONPATH`` folder as ``startup.py --before`` does, alternating with this
one in every round (the two take turns going first).

    python benchmarks/seek_jumps.py [--events 1000000] [--ranks 64] [--rounds 3] [--varied] [--before DIR] [--quick]

``--quick`` is 40,000 events at 8 ranks, one round (the test suite runs it so it cannot break silently).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from startup import ENVIRONMENT, checkout_environment  # noqa: E402
from viewer import PHASES, SIZE, write_flood  # noqa: E402

GOAL_MS = 5.0
"""Issue 43's goal for a seek at 64 ranks, in CPU milliseconds."""

ORDERS = {"jumps": [8, 6, 4, 2, 7, 5, 3], "stepping": [*range(1, PHASES + 1), 1, PHASES]}
"""The seeks of each fresh interpreter, by the name the table gives them (steps, 1-based)."""


async def seek_cpu(trace: Path, steps: list[int]) -> list[float]:
    """Open ``trace`` in the headless viewer, seek to each of ``steps`` in turn (letting the
    screen refresh between, as a user's keys would): the CPU milliseconds of each seek."""
    from collviz.app.app import make_app

    app = make_app(trace=trace)
    cpu = []
    async with app.run_test(size=SIZE) as pilot:
        while not app.loaded:
            await asyncio.sleep(0.005)
        await pilot.pause()
        for step in steps:
            started = time.process_time()
            app.action_seek_to(step)
            cpu.append((time.process_time() - started) * 1000)
            await pilot.pause()
    return cpu


def seeks_in_child(trace: Path, order: str, environment: dict[str, str]) -> list[float]:
    """:func:`seek_cpu` of ``order`` in a fresh interpreter running ``environment``'s collviz."""
    result = subprocess.run([sys.executable, __file__, "--child", str(trace), order], capture_output=True, text=True,
                            check=True, timeout=600, env=environment)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _row(name: str, rounds: list[list[float]]) -> str:
    """A table row: the median of each round's seeks, and every seek of the first round."""
    medians = [statistics.median(seeks) for seeks in rounds]
    return f"{name:<34} {statistics.median(medians):>7.2f}   {', '.join(f'{m:.2f}' for m in medians):<22} " \
           f"{' '.join(f'{s:.1f}' for s in rounds[0])}"


def main() -> None:
    """Write the trace, alternate the checkouts over the rounds, print one table per order of seeks."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, metavar="DIR", help="also run the collviz of this checkout")
    parser.add_argument("--varied", action="store_true",
                        help="steps whose calls' times and buffers' values differ (default: every step alike)")
    parser.add_argument("--quick", action="store_true", help="40,000 events at 8 ranks, one round")
    parser.add_argument("--child", nargs=2, metavar=("TRACE", "ORDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(asyncio.run(seek_cpu(Path(args.child[0]), ORDERS[args.child[1]]))))
        return
    if args.quick:
        args.events, args.ranks, args.rounds = 40_000, 8, 1
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / f"flood-{args.ranks}.cvz"
        count = write_flood(trace, args.events, args.ranks, args.varied)
        trees = {"this checkout": ENVIRONMENT}
        if args.before is not None:
            trees = {f"before ({args.before})": checkout_environment(args.before, Path(folder) / "before"), **trees}
        measured: dict[tuple[str, str], list[list[float]]] = {(o, t): [] for o in ORDERS for t in trees}
        for round_number in range(args.rounds):
            names = list(trees) if round_number % 2 == 0 else list(trees)[::-1]
            for order in ORDERS:
                for name in names:
                    measured[(order, name)].append(seeks_in_child(trace, order, trees[name]))
    steps = "steps whose times and values differ" if args.varied else "every step alike"
    print(f"{count:,} events, {args.ranks} ranks, {steps}; CPU ms of each seek (user + system), {args.rounds} rounds, "
          f"goal ≤ {GOAL_MS:g} ms")
    for order, steps in ORDERS.items():
        print(f"\n{order} (steps {', '.join(map(str, steps))})")
        print(f"{'checkout':<34} {'median':>7}   {'median of each round':<22} each seek of round 1")
        for name in trees:
            print(_row(name, measured[(order, name)]))
            if order == "jumps":  # the first four land where nothing was decoded or built ahead
                print(_row("  … its first four (cold)", [seeks[:4] for seeks in measured[(order, name)]]))


if __name__ == "__main__":
    main()
