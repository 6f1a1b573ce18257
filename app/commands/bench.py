"""``collviz bench [OPS] --gpus N --sizes MIN:MAX``: the nccl-tests-style sweep, from the command line."""

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
    parse_size,
)

__all__ = ["build_parser", "main", "parse_sweep", "DEFAULT_SIZES"]

DEFAULT_SIZES = "1K:16M"
"""The default sweep: quick on CPU (gloo), still reaching the sizes where bandwidth settles."""

EPILOG = """\
examples:
  collviz bench                                all-reduce, 4 ranks, 1K:16M
  collviz bench all-reduce all-gather --gpus 8 --sizes 8:64M
  collviz bench reduce-scatter --json > rs.json
  collviz bench --explain --record bench.cvz   show each busbw factor; keep the trace
  collviz bench --view                         the busbw-versus-size plot growing live in the viewer
  collviz bench --algo ring,tree,library --sizes 1K:4M   algorithms side by side, α–β fitted, crossovers

Sizes are nccl-tests' S (the whole buffer of all-reduce, broadcast, reduce and all-to-all; the
gathered or scattered whole of the others), doubling from MIN to MAX, rounded down to whole
elements per rank. Inputs are small integers, so each result is checked exactly (#wrong).
"""


def parse_sweep(text: str) -> tuple[int, int]:
    """``"8:64M"`` → (8, 67108864); sizes take B, K/M/G (binary) and the units of ``--size``."""
    parts = text.split(":")
    if len(parts) != 2:
        raise UsageError(f"--sizes {text!r}: expected MIN:MAX such as 8:64M or 1K:16M")
    try:
        low, high = (parse_size(part, "--sizes") for part in parts)
    except UsageError:
        raise UsageError(f"--sizes {text!r}: expected MIN:MAX byte counts such as 8:64M or 1K:16M") from None
    if low <= 0 or high < low:
        raise UsageError(f"--sizes {text!r}: need 0 < MIN ≤ MAX")
    return low, high


def build_parser() -> OneLineParser:
    """``collviz bench [OPS] [options]``."""
    from collviz.runtime.scenario_files.loading import DTYPES

    parser = command_parser("collviz bench", "Sweep sizes of real collectives, nccl-tests style.", EPILOG)
    parser.add_argument("ops", nargs="*", metavar="OP", help="all-reduce (default), all-gather, reduce-scatter, "
                        "all-to-all, broadcast, reduce, gather, scatter")
    add_gpus_option(parser, "default 4", default=4)
    add_backend_option(parser)
    parser.add_argument("--sizes", default=DEFAULT_SIZES, metavar="MIN:MAX",
                        help=f"sizes S in bytes, doubling from MIN to MAX (default {DEFAULT_SIZES})")
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
    check_world_size(args.gpus)
    ops = [op_name(op) for op in args.ops] or ["all_reduce"]
    low, high = parse_sweep(args.sizes)
    check_count("--iters", args.iters, 1, MAX_ITERS)
    check_count("--warmup", args.warmup, 0, MAX_ITERS)
    check_size("--sizes MAX", high)
    check_record_option(args)
    algos = tuple(dict.fromkeys(a.strip() for a in args.algo.split(",") if a.strip())) or ("library",)
    program = build_bench(ops, sweep_sizes(low, high), args.gpus, dtype=args.dtype, iters=args.iters,
                          warmup=args.warmup, nvml_note=nvml.nvml_unavailable_reason() or "", algos=algos)
    plan = plan_run(bench_scenario(), args.gpus, backend=args.backend, program=program, record=args.record,
                    timeout_s=args.timeout, nccl_tuning=True,
                    memory=MemoryNeed(f"--sizes up to {args.sizes} on {args.gpus} ranks", high, 6))
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
