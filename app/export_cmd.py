"""``collviz export TRACE --perfetto OUT.json``: a recorded run as a Perfetto / chrome://tracing timeline."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

__all__ = ["cmd_export"]

EPILOG = """\
Open the file at https://ui.perfetto.dev (Open trace file) or in Chrome at chrome://tracing (Load).
One process per rank: phases and collective calls as slices, transfers as arrows between ranks,
memory as counter tracks.
"""


def cmd_export(argv: Sequence[str]) -> int:
    """Read a trace and write its Chrome trace-event JSON export."""
    from collviz.app.parsing import OneLineParser
    from collviz.runtime.reports.export import write_perfetto
    from collviz.runtime.wire.files import check_new_output
    from collviz.runtime.wire.trace import read_trace

    parser = OneLineParser(prog="collviz export", description="Export a recorded trace for other tools.",
                     allow_abbrev=False, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", type=Path, help="a .cvz file written with --record")
    parser.add_argument("--perfetto", type=Path, metavar="OUT.json", required=True,
                        help="write Chrome trace-event JSON (Perfetto, chrome://tracing) to OUT.json")
    parser.add_argument("--force", action="store_true", help="overwrite an existing OUT.json")
    args = parser.parse_args(argv)
    check_new_output(args.perfetto, "--perfetto", force=args.force, reading=args.trace)
    contents = read_trace(args.trace)
    if contents.warning:
        print(f"collviz: warning: {contents.warning}", file=sys.stderr)
    count = write_perfetto(contents.events, args.perfetto)
    print(f"collviz: wrote {count} trace events to {args.perfetto} (open it at ui.perfetto.dev)", file=sys.stderr)
    return 0
