"""The user-script observer's completion thread: when each of a rank's CPU collectives completed
(see :mod:`.observer`, "What is timed")."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

import torch.distributed as dist

__all__ = ["CompletionStamper"]


class CompletionStamper:
    """A thread that waits on each queued call's Work, in issue order, and reports when it woke
    (with ``wait``, the original ``Work.wait``: no side effect on a CPU work but waiting).

    Every time this thread wakes it must take the interpreter lock from the script's thread, and
    on a busy machine each such hand-over can cost the script far more than the Python run here
    (BENCHMARKS.md). So it wakes once per call at most: a call issued while it waits on an earlier
    one is queued without waking it, and the calls that have completed by the time it wakes are
    stamped together.
    """

    def __init__(self, wait: Any, completed: Any) -> None:
        self._wait = wait
        self._completed = completed
        self._pending: deque[tuple[dist.Work, Any]] = deque()
        self._ready = threading.Condition()
        self._idle = False
        """It sleeps on ``_ready`` (set before it last looked at the queue, under ``_ready``)."""
        self._thread: threading.Thread | None = None
        self._stopping = False

    def start(self) -> None:
        """Start the thread (again, after :meth:`stop`)."""
        self._stopping = False
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="collviz-completions", daemon=True)
            self._thread.start()

    def add(self, work: dist.Work, call: Any) -> None:
        """Report ``call``'s completion once ``work`` has completed."""
        self._pending.append((work, call))
        if self._idle:  # asleep, or about to be: it said so before its last look at the queue
            with self._ready:
                self._ready.notify()

    def stop(self, timeout_s: float = 1.0) -> None:
        """Report what completes within ``timeout_s``, then stop (a call that never completes, as
        when the script failed, stays unreported; the thread is a daemon)."""
        with self._ready:
            self._stopping = True
            self._ready.notify()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        pending = self._pending
        while True:
            if not pending:
                with self._ready:
                    self._idle = True
                    while not pending and not self._stopping:
                        self._ready.wait()
                    self._idle = False
                if not pending:
                    return
            work, call = pending[0]
            ok = self._succeeded(work)
            now = time.monotonic_ns()
            pending.popleft()
            ended = [(call, ok)]
            while pending and pending[0][0].is_completed():  # done by now too: stamped by this wake
                work, call = pending.popleft()
                ended.append((call, self._succeeded(work)))
            self._completed(ended, now)

    def _succeeded(self, work: dist.Work) -> bool:
        """Wait for ``work``; False when the call failed (a peer died: no time of its own).
        (``Work.exception`` and ``is_success`` would say without waiting, but torch warns that
        they are deprecated, in the script's output.)"""
        try:
            self._wait(work)
        except Exception:
            return False
        return True
