"""``collviz bench [OPS] --gpus N --sizes MIN:MAX`` (or nccl-tests' ``-g N -b MIN -e MAX -f F``): the
nccl-tests-style sweep, from the command line."""

from __future__ import annotations

import sys
from typing import Sequence

from collviz.runtime.errors import UsageError

from .options import (
    OneLineParser,
    add_backend_option,
    add_gpus_option,
    add_json_option,
    add_record_option,
    add_timeout_option,
    check_record_option,
    clean_stale_runs,
    command_parser,
    no_terminal,
)
from .sweep_args import DEFAULT_RANKS, add_sweep_options, ranks_from, sweep_from

__all__ = ["build_parser", "main"]

EPILOG = """\
examples:
  collviz bench                                all-reduce, 4 ranks, 1K:16M
  collviz bench all-reduce all-gather --gpus 8 --sizes 8:64M
  collviz bench reduce-scatter --json > rs.json
  collviz bench --explain --record bench.cvz   show each busbw factor; keep the trace
  collviz bench --view                         the busbw-versus-size plot growing live in the viewer
  collviz bench --algo ring,tree,library --sizes 1K:4M   algorithms side by side, α–β fitted, crossovers
  collviz bench all-reduce -b 8 -e 128M -f 2 -g 4       nccl-tests' spelling: 4 ranks, 8 B to 128 MiB

Sizes are nccl-tests' S (the whole buffer of all-reduce, broadcast, reduce and all-to-all; the
gathered or scattered whole of the others), doubling from MIN to MAX (or -f times), rounded down
to whole elements per rank. Inputs are small integers, so each result is checked exactly (#wrong).
As in nccl-tests, every line of the table but its rows starts with # (grep -v '^#' keeps the rows).
"""


def build_parser() -> OneLineParser:
    """``collviz bench [OPS] [options]``."""
    from collviz.runtime.scenario_files.loading import DTYPES

    parser = command_parser("collviz bench", "Sweep sizes of real collectives, nccl-tests style.", EPILOG)
    parser.add_argument("ops", nargs="*", metavar="OP", help="all-reduce (default), all-gather, reduce-scatter, "
                        "all-to-all, broadcast, reduce, gather, scatter")
    add_gpus_option(parser, f"default {DEFAULT_RANKS}")
    add_backend_option(parser)
    add_sweep_options(parser)
    parser.add_argument("--dtype", default="float32", choices=DTYPES, help="element type (default float32)")
    parser.add_argument("--iters", type=int, default=20, metavar="N", help="timed calls per size (default 20)")
    parser.add_argument("--warmup", type=int, default=5, metavar="N", help="untimed calls before them (default 5)")
    parser.add_argument("--view", action="store_true", help="watch the sweep in the viewer: busbw versus size, live")
    add_json_option(parser, "the table")
    parser.add_argument("--explain", action="store_true", help="show each row's busbw factor and its formula")
    parser.add_argument("--algo", default="library", metavar="A,B,…",
                        help="algorithms to compare, e.g. ring,tree,library (default library: the backend's own "
                             "call); with two or more, the table fits latency α per hop and β per byte")
    add_record_option(parser)
    add_timeout_option(parser, 60.0, ": large sizes on a busy CPU are slow")
    return parser


def main(argv: Sequence[str]) -> int:
    """Run the sweep headless (table or JSON on stdout, progress on stderr) or, with --view, in
    the viewer, where the busbw-versus-size plot grows as each size completes."""
    from collviz.runtime.limits import MAX_ITERS, check_count, check_size
    from collviz.runtime.observation import nvml
    from collviz.runtime.plan import MemoryNeed, check_world_size, plan_run
    from collviz.runtime.programs.bench import bench_scenario, build_bench, op_name, sweep_sizes
    from collviz.runtime.sessions.headless import run_bench
    from collviz.runtime.sessions.local import LocalSession

    args = build_parser().parse_args(argv)
    if args.view and (args.json or args.explain):
        raise UsageError("--view shows the plot; --json and --explain print the table (leave out one side)")
    ranks = check_world_size(ranks_from(args), "--gpus" if args.ngpus is None else "-g")
    ops = [op_name(op) for op in args.ops] or ["all_reduce"]
    sweep = sweep_from(args)
    check_count("--iters", args.iters, 1, MAX_ITERS)
    check_count("--warmup", args.warmup, 0, MAX_ITERS)
    check_size(sweep.high_option, sweep.high)
    check_record_option(args)
    algos = tuple(dict.fromkeys(a.strip() for a in args.algo.split(",") if a.strip())) or ("library",)
    program = build_bench(ops, sweep_sizes(sweep.low, sweep.high, sweep.factor), ranks, dtype=args.dtype,
                          iters=args.iters, warmup=args.warmup, nvml_note=nvml.nvml_unavailable_reason() or "",
                          algos=algos)
    plan = plan_run(bench_scenario(), ranks, backend=args.backend, program=program, record=args.record,
                    timeout_s=args.timeout, nccl_tuning=True,
                    memory=MemoryNeed(f"{sweep.text} on {ranks} ranks", sweep.high, 6))
    print(f"collviz: {plan.banner}", file=sys.stderr)
    for line in program.adjusted:
        print(f"collviz: sizes skipped or adjusted: {line}", file=sys.stderr)
    clean_stale_runs()
    view = args.view and no_terminal() is None
    if args.view and not view:
        print(f"collviz: {no_terminal()}: printing the table instead of the plot", file=sys.stderr)
    if view:
        from collviz.app.app import run_viewer
        from collviz.runtime.sessions.headless import report_outcome

        session = LocalSession(plan)
        session.start()  # fork before the viewer starts its threads
        return report_outcome(session, run_viewer(session=session), sys.stderr)
    return run_bench(LocalSession(plan), as_json=args.json, explain=args.explain)
