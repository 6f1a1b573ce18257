"""The viewer's modes: where its events come from, and what differs in its keys and labels.

The app (:mod:`.app`) holds one event log and a cursor whatever the mode; a mode is the rest:

- :class:`ReplayMode`: a trace file (read and indexed in a thread) or a list of events, played at
  a speed or stepped with ←/→; its exit status is always 0.
- :class:`LiveMode`: a running session's events, read in a thread and followed as they arrive;
  the exit status is the run's own.
- :class:`StepMode`: live, with every rank waiting at a gate before each step until space (or a
  pacing clock) releases it.

A mode talks to the app only through :class:`ModeHost`, so this module sits below the app.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Protocol

from textual.message import Message
from textual.timer import Timer
from textual.worker import Worker, get_current_worker

from collviz.runtime.sessions.contract import Session
from collviz.runtime.sessions.live import LiveSession
from collviz.runtime.wire.protocol import AnyEvent
from collviz.runtime.wire.scan import NotIntact
from collviz.runtime.wire.trace import TraceError

from .messages import EventsArrived, LoadProgress, SessionFailed, TraceChecked, TraceFailed, TraceLoaded, TracePartRead
from .model import EXIT_INTERRUPTED, EventLog, Labels
from .model.log import ENDED
from .model.pacing import Pacer
from .model.sources import open_trace_file, pump_session, read_carefully
from .viewer_options import ViewerOptions

__all__ = ["Labels", "ModeHost", "ViewerMode", "ReplayMode", "LiveMode", "StepMode", "MODE_ACTIONS",
           "READER_STOP_SECONDS", "PACE_POLL", "WAIT_POLL_SECONDS", "FREEZE_EVERY", "mode_for"]

READER_STOP_SECONDS = 2.0
"""How long quitting waits for the session reader to leave ``poll`` before stopping the session."""

FREEZE_EVERY = 50_000
"""Live events absorbed between two ``gc.freeze()`` calls, which move the (long-lived) log out of
the cyclic collector's reach so its full collections do not grow with the log."""

NEXT_READING_SHOWN_S = 2.0
"""A live job's next reading is announced in the header when it is at least this far away."""

PACE_POLL = 0.1
"""Seconds between the pacing timer's looks at the clock."""

WAIT_POLL_SECONDS = 0.1
"""How often a trace's reader, waiting for the app to take what it read, looks whether it is cancelled."""

MODE_ACTIONS = frozenset({"toggle_play", "speed", "toggle_quiz", "release_gate", "toggle_pacing"})
"""The actions only some modes have (:meth:`ViewerMode.allows` says which)."""


class ModeHost(Protocol):
    """What a mode uses of the app."""

    event_log: EventLog
    status_line: str
    playing: bool
    speed: float

    def post_message(self, message: Message) -> bool: ...
    def run_worker(self, work: Callable[[], Any], *, thread: bool = ..., exclusive: bool = ...,
                   group: str = ...) -> Worker[Any]: ...
    def set_interval(self, interval: float, callback: Callable[[], Any]) -> Timer: ...
    def notify(self, message: str) -> None: ...
    def request_frame(self) -> None: ...


class ViewerMode:
    """What one kind of viewer run does differently; the base is what they share."""

    quiz_key: ClassVar[str] = "→"
    """The key that reveals the next step (and asks its question first, in quiz mode)."""

    def start(self, host: ModeHost) -> None:
        """Begin bringing events in (called once the viewer is mounted)."""

    def allows(self, action: str) -> bool:
        """Whether ``action`` (one of :data:`MODE_ACTIONS`) works in this mode."""
        return False

    lands_piece_by_piece: ClassVar[bool] = False
    """Whether a followed frame that lands on a pipelined step shows it from its first piece
    (the recorded spans one by one), rather than whole."""

    opens_finished_runs_at_first_collective: ClassVar[bool] = False
    """Whether a run followed to its good end is then shown at its first collective (its last
    step, unobserved timed steps and checks, is its emptiest): only where nothing waits for the
    user at each step."""

    def labels(self, host: ModeHost, following: bool) -> Labels:
        """The header's mode and playback words."""
        raise NotImplementedError

    def after_answer(self, log: EventLog, target: int) -> int:
        """Where the cursor goes once a quiz question about the step ending at ``target`` is answered."""
        return target

    def follow_cursor(self, log: EventLog) -> int:
        """Where a view that follows the run puts its cursor: the end of the log."""
        return len(log)

    def exit_code(self, log: EventLog) -> int:
        """The viewer's exit status when it closes."""
        return 0

    def stop(self) -> None:
        """Stop whatever the mode started (blocking; safe to call more than once)."""


