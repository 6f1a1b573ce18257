"""A torchrun rank's SIGTERM said as its end, so that node 0 tells a rank its agent stopped from one
that died unreported (:meth:`~collviz.runtime.sessions.listening.RemoteSession.give_up`).

torch's agent stops its node's ranks with SIGTERM once one of them fails, or once it is asked to
stop. Python runs a signal's handler on the main thread between bytecodes only, and a rank is most
often stopped while its main thread waits inside a collective: the signal's C handler also writes
the signal's number to a wakeup pipe (:func:`signal.set_wakeup_fd`), which a thread of its own
reads. Whichever sees the signal first sends the rank's :class:`~..wire.protocol.RankEnd`
(:data:`~..errors.STOPPED_BY_SIGTERM`) over the rank's event stream, waits for it to leave, and ends the
process with the status a SIGTERM gives (``128 + 15``).

Only under torchrun (:mod:`collviz.runtime.torchrun_rank`): collviz's own launcher sends SIGTERM in
its teardown, once the run's end is known. A script that sets its own SIGTERM handler keeps it
(the signal is then left to it), and processes the rank forks get SIGTERM's default back, as they
would without collviz.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

from ..errors import STOPPED_BY_SIGTERM
from ..wire.protocol import RankEnd
from ..wire.transport import EventEmitter

__all__ = ["STOP_FLUSH_S", "SigtermEnd", "report_sigterm"]

STOP_FLUSH_S = 5.0
"""How long a stopped rank waits for its RankEnd to leave (torch's agent waits 30 s before SIGKILL)."""


class SigtermEnd:
    """This rank's end, said once: by the rank itself (:meth:`claim`) or by a SIGTERM."""

    def __init__(self, emitter: EventEmitter) -> None:
        self._emitter = emitter
        self._claimed = threading.Lock()
        self._claimer: int | None = None
        """The thread that claimed the end (its ident), once one has."""

    def claim(self) -> None:
        """Called before the rank sends its own RankEnd: a later SIGTERM sends none (the rank goes on
        to its exit). Where a SIGTERM claimed the end first, this waits for the process to end."""
        if not self._take():
            threading.Event().wait()  # the stop under way ends the process

    def _take(self) -> bool:
        """Claim the end for this thread; False where one has already."""
        if not self._claimed.acquire(blocking=False):
            return False
        self._claimer = threading.get_ident()
        return True

    def _stop(self) -> None:
        """On SIGTERM (either thread): say the rank's end and exit, unless its end is claimed; the
        main thread, beaten by the wakeup thread, waits for the process to end."""
        if self._take():
            self._emitter.emit(RankEnd, status="error", error=STOPPED_BY_SIGTERM, dropped=self._emitter.dropped)
            self._emitter.close(STOP_FLUSH_S)
            os._exit(128 + signal.SIGTERM)
        if threading.current_thread() is threading.main_thread() and self._claimer != threading.get_ident():
            threading.Event().wait()

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        """The Python handler (the main thread, between bytecodes)."""
        self._stop()

    def _watch(self, wakeups: int) -> None:
        """The wakeup thread: read the signals' numbers, stopping on SIGTERM while the handler is ours."""
        while got := os.read(wakeups, 64):
            if signal.SIGTERM in got and signal.getsignal(signal.SIGTERM) == self._on_sigterm:
                self._stop()
                return

    def _forget_in_child(self) -> None:
        """In a forked child: no wakeup pipe shared with this rank, and SIGTERM's default back."""
        signal.set_wakeup_fd(-1)
        if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def report_sigterm(emitter: EventEmitter) -> SigtermEnd:
    """From now on, a SIGTERM to this process is said as its end over ``emitter`` before it exits
    (call on the main thread, before the rank's work; :meth:`SigtermEnd.claim` before its own end)."""
    end = SigtermEnd(emitter)
    wakeups, wakeup_write = os.pipe()
    os.set_blocking(wakeup_write, False)
    signal.signal(signal.SIGTERM, end._on_sigterm)
    signal.set_wakeup_fd(wakeup_write, warn_on_full_buffer=False)
    os.register_at_fork(after_in_child=end._forget_in_child)
    threading.Thread(target=end._watch, args=(wakeups,), name="collviz-sigterm", daemon=True).start()
    return end
