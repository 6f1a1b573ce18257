"""Where events come from: a live session pumped in batches, or a trace file loaded and indexed.

Plain functions, no Textual: the app runs them in thread workers and turns their callbacks into
messages, so they are tested (and benchmarked) without a terminal.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable

from collviz.runtime.sessions.contract import Session
from collviz.runtime.wire.protocol import AnyEvent
from collviz.runtime.wire.scan import NotIntact
from collviz.runtime.wire.trace import read_trace

from .log import EventLog
from .trace_index import TraceRest, open_trace, read_rest

__all__ = ["pump_session", "load_trace", "open_trace_file", "read_carefully", "POLL_SECONDS", "COALESCE_SECONDS",
           "MAX_BATCH", "READY_POLL_SECONDS", "LOAD_CHUNK"]

POLL_SECONDS = 0.05
"""How long the pump waits in ``Session.poll`` while nothing is pending."""

COALESCE_SECONDS = 0.01
"""Events arriving within this long of the first pending one travel in one batch."""

MAX_BATCH = 50_000
"""Events past which a batch is sent even before the consumer has taken the last one."""

READY_POLL_SECONDS = 0.002
"""How often the pump looks again whether the consumer has taken the last batch."""

LOAD_CHUNK = 100_000
"""Events indexed between two progress reports while a trace loads."""


def pump_session(session: Session, emit: Callable[[list[AnyEvent]], None], stopped: Callable[[], bool],
                 ready: Callable[[], bool] = lambda: True) -> None:
    """Poll ``session`` and ``emit`` its events in batches until it has finished or ``stopped()``.

    Events arriving within :data:`COALESCE_SECONDS` of each other share a batch, so a flood
    becomes a few large batches; none is ever dropped. ``ready()`` says whether the consumer
    has taken the last batch: until it has, new events join the next batch rather than queue
    up as batches of their own (up to :data:`MAX_BATCH`, past which batches are sent anyway), so
    a consumer that falls behind catches up in one step instead of working through a backlog:
    the viewer paints only when its message queue runs dry.
    """
    pending: list[AnyEvent] = []
    deadline = 0.0
    while not stopped():
        waiting = bool(pending) and not ready()
        wait = READY_POLL_SECONDS if waiting else max(0.0, deadline - time.monotonic()) if pending else POLL_SECONDS
        batch = session.poll(wait)
        if batch:
            if not pending:
                deadline = time.monotonic() + COALESCE_SECONDS
            pending.extend(batch)
        if waiting:
            # between looks, gather without spinning: under a flood a poll answers at once, and a
            # pump polling back to back while the app absorbed took an eighth of the process's CPU
            # (the app's, through the GIL); a finished session answers at once too
            time.sleep(READY_POLL_SECONDS)
        due = time.monotonic() >= deadline or session.finished
        if pending and (due and ready() or len(pending) >= MAX_BATCH):
            emit(pending)
            pending = []
        elif not pending and not batch and session.finished:
            return


def load_trace(path: str | os.PathLike[str], progress: Callable[[str, int, int], None]) -> tuple[EventLog, str]:
    """Read and index a trace file whole; returns the log and the reader's warning (a truncated
    tail, sequence gaps): :func:`open_trace_file` with what it leaves for later done at once."""
    log, rest, warning = open_trace_file(path, progress)
    try:
        return read_rest(log, rest, warning)
    except NotIntact:
        return read_carefully(path, progress)


def open_trace_file(path: str | os.PathLike[str], progress: Callable[[str, int, int], None],
                    ) -> tuple[EventLog, TraceRest | None, str]:
    """Read and index a trace file as far as its first frame needs: the log, what is left to read
    (None: nothing) and the reader's warning (a truncated tail; where something is left, sequence
    gaps come from :meth:`~.trace_index.TraceRest.finish`).

    An intact trace is indexed a chunk at a time and its events are left in the file
    (:func:`.trace_index.open_trace`: from its index, the first step its viewer shows, whatever
    its length; scanned, about a second per million events, a few bytes each); any other goes
    through :func:`read_carefully`. ``progress(stage, done, total)`` follows large traces:
    ``"reading"`` bytes as records are read, then ``"indexing"`` events every :data:`LOAD_CHUNK`
    of them (an intact trace's chunks are indexed as they are read: its one ``"indexing"`` report
    says all are). Raises ``TraceError`` for a file that cannot be read. The cyclic garbage
    collector is paused while new objects are created, and they are then frozen out of its reach
    (the log lives as long as the viewer), which makes opening a large trace several times faster.
    """
    gc.disable()
    try:
        try:
            log, rest, warning = open_trace(path, lambda done, total: progress("reading", done, total))
            if len(log) > LOAD_CHUNK and rest is None:
                progress("indexing", len(log), len(log))  # each chunk was indexed as it was read
            return log, rest, warning
        except NotIntact:
            pass  # damaged, foreign or from another version: the careful reader says what it found
        log, warning = read_carefully(path, progress)
        return log, None, warning
    finally:
        gc.freeze()
        gc.enable()


def read_carefully(path: str | os.PathLike[str], progress: Callable[[str, int, int], None]) -> tuple[EventLog, str]:
    """The log of the trace at ``path`` read by ``read_trace``, which keeps what it can of any
    trace and says what it skipped (``progress`` as :func:`open_trace_file` takes it), and its
    warning."""
    contents = read_trace(path, lambda done, total: progress("reading", done, total))
    log = EventLog()
    events = contents.events
    for start in range(0, len(events), LOAD_CHUNK):
        log.extend(events[start : start + LOAD_CHUNK])
        if len(events) > LOAD_CHUNK:
            progress("indexing", len(log), len(events))
    return log, contents.warning
