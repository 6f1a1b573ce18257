"""``collviz doctor``: what this installation runs on, and what a run would use here.

Versions (collviz, Python, torch — whether CI verifies it, and which releases it verifies — its
backends, the wire and viewer libraries), the GPUs NVML sees, and the backend table with the row
``--backend auto`` would take for a few world sizes, so "why is this gloo?" has its answer in one
place; ``--json`` gives the same as fields. ``collviz --version`` prints one line only.
"""

from __future__ import annotations

from collections.abc import Sequence

from .options import OneLineParser, add_json_option, command_parser, print_json

__all__ = ["build_parser", "main"]

_WORLD_SIZES = (1, 2, 4, 8)
"""World sizes the report plans for."""


def build_parser() -> OneLineParser:
    """``collviz doctor [--json]``."""
    parser = command_parser("collviz doctor", "Report what collviz runs on here: versions, backends, GPUs.")
    add_json_option(parser, "the report")
    return parser


def main(argv: Sequence[str]) -> int:
    """Print the report."""
    args = build_parser().parse_args(argv)
    from collviz.runtime.backends import BACKENDS, choose_backend
    from collviz.runtime.errors import UsageError
    from collviz.runtime.observation.environment import environment, version_lines

    fields = environment()
    rows = [{"row": row.name, "backend": row.process_group, "device": row.device_kind} for row in BACKENDS]
    choices = {}
    for ranks in _WORLD_SIZES:
        try:
            choices[ranks] = choose_backend("auto", ranks).reason
        except UsageError as exc:
            choices[ranks] = f"none: {exc}"
    if args.json:
        print_json({**fields, "backend_table": rows, "auto": {str(ranks): reason for ranks, reason in choices.items()}})
        return 0
    print("\n".join(version_lines(fields)))
    print("backend table (--backend auto takes the first row that applies): "
          + ", ".join(f"{r['row']} ({r['backend']} on {r['device']})" for r in rows))
    for ranks, reason in choices.items():
        print(f"  --gpus {ranks}: {reason}")
    return 0
