"""What a session is to whoever consumes it, and how its run ended.

Every consumer — the headless drivers (:mod:`.headless`), the recorder and the Textual viewer —
calls ``start``, then ``poll`` until ``finished``, and ``stop`` to interrupt; it reads ``outcome``
and the recording's fate at the end. :class:`~.local.LocalSession` and
:class:`~.listening.RemoteSession` and :class:`~.live.LiveSession` all satisfy
:class:`Session` (mypy checks it where they are passed to a consumer).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..wire.protocol import AnyEvent

__all__ = ["RunOutcome", "Session"]


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended: ``ok``, ``failed`` (a rank died or raised) or ``interrupted``; ``detail``
    says why in one line, ``exit_code`` is the command's status for it."""

    status: str
    detail: str
    exit_code: int


class Session(Protocol):
    """One run's events as its consumers read them, whoever started its workers."""

    @property
    def step(self) -> bool:
        """Whether ranks wait at a gate before each phase (released by :meth:`release`)."""

    @property
    def finished(self) -> bool:
        """True once the run ended and its last event (RunEnd) was produced."""

    @property
    def outcome(self) -> RunOutcome | None:
        """How the run ended (None until it has)."""

    @property
    def log_dir(self) -> str | None:
        """Where the workers' logs are, if this session keeps them."""

    @property
    def record_path(self) -> Path | None:
        """The trace being written, if any."""

    @property
    def recording_error(self) -> str | None:
        """Why the trace stopped before the run's end (a write error), or None."""

    def start(self) -> None:
        """Begin the run (the caller does this before the viewer's threads exist)."""

    def poll(self, timeout: float) -> list[AnyEvent]:
        """Events that arrived since the last call, waiting up to ``timeout`` seconds for some."""

    def release(self, index: int) -> None:
        """Step mode: release every rank waiting at a gate ``<= index`` (thread-safe)."""

    def stop(self, signum: int = signal.SIGINT) -> None:
        """Interrupt the run (by ``signum``) and close the trace; idempotent."""
