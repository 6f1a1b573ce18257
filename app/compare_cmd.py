"""``collviz compare ddp fsdp hsdp --gpus 4`` and ``collviz compare --params 7e9 --gpus 8``."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Sequence

from collviz.runtime.errors import UsageError

__all__ = ["cmd_compare"]

EPILOG = """\
examples:
  collviz compare ddp fsdp --gpus 4           run both on the same model; both runs' memory on one scale
  collviz compare ddp fsdp --headless         the same as a table of peaks, measured beside the theory
  collviz compare ddp fsdp hsdp --gpus 4      all three: state sharded over 1, 4 and 2 ranks
  collviz compare ddp fsdp fsdp-tp pp         every kind of parallelism on the same model
  collviz compare ddp fsdp --record traces/   also keep both traces (replay them in the viewer)
  collviz compare --params 7e9 --gpus 8       analytic estimates only (16 B per parameter)
"""


def cmd_compare(argv: Sequence[str]) -> int:
    """Run the comparison (or print estimates); returns the exit status."""
    import argparse

    from collviz.app.parsing import OneLineParser

    parser = OneLineParser(prog="collviz compare", description="DDP, FSDP, HSDP, FSDP × TP and pipeline memory: measured side by side, or estimated.",
                     allow_abbrev=False, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                        help="two or more of the ddp, fsdp, hsdp, fsdp-tp and pp scenarios (e.g. ddp fsdp pp)")
    parser.add_argument("--gpus", type=int, metavar="N", help="ranks (default 4 for runs, 8 for estimates)")
    parser.add_argument("--params", type=float, metavar="P", help="estimate for a model of P parameters (e.g. 7e9)")
    parser.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"), help="as for a run")
    parser.add_argument("--record", type=Path, metavar="DIR", help="write SCENARIO.cvz traces into DIR")
    parser.add_argument("--force", action="store_true", help="with --record: overwrite existing SCENARIO.cvz files")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S", help="hang report after S seconds (default 60)")
    parser.add_argument("--headless", action="store_true",
                        help="print the table instead of opening both runs' memory in the viewer (the default "
                             "when the output is not a terminal)")
    args = parser.parse_args(argv)
    if args.params is None and not args.scenarios:
        raise UsageError("give two scenarios to run (compare ddp fsdp) or --params P for estimates")
    if len(args.scenarios) == 1:
        raise UsageError("compare runs two or more scenarios side by side (e.g. ddp fsdp hsdp), got one")
    if args.params is not None:
        from collviz.runtime.reports.estimate import render_estimates

        if not math.isfinite(args.params) or args.params <= 0:
            raise UsageError(f"--params {args.params:g}: must be a positive, finite parameter count")
        gpus = 8 if args.gpus is None else args.gpus
        if gpus < 1:
            raise UsageError(f"--gpus {gpus}: must be at least 1")
        print(render_estimates(args.params, gpus))
        if not args.scenarios:
            return 0
        print()
    if args.record is not None and not args.record.is_dir():
        raise UsageError(f"--record {args.record}: not a folder")
    from collviz.runtime.launch import choose_backend
    from collviz.runtime.compare import compare_runs, model_sizes, same_model
    from collviz.app.limits import check_seconds
    from collviz.runtime.reports.compare import render_comparison

    scenarios = same_model(args.scenarios)
    check_seconds("--timeout", args.timeout)
    if args.record is not None:
        from collviz.runtime.wire.files import check_new_output

        for scenario in scenarios:
            check_new_output(args.record / f"{scenario.name}.cvz", "--record", force=args.force)
    world_size = 4 if args.gpus is None else args.gpus
    backend = choose_backend(args.backend, world_size)
    print(f"collviz: {backend.reason}", file=sys.stderr)
    from collviz.app.cli import clean_stale_runs

    clean_stale_runs()
    runs = compare_runs(scenarios, world_size, backend, args.record, args.timeout, err=sys.stderr)
    figures = [run_figures for run_figures, _ in runs]
    table = render_comparison(figures, world_size, model_sizes(scenarios[0], world_size))
    status = 0 if all(f.status == "ok" for f in figures) else 1
    if args.headless or not sys.stdout.isatty():
        print(table)
        return status
    from collviz.app.compare_view import run_compare_viewer

    run_compare_viewer([(scenario.name, events) for scenario, (_, events) in zip(scenarios, runs)], table)
    return status
