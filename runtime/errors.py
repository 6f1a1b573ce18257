"""Errors that mean "the user asked for something that cannot be done": exit status 2, one line."""

from __future__ import annotations

import signal

__all__ = ["UsageError", "ProgramExit", "Interrupted", "STOP_SIGNALS", "STOPPED_BY_SIGTERM", "EXIT_RECORDING_INCOMPLETE",
           "exit_status_for"]

EXIT_RECORDING_INCOMPLETE = 3
"""Exit status of a run that finished ok while its recording stopped early (a write error)."""


class UsageError(Exception):
    """Bad input from the user (arguments, scenario file, trace file).

    The command line prints ``collviz: error: <message>`` and exits with status 2; the message is
    one line that says what is wrong and, where it helps, what to do.
    """


class ProgramExit(RuntimeError):
    """A rank's program ended itself with a failing status (a script's ``sys.exit(2)``, argparse's
    error): it has said why on its own stderr, so the rank reports the exit without a traceback."""


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals that end a run the way Ctrl-C does (what timeout, systemd, SLURM and Kubernetes send,
and a closed terminal): workers stopped, summary, RunEnd naming the signal, status 128 + signal."""

STOPPED_BY_SIGTERM = "stopped by SIGTERM (as torchrun's agent ends its ranks)"
"""The error of the RankEnd a torchrun rank sends when SIGTERM stops it (:mod:`.userjob.sigterm_end`):
node 0 names such ranks as consequences of another's failure or death, and no summary says they raised."""


class Interrupted(KeyboardInterrupt):
    """A stop signal (SIGINT, SIGTERM, SIGHUP) raised in the launcher's main thread.

    A KeyboardInterrupt, so every Ctrl-C path handles it; ``signum`` names which signal it was.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_status_for(interrupt: KeyboardInterrupt) -> int:
    """128 + the signal's number (130 for a plain Ctrl-C), as shells and torchrun report it."""
    return 128 + getattr(interrupt, "signum", signal.SIGINT)
