"""The ``collviz`` command: a table of commands, each one module of :mod:`collviz.app.commands`.

``collviz COMMAND …`` imports only that command's module and calls its ``main(argv)``; a first
word that is no command is a scenario to run (``collviz fsdp --gpus 4`` is ``collviz run fsdp
--gpus 4``). Nothing imports this module back: it is the top of the command line.

Every user mistake becomes one line on stderr, ``collviz: error: …``, and exit status 2; Ctrl-C
and stop signals end with 128 + the signal; a closed output pipe ends quietly.
"""

from __future__ import annotations

import faulthandler
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from collviz.runtime.errors import STOP_SIGNALS, Interrupted, UsageError, exit_status_for

__all__ = ["Command", "COMMANDS", "find_command", "top_help", "main", "entry"]


@dataclass(frozen=True)
class Command:
    """One command: its name, the module under ``collviz.app.commands`` holding its ``main`` and
    ``build_parser``, its usage line and what it does (for ``collviz --help``)."""

    name: str
    module: str
    usage: str
    summary: str
    listed: bool = True
    """False for commands other commands start (serve's tabs), kept out of the help."""
    more: tuple[tuple[str, str], ...] = ()
    """Further (usage, summary) lines of the same command (another form it takes)."""


COMMANDS: tuple[Command, ...] = (
    Command("run", "run", "collviz [run] SCENARIO [options]", "run a scenario live (collviz SCENARIO --help)",
            more=(("collviz run --nproc N SCRIPT.py [args]", "your own script on N ranks, every collective timed"),)),
    Command("list", "listing", "collviz list [--json]", "the scenarios, one line each"),
    Command("replay", "replay", "collviz replay TRACE [--headless]", "replay a recorded trace"),
    Command("bench", "bench", "collviz bench [OPS] --sizes 1K:16M", "nccl-tests-style size sweep (table, --json)"),
    Command("compare", "compare", "collviz compare ddp fsdp --gpus 4",
            "memory per rank, measured side by side (--params 7e9: estimates)"),
    Command("lesson", "lesson", "collviz lesson --list | NAME", "a sequence of scenarios with a teacher's notes"),
    Command("serve", "serve", "collviz serve TARGET --port P", "the viewer in a class's browsers, one per tab"),
    Command("export", "export", "collviz export TRACE --perfetto OUT.json",
            "timeline for ui.perfetto.dev / chrome://tracing"),
    Command("worker", "worker", "collviz worker SCENARIO --viewer URL", "a torchrun entry point streaming to a viewer"),
    Command("attach", "attach", "collviz attach TARGET --headless",
            "a running job's ranks from torch's worker servers: who waits on whom, and where"),
    Command("view", "view", "collviz view --listen HOST:PORT", "show the events of workers started by torchrun"),
    Command("doctor", "doctor", "collviz doctor", "what collviz runs on: versions, backends, GPUs"),
    Command("schema", "schema", "collviz schema [--lesson]", "the JSON Schema of scenario (lesson) files"),
    Command("completion", "completion", "collviz completion bash|zsh|fish", "a shell completion script"),
    Command("serve-slot", "serve_slot", "collviz serve-slot FOLDER MAX SCENARIO", "one tab's live run", listed=False),
)
"""Every command, in the order ``collviz --help`` lists them."""

_INTRO = """\
collviz runs real torch.distributed collectives on real worker processes and shows what every rank
holds, what moved between ranks, and what it cost in time and memory.
"""

_QUICK_START = """\
Quick start:
  collviz list
  collviz all-reduce --gpus 4             live viewer (q quits, ? shows keys)
  collviz all-reduce --gpus 4 --headless  plain-text summary: buffers before/after, provenance,
                                          bytes moved, time, algbw/busbw with their formula
  collviz fsdp --gpus 4 --step            one FSDP2 training step, phase by phase
"""


RUN_COMMAND = next(command for command in COMMANDS if command.name == "run")
"""``collviz run``: what a first word that names no command (a scenario, a script) runs."""


def find_command(name: str) -> Command | None:
    """The command called ``name``, or None (then ``name`` is a scenario)."""
    return next((command for command in COMMANDS if command.name == name), None)


def top_help() -> str:
    """``collviz --help``: every command's usage and summary, then a quick start."""
    shown = [form for c in COMMANDS if c.listed for form in ((c.usage, c.summary), *c.more)]
    width = max(len(usage) for usage, _ in shown)
    lines = [f"{'usage:' if i == 0 else '      '} {usage:<{width}}  {summary}" for i, (usage, summary) in enumerate(shown)]
    lines.append(f"       {'collviz --version':<{width}}  collviz's version, in one line")
    return "\n".join(lines) + "\n\n" + _INTRO + "\n" + _QUICK_START


def _version() -> str:
    import collviz

    return f"collviz {collviz.__version__}"


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(top_help())
        return 0 if argv else 2
    if argv[0] in ("-V", "--version", "version"):
        print(_version())
        return 0
    command = find_command(argv[0])
    if command is None:
        if argv[0].startswith("-"):
            raise UsageError(f"expected a scenario name or a command first, got {argv[0]!r} (see: collviz --help)")
        command, argv = RUN_COMMAND, ["run", *argv]
    module = importlib.import_module(f"collviz.app.commands.{command.module}")
    if command.name == "completion":  # the one command that needs the table: it is handed over, not imported
        return module.main(argv[1:], [(c.name, c.module) for c in COMMANDS if c.listed])
    return module.main(argv[1:])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``collviz`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _stop_on_signals()
    _stacks_on_sigusr1()
    try:
        status = _dispatch(argv)
        sys.stdout.flush()
        return status
    except UsageError as exc:
        print(f"collviz: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interrupt:
        print(f"collviz: interrupted ({interrupt.args[0] if interrupt.args else 'SIGINT'})", file=sys.stderr)
        return exit_status_for(interrupt)
    except BrokenPipeError:
        _quiet_stdout()
        return 0


def _quiet_stdout() -> None:
    """The reader of stdout went away (``collviz --help | head -1``): point stdout at /dev/null so
    the interpreter's last flush does not complain, and end quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _stacks_on_sigusr1() -> None:
    """``kill -USR1 PID`` prints every thread's Python stack on stderr (for a process that seems
    stuck); nothing when stderr has no file descriptor (an embedding, a test capturing it)."""
    try:
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    except (AttributeError, ValueError, OSError):  # no SIGUSR1 (Windows), or no fileno
        pass


def _stop_on_signals() -> None:
    """SIGTERM and SIGHUP end a run as Ctrl-C does (workers stopped, summary, trace closed),
    with exit status 128 + signal; the viewer replaces this with its own quit (see the app).

    Ctrl-C's own handler is installed too: a process started with SIGINT ignored (a parent that
    ignores it, a background job of a script) would otherwise inherit the ignoring and never stop
    on SIGINT.
    """

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted(signum)

    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in STOP_SIGNALS:
        signal.signal(signum, interrupt)


def entry() -> NoReturn:
    """The console script and ``python -m collviz``: :func:`main`, then leave without the
    interpreter's teardown of torch's modules and threads (about 0.5 s, for nothing: every trace
    is closed and every worker gone by then), once stdout and stderr are flushed."""
    status = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said there
            pass
    os._exit(status)


if __name__ == "__main__":
    entry()
