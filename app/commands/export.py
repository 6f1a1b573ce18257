"""``collviz export TRACE --perfetto OUT.json``: a recorded run as a Perfetto / chrome://tracing timeline."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .options import OneLineParser, command_parser, path_argument
from .playing import is_collviz_trace, open_artifacts

__all__ = ["build_parser", "main"]

EPILOG = """\
Open the file at https://ui.perfetto.dev (Open trace file) or in Chrome at chrome://tracing (Load).
One process per rank: phases and collective calls as slices, transfers as arrows between ranks,
memory as counter tracks.
"""


def build_parser() -> OneLineParser:
    """``collviz export TRACE --perfetto OUT.json [--force]``."""
    parser = command_parser("collviz export", "Export a recorded trace for other tools.", EPILOG)
    parser.add_argument("paths", type=path_argument, nargs="+", metavar="PATH",
                        help="a .cvz file written with --record, or a job's artifacts as collviz replay opens them")
    parser.add_argument("--perfetto", type=path_argument, metavar="OUT.json", required=True,
                        help="write Chrome trace-event JSON (Perfetto, chrome://tracing) to OUT.json (- for stdout; a "
                             "device, FIFO or link is written through, never replaced)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing OUT.json")
    return parser


def main(argv: Sequence[str]) -> int:
    """Read a trace and write its Chrome trace-event JSON export."""
    from collviz.runtime.reports.export import write_perfetto
    from collviz.runtime.reports.warnings import say_warnings
    from collviz.runtime.wire.files import check_new_output
    from collviz.runtime.wire.trace import read_trace

    parser = build_parser()
    args = parser.parse_args(argv)
    for path in args.paths:
        check_new_output(args.perfetto, "--perfetto", force=args.force, reading=path, stdout=True)
    if len(args.paths) == 1 and (is_collviz_trace(args.paths[0]) or args.paths[0].suffix == ".cvz"):
        contents = read_trace(args.paths[0])
        say_warnings([contents.warning] if contents.warning else [], sys.stderr)
        events, clock = contents.events, contents.clock
    else:
        events, clock = open_artifacts(args.paths).events, None
    count = write_perfetto(events, args.perfetto, clock)
    where = "stdout" if str(args.perfetto) == "-" else args.perfetto
    print(f"collviz: wrote {count} trace events to {where} (open it at ui.perfetto.dev)", file=sys.stderr)
    return 0