def _waited(done: threading.Event, worker: Worker[Any]) -> bool:
    """Wait until ``done`` is set (True), or until ``worker`` is cancelled (False: the app is closing)."""
    while not done.wait(WAIT_POLL_SECONDS):
        if worker.is_cancelled:
            return False
    return True


class ReplayMode(ViewerMode):
    """A recorded run: a trace file read in a thread, or events given up front; ``pace`` (seconds
    per step) plays it from the start."""

    def __init__(self, *, trace: Path | None = None, events: Sequence[AnyEvent] | None = None,
                 pace: float | None = None) -> None:
        if (trace is None) == (events is None):
            raise ValueError("a replay needs exactly one of trace= or events=")
        self.trace = trace
        self.events = events
        self.pace = pace

    def start(self, host: ModeHost) -> None:
        """Play at the pace asked; read the trace in a thread, reporting progress for large ones."""
        if self.pace:
            host.speed = 1.0 / self.pace
        if self.trace is not None:
            host.status_line = f"loading {self.trace}…"
            host.run_worker(partial(self._load, host, self.trace), thread=True, exclusive=True, group="load")

    @staticmethod
    def _load(host: ModeHost, path: Path) -> None:
        """Read and index ``path``; the app hears of it as TraceLoaded or TraceFailed. Where the
        first frame was read before the rest (a large indexed trace), the rest follows once that
        frame is drawn, a TracePartRead per part, then TraceChecked (and, if the whole failed its
        checks, the careful reader's log in a second TraceLoaded)."""
        worker = get_current_worker()

        def progress(stage: str, done: int, total: int) -> None:
            host.post_message(LoadProgress(stage, done, total))

        try:
            log, rest, warning = open_trace_file(path, progress)
        except TraceError as exc:
            host.post_message(TraceFailed(str(exc)))
            return
        shown = threading.Event() if rest is not None else None
        host.post_message(TraceLoaded(log, warning, shown))
        if rest is None or shown is None or not _waited(shown, worker):
            return
        try:
            for part in rest.parts():
                taken = threading.Event()
                host.post_message(TracePartRead(log, part, taken))
                if not _waited(taken, worker):
                    return
            host.post_message(TraceChecked(rest.finish(), ""))
        except NotIntact as exc:
            host.post_message(TraceChecked("", f"{path} is not as its index says ({exc}): read again whole"))
            try:
                host.post_message(TraceLoaded(*read_carefully(path, progress)))
            except TraceError as error:
                host.post_message(TraceFailed(str(error)))

    def allows(self, action: str) -> bool:
        """Play, speed and the quiz."""
        return action in ("toggle_play", "speed", "toggle_quiz")

    def labels(self, host: ModeHost, following: bool) -> Labels:
        """``replay`` (and the mode it was recorded in), playing or paused at its speed."""
        start = host.event_log.run_start
        recorded = start.mode if start else "live"
        mode = "replay" if recorded == "live" else f"replay ({recorded})"
        return Labels(mode, f"{'▶ playing' if host.playing else '⏸ paused'} {host.speed:g}x", True, "replay")


