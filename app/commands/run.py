"""``collviz SCENARIO [options]`` (or ``collviz run SCENARIO``): run a scenario, live in the
viewer or headless. ``SCENARIO`` is a shipped scenario's name or a scenario file (``.toml``)."""

from __future__ import annotations

from collections.abc import Sequence

from collviz.runtime.errors import UsageError

from .options import OneLineParser
from .playing import run_scenario
from .scenario_args import run_parser

__all__ = ["build_parser", "main"]


def build_parser(name: str = "SCENARIO") -> OneLineParser:
    """The parser of a run of scenario ``name`` (its options, described for that scenario)."""
    return run_parser(name)


def main(argv: Sequence[str]) -> int:
    """Run the scenario ``argv`` names with the options that follow it."""
    if not argv or argv[0].startswith("-"):
        if argv and argv[0] in ("-h", "--help"):
            build_parser().print_help()
            return 0
        raise UsageError("give a scenario to run first (collviz list shows them; see: collviz SCENARIO --help)")
    name, rest = argv[0], argv[1:]
    return run_scenario(name, run_parser(name).parse_args(rest))
