"""``collviz serve``: the viewer in a class's browsers, one viewer per tab (textual-serve).

What each tab runs:

* a trace (``.cvz``): its replay;
* a scenario: by default the replay of one run recorded when the server starts, so thirty
  students do not start 120 worker processes; with ``--live`` each tab gets its own live run in
  step mode, at most ``--max-live`` at once (a tab beyond that is told so and shown nothing else);
* a lesson (``--lesson``): its items replayed from traces recorded when the server starts.

Binds 127.0.0.1 unless told otherwise, with a one-line warning when it does not.
"""

from __future__ import annotations

import argparse
import fcntl
import ipaddress
import shlex
import sys
import tempfile
from pathlib import Path
from typing import IO, Sequence

from collviz.runtime.errors import UsageError

__all__ = ["cmd_serve", "cmd_serve_slot", "tab_command", "DEFAULT_MAX_LIVE"]

DEFAULT_MAX_LIVE = 4
"""Live runs one server allows at once by default (each is a launcher and its ranks)."""

EPILOG = """\
examples:
  collviz serve all-gather.cvz                     every tab replays the trace
  collviz serve fsdp                               recorded once at start, replayed in every tab
  collviz serve fsdp --live --max-live 2           each tab runs its own (at most 2 at once)
  collviz serve --lesson collectives --port 8080   the lesson, replayed from traces recorded at start
  collviz serve fsdp --host 0.0.0.0                the class's network (anyone who reaches it can watch)

Open http://HOST:PORT in a browser; each tab gets its own viewer (keys as in the terminal).
"""


def _collviz(*args: str) -> str:
    """The shell command running this collviz (the same interpreter and install) with ``args``."""
    return shlex.join([sys.executable, "-m", "collviz", *args])


def tab_command(target: str, *, lesson: bool, live: bool, prepared: Path, max_live: int) -> str:
    """The command each browser tab runs; ``prepared`` holds what was recorded at start."""
    if lesson:
        return _collviz("lesson", target, "--traces", str(prepared))
    if target.endswith(".cvz"):
        return _collviz("replay", target)
    if live:
        return _collviz("serve-slot", str(prepared), str(max_live), target)
    return _collviz("replay", str(prepared / f"{Path(target).stem}.cvz"))


def prepare(target: str, *, lesson: bool, live: bool, folder: Path) -> None:
    """Record what the tabs will replay (nothing for a trace or live runs); UsageError if it fails."""
    from collviz.app.cli import cmd_replay, cmd_run
    from collviz.app.lesson_cmd import cmd_lesson

    if lesson:
        status = cmd_lesson([target, "--record", str(folder)])
    elif target.endswith(".cvz"):
        status = cmd_replay([target, "--headless"]) if not Path(target).is_file() else 0
    elif live:
        status = 0
    else:
        status = cmd_run(target, ["--headless", "--record", str(folder / f"{Path(target).stem}.cvz")])
    if status != 0:
        raise UsageError(f"could not prepare {target} for serving (exit status {status}); see above")


def cmd_serve(argv: Sequence[str]) -> int:
    """Serve the viewer to browsers until Ctrl-C."""
    from collviz.app.parsing import OneLineParser

    parser = OneLineParser(prog="collviz serve", description="Serve the viewer to a class's browsers.", epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("target", metavar="TARGET", help="a trace (.cvz), a scenario, or with --lesson a lesson")
    parser.add_argument("--lesson", action="store_true", help="TARGET is a lesson (its items replayed)")
    parser.add_argument("--live", action="store_true", help="a scenario: each tab runs its own live run (step mode)")
    parser.add_argument("--max-live", type=int, default=DEFAULT_MAX_LIVE, metavar="N",
                        help=f"with --live: live runs at once (default {DEFAULT_MAX_LIVE})")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    args = parser.parse_args(argv)
    from collviz.app.limits import check_count

    check_count("--port", args.port, 1, 65535)
    check_count("--max-live", args.max_live, 1, 64)
    if args.live and (args.lesson or args.target.endswith(".cvz")):
        raise UsageError("--live serves a scenario; a trace or a lesson is replayed")
    try:
        from textual_serve.server import Server
    except ImportError:
        raise UsageError("collviz serve needs textual-serve (pip install textual-serve)") from None
    if not _is_loopback(args.host):
        print(f"collviz: warning: serving on {args.host}: anyone who can reach port {args.port} gets a viewer"
              + (" and may start live runs" if args.live else ""), file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="collviz-serve-") as scratch:
        prepared = Path(scratch)
        prepare(args.target, lesson=args.lesson, live=args.live, folder=prepared)
        command = tab_command(args.target, lesson=args.lesson, live=args.live, prepared=prepared,
                              max_live=args.max_live)
        print(f"collviz: serving http://{args.host}:{args.port} (each tab runs: {command})", file=sys.stderr, flush=True)
        Server(command, host=args.host, port=args.port, title="collviz").serve()
    return 0


def _is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def cmd_serve_slot(argv: Sequence[str]) -> int:
    """``collviz serve-slot FOLDER MAX SCENARIO``: one tab's live run, if one of MAX slots is free."""
    if len(argv) != 3 or not argv[1].isdigit():
        raise UsageError("usage: collviz serve-slot FOLDER MAX SCENARIO (started by collviz serve)")
    folder, limit, scenario = Path(argv[0]), int(argv[1]), argv[2]
    slot = _take_slot(folder, limit)
    if slot is None:
        from collviz.app.notice import show_notice

        return show_notice(f"This class already has {limit} live runs going, the most this server allows. "
                           f"Close another tab, or ask for the replay of {scenario}.")
    from collviz.app.cli import cmd_run

    with slot:
        return cmd_run(scenario, ["--step"])


def _take_slot(folder: Path, limit: int) -> IO[bytes] | None:
    """An open, exclusively locked slot file (held until closed), or None when all are taken."""
    for index in range(limit):
        handle = open(folder / f"live-slot-{index}.lock", "ab")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            handle.close()
    return None