class LiveMode(ViewerMode):
    """A running session, its events read in a thread and posted to the app in batches."""

    opens_finished_runs_at_first_collective = True

    def __init__(self, session: Session) -> None:
        self.session = session
        self._stopping = threading.Event()
        self._batch_taken = threading.Event()
        """Set when the app has taken the reader's last batch (see :meth:`took_batch`)."""
        self._batch_taken.set()
        self._reader_done = threading.Event()
        self.absorbed = 0
        """Events the app has absorbed (:meth:`absorb`)."""
        self._frozen = 0
        self._left = False

    def start(self, host: ModeHost) -> None:
        """Read the (already started) session in a thread."""
        host.run_worker(partial(self._read, host), thread=True, exclusive=True, group="session")

    def _read(self, host: ModeHost) -> None:
        """Post the session's events in batches until it has finished; each batch waits until the
        app has taken the last (:meth:`took_batch`), so its queue never holds a backlog."""
        worker = get_current_worker()

        def emit(batch: list[AnyEvent]) -> None:
            self._batch_taken.clear()
            host.post_message(EventsArrived(batch))

        try:
            pump_session(self.session, emit, lambda: worker.is_cancelled or self._stopping.is_set(),
                         self._batch_taken.is_set)
        except Exception as exc:  # the session's own failure is shown, not raised into Textual
            host.post_message(SessionFailed(f"{type(exc).__name__}: {exc}"))
        finally:
            self._reader_done.set()

    def absorb(self, log: EventLog, events: list[AnyEvent]) -> None:
        """Add a batch the reader sent to ``log``; every :data:`FREEZE_EVERY` events, move what the
        log holds out of the cyclic collector's reach (it lives as long as the app)."""
        log.extend(events)
        self.absorbed += len(events)
        if self.absorbed >= self._frozen + FREEZE_EVERY:
            gc.freeze()
            self._frozen = self.absorbed

    def took_batch(self) -> None:
        """The app has absorbed the last batch: the reader may send the next.

        Only then (events arriving meanwhile join it), so the app's queue never holds a backlog
        of batches: Textual paints the screen when that queue runs dry, and a backlog kept it from
        running dry for seconds under a flood (64 ranks at 250,000 events/s: 30 frames/s built,
        15 painted)."""
        self._batch_taken.set()

    def labels(self, host: ModeHost, following: bool) -> Labels:
        """``live`` while the run goes on, ``finished`` once it has ended (however it ended: the
        second line says how); browsing its history, where the run is now."""
        playback = "" if following else f"{self._run_now(host.event_log)} (end: follow)"
        return Labels("live" if host.event_log.run_end is None else "finished", playback, not following, "live")

    @staticmethod
    def _run_now(log: EventLog) -> str:
        """Where the run stands now, for a header that shows an earlier moment of it."""
        if log.run_end is None:
            return "the run goes on"
        status = log.run_end[1].status
        return f"the run has {'finished' if status == 'ok' else status}"

    def after_answer(self, log: EventLog, target: int) -> int:
        """Follow the run again (the ranks may already wait at the next gate)."""
        return self.follow_cursor(log)

    def exit_code(self, log: EventLog) -> int:
        """The run's own: 0 ok, 1 failed, 130 interrupted (Ctrl-C); 0 for a run the user left
        with q before its end (:meth:`leave`): leaving is a choice, not a failure."""
        code = log.exit_code()
        return 0 if self._left and code == EXIT_INTERRUPTED else code

    def leave(self, log: EventLog, options: ViewerOptions) -> None:
        """The user quits (q, or a lesson's n/p/Q): a run not yet ended is noted as left, where,
        in ``options.left_at`` (the command says so instead of a signal's story), then stopped."""
        if log.run_end is None:
            self._left = True
            done = len(log.step_ends)
            options.left_at = f"after step {done}, before the run's end" if done else "before its first step ended"
        self.stop()

    def stop(self) -> None:
        """Stop the reader, wait until it no longer polls, then stop the session's workers."""
        self._stopping.set()
        self._reader_done.wait(READER_STOP_SECONDS)  # a reader still in poll past this ends with the session
        self.session.stop()


