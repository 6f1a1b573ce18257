"""What several commands share: a parser whose errors are one line, byte sizes, and the option
groups declared once (``--gpus``, ``--backend``, ``--record``, ``--timeout``, ``--headless``,
``--json``, the viewer's ``--pace``/``--present``), with the checks that go with them.

Imports nothing heavy at module level: ``collviz --version`` and ``--help`` stay fast.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import NoReturn

from collviz.runtime.errors import UsageError

__all__ = ["OneLineParser", "command_parser", "path_argument", "usable_argument", "parse_size", "add_gpus_option",
           "add_backend_option", "add_record_option", "add_timeout_option", "add_headless_option", "add_json_option",
           "add_viewer_options", "check_record_option", "clean_stale_runs", "no_terminal", "print_json", "make_output_folder",
           "add_memory_viz_option"]

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1024**2, "mb": 1000**2, "mib": 1024**2,
          "g": 1024**3, "gb": 1000**3, "gib": 1024**3}


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one-line UsageErrors instead of usage dumps."""

    def error(self, message: str) -> NoReturn:
        """Raise the one-line error, pointing at ``--help``."""
        raise UsageError(f"{message} (see: {self.prog} --help)")


def command_parser(prog: str, description: str, epilog: str | None = None) -> OneLineParser:
    """A command's parser: one-line errors, no abbreviated options, the epilog kept as written."""
    return OneLineParser(prog=prog, description=description, epilog=epilog, allow_abbrev=False,
                         formatter_class=argparse.RawDescriptionHelpFormatter)


def usable_argument(text: str) -> str:
    """An argparse ``type`` for a word that becomes a file name or another process's argument:
    refused by argparse, so in one line, when no file or command line could hold it (a NUL byte,
    a character the file system's encoding lacks)."""
    try:
        encoded = os.fsencode(text)
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(f"{text!r} cannot name a file: it cannot be encoded") from None
    if b"\0" in encoded:
        raise argparse.ArgumentTypeError(f"{text!r} cannot name a file: it holds a NUL byte")
    return text


def path_argument(text: str) -> Path:
    """An argparse ``type`` for a path the user gives (refused as :func:`usable_argument` says)."""
    return Path(usable_argument(text))


def parse_size(text: str, option: str = "--size") -> int:
    """``"16MiB"`` → 16777216; accepts B, KiB/MiB/GiB (binary), KB/MB/GB (decimal), K/M/G (binary)."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS:
        raise UsageError(f"{option} {text!r}: expected a byte count such as 4, 64KiB, 1MiB or 16MiB")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def add_gpus_option(parser: argparse.ArgumentParser, default_text: str, default: int | None = None) -> None:
    """``--gpus N``: the number of ranks (``default_text`` says what the default is)."""
    parser.add_argument("--gpus", type=int, default=default, metavar="N", help=f"number of ranks ({default_text})")


def add_backend_option(parser: argparse.ArgumentParser) -> None:
    """``--backend``: its choices are the backend table's (:mod:`collviz.runtime.backends`)."""
    from collviz.runtime.backends import BACKEND_NAMES

    parser.add_argument("--backend", default="auto", choices=BACKEND_NAMES,
                        help="process-group backend (default auto: NCCL whenever a GPU is visible, ranks sharing "
                             "GPUs when there are fewer than ranks; else gloo on CPU)")


def add_record_option(parser: argparse.ArgumentParser, folder: bool = False) -> None:
    """``--record FILE`` (the trace, created 0600; with ``folder``, ``--record DIR`` of traces) and
    ``--force`` (overwrite what exists)."""
    if folder:
        parser.add_argument("--record", type=path_argument, metavar="DIR", help="write each run's trace into DIR")
        parser.add_argument("--force", action="store_true", help="with --record: overwrite existing traces in DIR")
        return
    parser.add_argument("--record", type=path_argument, metavar="FILE",
                        help="write the trace to FILE while running (refused if FILE is an existing file, unless "
                             "--force; a device, FIFO or link is written through, never replaced; not -)")
    parser.add_argument("--force", action="store_true", help="with --record: overwrite an existing FILE")


