"""Peak live tensor bytes per rank of DDP, FSDP, HSDP, FSDP × TP and a pipeline on the same tiny GPT.

Runs the scenarios one after the other on 4 gloo ranks (as ``collviz compare ddp fsdp hsdp fsdp-tp
pp --gpus 4 --headless`` does) and prints the side-by-side peaks, each run's state after the step
and the figure its parameter counts predict, with the arithmetic.

    python benchmarks/compare_parallelisms.py [--gpus 4] [--quick] [SCENARIO ...]

``--quick`` compares ddp and fsdp on 2 ranks (the test suite runs it so the benchmark cannot break
silently).
"""

from __future__ import annotations

import argparse

from collviz.runtime.compare import COMPARABLE, compare_runs, model_sizes, plan_comparison, same_model
from collviz.runtime.reports.compare import render_comparison


def main() -> None:
    """Run the scenarios and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="ddp and fsdp on 2 ranks: a fast check that it runs")
    parser.add_argument("scenarios", nargs="*", default=list(COMPARABLE))
    args = parser.parse_args()
    if args.quick:
        args.gpus, args.scenarios = 2, ["ddp", "fsdp"]
    scenarios = same_model(args.scenarios)
    figures = compare_runs(plan_comparison(scenarios, args.gpus, "gloo", None, 60.0))
    print(render_comparison([run.figures for run in figures], args.gpus, model_sizes(scenarios[0], args.gpus)))


if __name__ == "__main__":
    main()