class JobMode(LiveMode):
    """A running job read live (:class:`~collviz.runtime.sessions.live.LiveSession`: attached, or
    an Inspector folder followed): at the job's end the view stays on the step it was on (a stall
    the user was looking at included), the header saying how the job ended; while it runs, when
    the next reading comes where that is :data:`NEXT_READING_SHOWN_S` away or more (a steady job is
    read only as often as its ranks' CPU pays for: a still view is then not a frozen one)."""

    opens_finished_runs_at_first_collective = False

    def __init__(self, session: LiveSession, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(session)
        self.live_session = session
        self._clock = clock

    def start(self, host: ModeHost) -> None:
        """Read the session; the header's countdown to the next reading is redrawn every second."""
        super().start(host)
        host.set_interval(1.0, host.request_frame)

    def labels(self, host: ModeHost, following: bool) -> Labels:
        """:meth:`LiveMode.labels`, and while following a running job, its next reading's countdown."""
        labels = super().labels(host, following)
        upcoming = self.live_session.next_reading
        if not following or host.event_log.run_end is not None or upcoming is None:
            return labels
        left = upcoming.at - self._clock()
        if left < NEXT_READING_SHOWN_S:
            return labels
        why = " (paced to 0.4 % of the ranks' CPU)" if upcoming.held else ""
        return labels._replace(playback=f"next reading in ~{left:.0f} s{why}")


class StepMode(LiveMode):
    """A step-through session: space releases every rank at the next gate; with ``pace``, the
    gates open by themselves every ``pace`` seconds once every rank waits (space pauses)."""

    opens_finished_runs_at_first_collective = False
    lands_piece_by_piece = True
    quiz_key = "space"

    def __init__(self, session: Session, *, pace: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(session)
        self.pacer = Pacer(pace, clock) if pace else None
        self.released = -1
        """The last gate released (-1: none yet)."""

    def start(self, host: ModeHost) -> None:
        """Read the session; a paced run also looks at its clock every :data:`PACE_POLL` seconds."""
        super().start(host)
        if self.pacer is not None:
            host.set_interval(PACE_POLL, partial(self.pace_tick, host))

    def allows(self, action: str) -> bool:
        """The gate key and the quiz, or where the gates open by themselves, pausing them."""
        if self.pacer is not None:
            return action == "toggle_pacing"
        return action in ("release_gate", "toggle_quiz")

    def follow_cursor(self, log: EventLog) -> int:
        """Where every rank last arrived together at a gate (or ended): a step lands once every
        rank has done it. The end of the log once the run has ended, failed, stalled or
        mismatched: what went wrong is shown as it happens, not held back for ranks that may
        never arrive."""
        if log.run_end is not None or log.failures or log.stalls or log.mismatches:
            return len(log)
        return log.arrival_cursor

    def labels(self, host: ModeHost, following: bool) -> Labels:
        """``step-through``, or the pacing and its countdown; while the step released runs, how
        many ranks have done it (its frame lands when all have)."""
        _, playback, history, _ = super().labels(host, following)
        log = host.event_log
        if following and self.follow_cursor(log) < len(log):
            done = sum(gate > log.gate_reached for gate in log.arrived.values())
            running = f"step {self.released + 1} running" if self.released >= 0 else "starting"
            playback = f"{running} · {done}/{log.world_size} ranks at the next gate"
        if self.pacer is None:
            return Labels("step-through", playback, history, "stepping")
        remaining = self.pacer.remaining()
        pacing = ("run over" if host.event_log.run_end is not None else
                  "⏸ paused (space resumes)" if self.pacer.paused else
                  f"next step in {remaining:.0f} s" if remaining is not None else "waiting for the ranks")
        return Labels(f"paced every {self.pacer.period:g} s · {pacing}", playback, history, "stepping")

    def pace_tick(self, host: ModeHost) -> None:
        """Open the next gate when every rank waits there and its time is up."""
        assert self.pacer is not None
        log = host.event_log
        if self.pacer.due(ready=self.released < log.gate_reached < ENDED):  # every rank waits at a gate not yet opened
            self.release_next_gate(host)
        host.request_frame()  # the header counts down

    def toggle_pacing(self, host: ModeHost) -> None:
        """Pause or resume the pacing clock, and say which."""
        assert self.pacer is not None
        host.notify("pacing paused: space resumes" if self.pacer.toggle() else "pacing resumed")

    def release_next_gate(self, host: ModeHost) -> bool:
        """Release every rank waiting at the next gate; whether there was one left."""
        gos = host.event_log.gos.events
        gate = host.event_log.next_gate(max(self.released, gos[-1].index if gos else -1))
        if host.event_log.run_start is not None and gate >= host.event_log.phase_count:
            host.notify("no gate left to release")
            return False
        self.released = gate
        host.run_worker(partial(self.session.release, gate), thread=True, group="control")
        return True


def mode_for(trace: Path | None, events: Sequence[AnyEvent] | None, session: Session | None,
             options: ViewerOptions) -> ViewerMode:
    """The mode for the one source given: replay, live (a job read live: :class:`JobMode`) or
    step-through (paced if asked)."""
    if session is None:
        return ReplayMode(trace=trace, events=events, pace=options.pace)
    if session.step:
        return StepMode(session, pace=options.pace, clock=options.clock)
    return JobMode(session) if isinstance(session, LiveSession) else LiveMode(session)
