"""App-wide messages: what the session reader and the trace loader tell the app.

Batches of events are never coalesced or replaced (none may be lost); the reader batches them
itself, one message per ``Session.poll``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from textual.message import Message

from collviz.runtime.wire.protocol import AnyEvent

from .model import EventLog
from .model.trace_index import FiledPart

__all__ = ["EventsArrived", "SessionFailed", "LoadProgress", "TraceLoaded", "TracePartRead", "TraceChecked",
           "TraceFailed"]


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
    """A trace file is loaded and indexed as far as its first frame needs; ``warning`` reports a
    truncated tail, if any. ``shown``: where the rest is still to be read (:class:`TracePartRead`,
    then :class:`TraceChecked`), what the app sets once that frame is drawn, the reader waiting."""

    log: EventLog
    warning: str
    shown: threading.Event | None = None


@dataclass
class TracePartRead(Message):
    """The next part of the trace ``log`` holds, read and checked, to be filed into it (then
    ``taken`` is set: the reader reads the next one)."""

    log: EventLog
    part: FiledPart
    taken: threading.Event


@dataclass
class TraceChecked(Message):
    """The trace shown is read whole: its bytes are the ones indexed and its events hold together
    (``warning``: the careful reader's, such as sequence gaps), or ``problem`` says why not (the
    careful reader's log of it follows, in a TraceLoaded)."""

    warning: str
    problem: str


@dataclass
class TraceFailed(Message):
    """A trace file could not be read: ``error`` says why."""

    error: str