def add_timeout_option(parser: argparse.ArgumentParser, default: float, why: str = "") -> None:
    """``--timeout S``: the hang report threshold (``why`` explains an unusual default)."""
    parser.add_argument("--timeout", type=float, default=default, metavar="S",
                        help=f"a collective some ranks entered and others did not for S seconds is reported as a "
                             f"hang, naming who waits where (default {default:g}{why}); the process group gives "
                             f"up 3 s later and the run ends")


def add_headless_option(parser: argparse.ArgumentParser, what: str = "a plain-text summary") -> None:
    """``--headless``: no viewer (the default too when there is no terminal)."""
    parser.add_argument("--headless", action="store_true",
                        help=f"no viewer: print {what} (the default when stdin or stdout is not a terminal)")


def add_json_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--json``: one JSON document on stdout instead of text (``what`` names it)."""
    parser.add_argument("--json", action="store_true", help=f"print {what} as one JSON document")


def add_viewer_options(parser: argparse.ArgumentParser, pace_help: str) -> None:
    """``--pace S`` (what it does: ``pace_help``) and ``--present`` (the projector layout)."""
    parser.add_argument("--pace", type=float, metavar="S", help=pace_help)
    parser.add_argument("--present", action="store_true",
                        help="projector layout: larger cells, high-contrast colour-blind-safe theme (P toggles)")


def make_output_folder(folder: Path, option: str) -> None:
    """Create the folder ``option`` names (with its parents) if missing; a one-line UsageError
    when it cannot be, or cannot be written, or is ``-`` (stdout is no folder)."""
    if str(folder) == "-":
        raise UsageError(f"{option} -: a folder is needed here, not stdout (./- names a folder called -)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"{option} {folder}: exists and is not a folder") from None
    except OSError as exc:
        raise UsageError(f"{option} {folder}: cannot create it ({exc.strerror})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {folder}: not writable")


def add_memory_viz_option(parser: argparse.ArgumentParser) -> None:
    """``--memory-viz DIR``: each rank's CUDA memory snapshot, for pytorch.org/memory_viz."""
    parser.add_argument("--memory-viz", type=path_argument, metavar="DIR",
                        help="CUDA runs: write each rank's CUDA memory snapshot (torch's allocator history: every "
                             "allocation and free with its Python stack) to DIR/rank<r>.pickle, for "
                             "pytorch.org/memory_viz (DIR is created if missing; refused on CPU; not yet run by "
                             "collviz's tests: no GPU)")


def check_record_option(args: argparse.Namespace) -> None:
    """UsageError for a --record target that cannot or should not be written (see check_new_output)."""
    from collviz.runtime.wire.files import check_new_output

    if args.record is not None:
        check_new_output(args.record, "--record", force=args.force)


def clean_stale_runs() -> None:
    """Remove the run folders of collviz launchers that were killed (SIGKILL), saying so."""
    from collviz.runtime.sessions.local import remove_stale_run_folders

    removed = remove_stale_run_folders()
    if removed:
        print(f"collviz: removed {len(removed)} run folder{'s' if len(removed) > 1 else ''} left by a killed "
              f"collviz: {', '.join(removed)}", file=sys.stderr)


WEB_DRIVER_VARIABLE = "TEXTUAL_DRIVER"
"""Set by textual-serve (``collviz serve``) for each browser tab's process: the viewer draws through
that driver over a pipe, so stdin and stdout are pipes there and still the tab is a screen."""


def no_terminal() -> str | None:
    """Why the full-screen viewer cannot run here (stdin or stdout is not a terminal, and no
    Textual driver such as a browser tab's is named), or None."""
    if os.environ.get(WEB_DRIVER_VARIABLE):
        return None
    for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout)):
        try:
            if stream is None or not stream.isatty():
                return f"{name} is not a terminal"
        except (AttributeError, ValueError):  # closed or replaced by something without isatty
            return f"{name} is not a terminal"
    return None


def print_json(document: object) -> None:
    """``document`` as indented JSON on stdout (msgspec: the text ``json.dumps(indent=2,
    ensure_ascii=False)`` gives, about 10× faster: a 1,024-rank import's summary is 113 MB)."""
    import msgspec

    sys.stdout.write(msgspec.json.format(msgspec.json.encode(document), indent=2).decode() + "\n")
