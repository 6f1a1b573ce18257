"""``collviz serve``: the viewer in a class's browsers, one viewer per tab (textual-serve, the
``collviz[serve]`` extra: without it the command says how to install it, exit 2).

What each tab runs:

* a trace (``.cvz``): its replay;
* a scenario: by default the replay of one run recorded when the server starts, so thirty
  students do not start 120 worker processes; with ``--live`` each tab gets its own live run in
  step mode, at most ``--max-live`` at once (a tab beyond that is told so and shown nothing else);
* a lesson (``collviz serve lesson NAME``, or ``--lesson`` with the lesson as TARGET): its items
  replayed from traces recorded when the server starts.

``--present``, ``--quiz`` and ``--pace S`` go to every tab's viewer (a lesson's tabs take
``--present``, the one of them ``collviz lesson`` has; the other two are refused in one line). Each tab's page is
collviz's own (:mod:`.serve_page`): every file from this server, no outside font service.
Binds 127.0.0.1 unless told otherwise, with a one-line warning when it does not.
"""

from __future__ import annotations

import argparse
import ipaddress
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from collviz.runtime.errors import UsageError

from .options import OneLineParser, command_parser, usable_argument

__all__ = ["build_parser", "main", "tab_command", "viewer_options", "DEFAULT_MAX_LIVE"]

DEFAULT_MAX_LIVE = 4
"""Live runs one server allows at once by default (each is a launcher and its ranks)."""

EPILOG = """\
examples:
  collviz serve all-gather.cvz                     every tab replays the trace
  collviz serve fsdp                               recorded once at start, replayed in every tab
  collviz serve fsdp --live --max-live 2           each tab runs its own (at most 2 at once)
  collviz serve lesson collectives --port 8080     the lesson, replayed from traces recorded at start
  collviz serve fsdp --present --pace 3            every tab in the projector layout, a step every 3 s
  collviz serve fsdp --host 0.0.0.0                the class's network (anyone who reaches it can watch)

Open http://HOST:PORT in a browser; each tab gets its own viewer (keys as in the terminal).
"""


def _collviz(*args: str) -> str:
    """The shell command running this collviz (the same interpreter and install) with ``args``."""
    return shlex.join([sys.executable, "-m", "collviz", *args])


def tab_command(target: str, *, lesson: bool, live: bool, prepared: Path, max_live: int,
                viewer: Sequence[str] = ()) -> str:
    """The command each browser tab runs; ``prepared`` holds what was recorded at start;
    ``viewer``: the viewer's options (``--present``, ``--quiz``, ``--pace S``), given to every tab."""
    if lesson:
        return _collviz("lesson", target, "--traces", str(prepared), *viewer)
    if target.endswith(".cvz"):
        return _collviz("replay", target, *viewer)
    if live:
        return _collviz("serve-slot", str(prepared), str(max_live), target, *viewer)
    return _collviz("replay", str(prepared / f"{Path(target).stem}.cvz"), *viewer)


def viewer_options(args: argparse.Namespace) -> list[str]:
    """The viewer's options in ``args`` (``collviz serve``'s), spelled for a tab's command line."""
    return (["--present"] if args.present else []) + (["--quiz"] if args.quiz else []) + \
        (["--pace", f"{args.pace:g}"] if args.pace is not None else [])


def prepare(target: str, *, lesson: bool, live: bool, folder: Path) -> None:
    """Record what the tabs will replay (nothing for a trace or live runs), with collviz's own
    command in a child process; a UsageError if it fails."""
    command: list[str] | None
    if lesson:
        command = ["lesson", target, "--record", str(folder)]
    elif target.endswith(".cvz"):
        command = None if Path(target).is_file() else ["replay", target, "--headless"]
    elif live:
        command = None
    else:
        command = [target, "--headless", "--record", str(folder / f"{Path(target).stem}.cvz")]
    if command is None:
        return
    print(f"collviz: preparing {target} for the tabs (recording it once) …", file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, "-m", "collviz", *command], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, errors="replace")
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise UsageError(f"could not prepare {target} for serving (exit status {done.returncode}); see above")


def build_parser() -> OneLineParser:
    """``collviz serve TARGET [NAME] [--lesson] [--live] [--max-live N] [--present] [--quiz] [--pace S]
    [--host H] [--port P]``."""
    parser = command_parser("collviz serve", "Serve the viewer to a class's browsers.", EPILOG)
    parser.add_argument("target", type=usable_argument, metavar="TARGET",
                        help="a trace (.cvz), a scenario, 'lesson' followed by a lesson's NAME, or with --lesson a lesson")
    parser.add_argument("name", nargs="?", metavar="NAME", help="after 'lesson': the lesson")
    parser.add_argument("--lesson", action="store_true", help="TARGET is a lesson (its items replayed)")
    parser.add_argument("--live", action="store_true", help="a scenario: each tab runs its own live run (step mode)")
    parser.add_argument("--max-live", type=int, default=DEFAULT_MAX_LIVE, metavar="N",
                        help=f"with --live: live runs at once (default {DEFAULT_MAX_LIVE})")
    parser.add_argument("--present", action="store_true", help="every tab in the projector layout")
    parser.add_argument("--quiz", action="store_true", help="every tab asks what each collective produced")
    parser.add_argument("--pace", type=float, metavar="S", help="every tab plays one step every S seconds")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    return parser


def main(argv: Sequence[str]) -> int:
    """Serve the viewer to browsers until Ctrl-C."""
    args = build_parser().parse_args(argv)
    from collviz.runtime.limits import check_count

    check_count("--port", args.port, 1, 65535)
    check_count("--max-live", args.max_live, 1, 64)
    if args.name is not None:
        if args.target != "lesson" or args.lesson:
            raise UsageError(f"unexpected {args.name!r}: serve one TARGET, or 'lesson NAME'")
        args.target, args.lesson = args.name, True
    if args.pace is not None and not 0 < args.pace <= 3600:
        raise UsageError(f"--pace {args.pace:g}: give seconds between steps, more than 0 and at most 3600")
    if args.live and (args.lesson or args.target.endswith(".cvz")):
        raise UsageError("--live serves a scenario; a trace or a lesson is replayed")
    lesson_lacks = [option for option, given in (("--quiz", args.quiz), ("--pace", args.pace is not None)) if given]
    if args.lesson and lesson_lacks:
        raise UsageError(f"{' '.join(lesson_lacks)} with a lesson: collviz lesson takes --present only; "
                         "serve the lesson without them")
    try:
        from .serve_page import ClassroomServer
    except ImportError:
        raise UsageError('collviz serve needs its extra: pip install "collviz[serve]"') from None
    if not _is_loopback(args.host):
        print(f"collviz: warning: serving on {args.host}: anyone who can reach port {args.port} gets a viewer"
              + (" and may start live runs" if args.live else ""), file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="collviz-serve-") as scratch:
        prepared = Path(scratch)
        prepare(args.target, lesson=args.lesson, live=args.live, folder=prepared)
        command = tab_command(args.target, lesson=args.lesson, live=args.live, prepared=prepared,
                              max_live=args.max_live, viewer=viewer_options(args))
        print(f"collviz: serving http://{args.host}:{args.port} — open it in a browser, one viewer per tab "
              f"(Ctrl-C stops)", file=sys.stderr, flush=True)
        title = f"collviz — {Path(args.target).name if args.target.endswith('.cvz') else args.target}"
        ClassroomServer(command, host=args.host, port=args.port, title=title).serve()
    return 0


def _is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
