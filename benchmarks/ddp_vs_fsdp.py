"""Peak live tensor bytes per rank, DDP vs FSDP on the same tiny GPT, measured in one run.

Runs the ``ddp`` and ``fsdp`` scenarios one after the other on 4 gloo ranks (as ``collviz compare
ddp fsdp --gpus 4`` does) and prints the side-by-side peaks, the measured ratio and the ratio the
parameter counts predict, with the arithmetic.

    python benchmarks/ddp_vs_fsdp.py [--gpus 4]
"""

from __future__ import annotations

import argparse

from collviz.runtime.launch import choose_backend
from collviz.runtime.compare import compare_runs, model_sizes, same_model
from collviz.runtime.reports.compare import render_comparison


def main() -> None:
    """Run both scenarios and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=4)
    args = parser.parse_args()
    scenarios = same_model(["ddp", "fsdp"])
    figures = compare_runs(scenarios, args.gpus, choose_backend("gloo", args.gpus), None, 60.0)
    print(render_comparison(figures, args.gpus, *model_sizes(scenarios[0])))


if __name__ == "__main__":
    main()
