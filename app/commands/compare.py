"""``collviz compare ddp fsdp hsdp --gpus 4`` and ``collviz compare --params 7e9 --gpus 8``."""

from __future__ import annotations

import math
import sys
from typing import Sequence

from collviz.runtime.errors import EXIT_RECORDING_INCOMPLETE, UsageError

from .options import (
    OneLineParser,
    add_backend_option,
    add_gpus_option,
    add_headless_option,
    add_json_option,
    add_record_option,
    add_timeout_option,
    clean_stale_runs,
    command_parser,
    no_terminal,
    print_json,
)

__all__ = ["build_parser", "main"]

EPILOG = """\
examples:
  collviz compare ddp fsdp --gpus 4           run both on the same model; both runs' memory on one scale
  collviz compare ddp fsdp --headless         the same as a table of peaks, measured beside the theory
  collviz compare ddp fsdp hsdp --gpus 4      all three: state sharded over 1, 4 and 2 ranks
  collviz compare ddp fsdp fsdp-tp pp         every kind of parallelism on the same model
  collviz compare ddp fsdp --record traces/   also keep both traces (replay them in the viewer)
  collviz compare --params 7e9 --gpus 8       analytic estimates only (16 B per parameter)
"""


def build_parser() -> OneLineParser:
    """``collviz compare SCENARIO SCENARIO … [options]`` or ``collviz compare --params P``."""
    parser = command_parser("collviz compare", "DDP, FSDP, HSDP, FSDP × TP and pipeline memory: measured side by "
                            "side, or estimated.", EPILOG)
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                        help="two or more of the ddp, fsdp, hsdp, fsdp-tp and pp scenarios (e.g. ddp fsdp pp)")
    add_gpus_option(parser, "default 4 for runs, 8 for estimates")
    parser.add_argument("--params", type=float, metavar="P", help="estimate for a model of P parameters (e.g. 7e9)")
    add_backend_option(parser)
    add_record_option(parser, folder=True)
    add_timeout_option(parser, 60.0)
    add_headless_option(parser, "the table instead of opening the runs' memory in the viewer")
    add_json_option(parser, "the comparison (each run's peaks, state and theory per rank)")
    return parser


def main(argv: Sequence[str]) -> int:
    """Run the comparison (or print estimates); returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.params is None and not args.scenarios:
        raise UsageError("give two scenarios to run (compare ddp fsdp) or --params P for estimates")
    if len(args.scenarios) == 1:
        raise UsageError("compare runs two or more scenarios side by side (e.g. ddp fsdp hsdp), got one")
    if args.params is not None:
        from collviz.runtime.reports.estimate import estimate_document, render_estimates

        if not math.isfinite(args.params) or args.params <= 0:
            raise UsageError(f"--params {args.params:g}: must be a positive, finite parameter count")
        gpus = 8 if args.gpus is None else args.gpus
        if gpus < 1:
            raise UsageError(f"--gpus {gpus}: must be at least 1")
        if not args.scenarios:
            if args.json:
                print_json(estimate_document(args.params, gpus))
            else:
                print(render_estimates(args.params, gpus))
            return 0
        if not args.json:
            print(render_estimates(args.params, gpus))
            print()
    if args.record is not None and not args.record.is_dir():
        raise UsageError(f"--record {args.record}: not a folder")
    from collviz.runtime.compare import compare_runs, model_sizes, plan_comparison, same_model
    from collviz.runtime.reports.compare import comparison_document, render_comparison

    scenarios = same_model(args.scenarios)
    if args.record is not None:
        from collviz.runtime.wire.files import check_new_output

        for scenario in scenarios:
            check_new_output(args.record / f"{scenario.name}.cvz", "--record", force=args.force)
    world_size = 4 if args.gpus is None else args.gpus
    plans = plan_comparison(scenarios, world_size, args.backend, args.record, args.timeout)
    print(f"collviz: {plans[0].banner}", file=sys.stderr)
    clean_stale_runs()
    runs = compare_runs(plans, err=sys.stderr)
    figures = [run.figures for run in runs]
    sizes = model_sizes(scenarios[0], world_size)
    status = 0 if all(f.status == "ok" for f in figures) else 1
    if status == 0 and not all(run.recorded for run in runs):
        status = EXIT_RECORDING_INCOMPLETE
    if args.json:
        print_json(comparison_document(figures, world_size, sizes))
        return status
    table = render_comparison(figures, world_size, sizes)
    if args.headless or no_terminal() is not None:
        print(table)
        return status
    from collviz.app.compare_view import run_compare_viewer

    run_compare_viewer([(scenario.name, run.events) for scenario, run in zip(scenarios, runs)], table)
    return status
