"""The viewer's frame on a live log of grouped calls (``CallRanks``: one event per call and
reading, its ranks as columns) at 64, 256 and 1,024 ranks, this checkout beside another (issue 40's
follow-up: a rank's read of a grouped call found its place in the columns by scanning them, so a
frame that reads every rank's latest call and phase cost O(ranks²) per call).

Each size's log is what ``collviz attach`` through relays files: a ``RunStart``, then per step
(4) its calls (3: the world's, the odd ranks' subgroup, the world's again, the two groups
interleaved), each said by two readings' events — the first with every member issued (in the
order a relay's news lists them: the last host's ranks first) and all but the last 8 ended, the
second with those 8 ended. The timed work is :func:`~collviz.app.model.view.view_at` at the last
step's end, in CPU time (``time.process_time``): *first*, on a log just filled (the step's call
costs worked out then, as after new news), and *again*, its median over 5 more frames at the same
cursor (each rank's latest call and phase read, as every refresh does).

``--before DIR`` runs the collviz of another checkout (``git archive`` or ``git worktree add`` of
it into DIR) through a ``PYTHONPATH`` folder as ``startup.py --before`` does, in its own
interpreter, alternating with this one in every round (the two take turns going first).

    python benchmarks/grouped_reads.py [--ranks 64 256 1024] [--rounds 3] [--before DIR] [--quick]

``--quick`` is 16 and 64 ranks, one round (the test suite runs it so it cannot break silently).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from startup import ENVIRONMENT, checkout_environment  # noqa: E402

STEPS, CALLS, LATE, AGAIN = 4, 3, 8, 5
"""Steps, calls a step, ranks whose end comes a reading later, and frames timed again."""


def grouped_events(ranks: int) -> list[Any]:
    """The run's ``RunStart`` and its calls' ``CallRanks`` events (see the module), each rank's
    own events numbered in its own sequence as a relayed feed numbers them."""
    from collviz.runtime.wire.protocol import CallRanks, RunStart

    events: list[Any] = [RunStart(run="b", rank=-1, seq=0, t_ns=0, scenario="attach", world_size=ranks,
                                  backend="gloo", device_kind="cpu", backend_reason="attached", mode="live")]
    seq = dict.fromkeys(range(ranks), 1)
    calls_of = {"0": 0, "1": 0}
    t_ns = 10**9
    for step in range(STEPS):
        for call in range(CALLS):
            group = "1" if call % 2 else "0"
            members = list(range(1, ranks, 2)) if group == "1" else list(range(ranks))
            calls_of[group] += 1
            issued = [rank for host in range(ranks // 8 - 1, -1, -1) for rank in members if rank // 8 == host]
            readings = [(issued, issued[:-LATE]), ([], issued[-LATE:])]
            for issuing, ending in readings:
                t_ns += 1000
                issued_seq = [seq[rank] for rank in issuing]
                seq.update((rank, seq[rank] + 2) for rank in issuing)
                ended_seq = [seq[rank] for rank in ending]
                seq.update((rank, seq[rank] + 2) for rank in ending)
                events.append(CallRanks(
                    run="b", rank=-1, seq=0, t_ns=t_ns, phase=step, name=f"step {step}", op="all_reduce",
                    group=group, group_ranks=members, group_seq=calls_of[group], dtype="float32", count=1024,
                    bytes_in=4096, bytes_out=4096, algo_bytes=4096, issued=issuing,
                    issued_ns=[t_ns + rank for rank in issuing], ended=ending,
                    ended_ns=[t_ns + 500 + rank for rank in ending], durations_ns=[400] * len(ending),
                    issued_seq=issued_seq, ended_seq=ended_seq))
    return events


def frame_cpu(ranks: int) -> tuple[float, float]:
    """CPU milliseconds of the first :func:`view_at` at the last step's end on a log just filled
    with :func:`grouped_events`, and the median of :data:`AGAIN` more at the same cursor."""
    from collviz.app.model.log import EventLog
    from collviz.app.model.view import view_at

    log = EventLog()
    log.extend(grouped_events(ranks))
    cursor = log.step_ends[-1]
    started = time.process_time()
    view_at(log, cursor)
    first = time.process_time() - started
    again = []
    for _ in range(AGAIN):
        started = time.process_time()
        view_at(log, cursor)
        again.append(time.process_time() - started)
    return first * 1000, statistics.median(again) * 1000


def frames_in_child(ranks: list[int], environment: dict[str, str]) -> dict[str, list[float]]:
    """:func:`frame_cpu` at each of ``ranks`` in a fresh interpreter running ``environment``'s collviz."""
    result = subprocess.run([sys.executable, __file__, "--child", *map(str, ranks)], capture_output=True, text=True,
                            check=True, timeout=600, env=environment)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    """Alternate the checkouts over the rounds; print per size each one's CPU a frame and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, metavar="DIR", help="also run the collviz of this checkout")
    parser.add_argument("--quick", action="store_true", help="16 and 64 ranks, one round")
    parser.add_argument("--child", type=int, nargs="+", metavar="RANKS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps({str(ranks): frame_cpu(ranks) for ranks in args.child}))
        return
    if args.quick:
        args.ranks, args.rounds = [16, 64], 1
    with tempfile.TemporaryDirectory() as folder:
        trees = {"this checkout": ENVIRONMENT}
        if args.before is not None:
            trees = {f"before ({args.before})": checkout_environment(args.before, Path(folder) / "before"), **trees}
        measured: dict[str, list[dict[str, list[float]]]] = {name: [] for name in trees}
        for round_number in range(args.rounds):
            for name in list(trees) if round_number % 2 == 0 else list(trees)[::-1]:
                measured[name].append(frames_in_child(args.ranks, trees[name]))
    print(f"view_at at the last step's end of a live log of CallRanks events ({STEPS} steps, {CALLS} calls a step, "
          f"2 readings a call); CPU ms, median of {args.rounds} rounds")
    print(f"{'ranks':>6}  {'checkout':<40} {'first frame':>12} {'again':>9}")
    for ranks in args.ranks:
        medians = {name: [statistics.median(run[str(ranks)][part] for run in runs) for part in (0, 1)]
                   for name, runs in measured.items()}
        for name, (first, again) in medians.items():
            print(f"{ranks:>6}  {name:<40} {first:>12.2f} {again:>9.2f}")
        if len(medians) == 2:
            (before_first, before_again), (now_first, now_again) = medians.values()
            print(f"{'':>6}  {'before ÷ this checkout':<40} {before_first / now_first:>11.1f}× "
                  f"{before_again / now_again:>8.1f}×")


if __name__ == "__main__":
    main()
