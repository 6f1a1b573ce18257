"""App-wide messages: what the session reader and the trace loader tell the app.

Batches of events are never coalesced or replaced (none may be lost); the reader batches them
itself, one message per ``Session.poll``.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from collviz.runtime.wire.protocol import AnyEvent

from .model import EventLog

__all__ = ["EventsArrived", "SessionFailed", "LoadProgress", "TraceLoaded", "TraceFailed"]


@dataclass
class EventsArrived(Message):
    """A batch of events from the live session, in arrival order."""

    events: list[AnyEvent]


@dataclass
class SessionFailed(Message):
    """The live session could not start or stopped answering: ``error`` says why."""

    error: str


@dataclass
class LoadProgress(Message):
    """A trace is loading: ``stage`` (``reading`` bytes, ``indexing`` events), ``done`` of ``total``."""

    stage: str
    done: int
    total: int


@dataclass
class TraceLoaded(Message):
    """A trace file is loaded and indexed; ``warning`` reports a truncated tail, if any."""

    log: EventLog
    warning: str


@dataclass
class TraceFailed(Message):
    """A trace file could not be read: ``error`` says why."""

    error: str
