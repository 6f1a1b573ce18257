"""``collviz schema [--lesson]``: the JSON Schema of scenario (or lesson) files, for an editor's
completion and checks (the same files ship beside the scenarios, ``*.schema.json``)."""

from __future__ import annotations

from collections.abc import Sequence

from .options import OneLineParser, command_parser

__all__ = ["build_parser", "main"]

EPILOG = """\
examples:
  collviz schema > collviz-scenario.schema.json
  collviz schema --lesson > collviz-lesson.schema.json

Point your editor at it: with Taplo (the TOML language server of VS Code's Even Better TOML and
others), put `#:schema ./collviz-scenario.schema.json` as the first line of a scenario file.
"""


def build_parser() -> OneLineParser:
    """``collviz schema [--lesson]``."""
    parser = command_parser("collviz schema", "Print the JSON Schema of collviz's scenario (or lesson) files.",
                            EPILOG)
    parser.add_argument("--lesson", action="store_true", help="the schema of lesson files instead")
    return parser


def main(argv: Sequence[str]) -> int:
    """Print the schema."""
    args = build_parser().parse_args(argv)
    from collviz.runtime.scenario_files.documents import lesson_json_schema, scenario_json_schema, schema_text

    print(schema_text(lesson_json_schema() if args.lesson else scenario_json_schema()), end="")
    return 0
