"""``collviz list``: the scenarios, one line each (``--json``: one document)."""

from __future__ import annotations

from collections.abc import Sequence

from .options import OneLineParser, add_json_option, command_parser, print_json

__all__ = ["build_parser", "main"]


def build_parser() -> OneLineParser:
    """``collviz list [--json]``."""
    parser = command_parser("collviz list", "List the scenarios collviz ships, with what each one shows.")
    add_json_option(parser, "the scenarios (name, kind, default ranks, description)")
    return parser


def main(argv: Sequence[str]) -> int:
    """Print every shipped scenario."""
    args = build_parser().parse_args(argv)
    from collviz.runtime.scenario_files.loading import list_scenarios

    scenarios = list_scenarios()
    if args.json:
        print_json([{"name": s.name, "kind": s.kind, "collective": s.collective or None, "default_ranks": s.default_gpus,
                     "description": s.description} for s in scenarios])
        return 0
    width = max(len(s.name) for s in scenarios)
    for scenario in scenarios:
        print(f"{scenario.name:<{width}}  {scenario.description}")
    return 0
