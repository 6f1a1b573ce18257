"""The collviz Textual app, a shell: it holds one event log, a cursor and the screens showing the
view at it, and routes messages and keys to the parts that know them — the mode (:mod:`.modes`:
where events come from, which keys work), the cursor's moves (:mod:`.navigator`), the quiz
(:mod:`.quiz_flow`), frames (:mod:`.frames`, at most :data:`FRAME_RATE` a second), the action
mixins (:mod:`.playback`, :mod:`.overlays`, :mod:`.classroom`) and a trace's reader's messages
(:mod:`.trace_reading`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

from collviz.runtime.sessions.contract import Session
from collviz.runtime.wire.protocol import AnyEvent
from textual.app import App
from textual.reactive import var

from .classroom import ClassroomActions
from .frames import FRAME_RATE, FramePacer
from .keys import VIEWER_BINDINGS
from .messages import EventsArrived, SessionFailed
from .model import EXIT_INTERRUPTED, TAIL_LENGTH, EventLog, Labels, ViewAhead, ViewState, first_pieces
from .modes import MODE_ACTIONS, LiveMode, mode_for
from .navigator import Navigator
from .overlays import OverlayActions
from .playback import PlaybackActions
from .quiz_flow import QuizFlow
from .screens import ViewerScreen
from .screens.quiz import QuizScreen
from .trace_reading import TraceReading
from .theme import PROJECTOR_THEME
from .viewer_options import ViewerOptions

__all__ = ["CollvizApp", "make_app", "run_viewer", "FRAME_RATE", "EXIT_INTERRUPTED"]


class CollvizApp(TraceReading, PlaybackActions, OverlayActions, ClassroomActions, App[int]):
    """The viewer (a shell: see the module). Build it with :func:`make_app`; it returns an exit
    code when it ends."""

    CSS_PATH = ["styles/app.tcss"]
    TITLE = "collviz"
    BINDINGS = VIEWER_BINDINGS

    cursor: var[int] = var(0)
    """How many events of the log the view shows."""
    following: var[bool] = var(True)
    """Live: the cursor follows the log's tail (until the user steps back)."""
    playing: var[bool] = var(False)
    """Replay: the cursor advances one step per 1/speed seconds."""
    speed: var[float] = var(1.0)
    """Replay speed in steps per second."""
    log_visible: var[bool] = var(False)
    """Whether the raw event log pane is shown."""
    quiz: var[bool] = var(False)
    """Replay: → asks each collective's step as a question before revealing it; step-through:
    space releases the step, and its question is asked before its frame is shown."""

    def __init__(self, *, trace: Path | None = None, events: Sequence[AnyEvent] | None = None,
                 session: Session | None = None, mask_volatile: bool = False, screenshot_dir: Path | None = None,
                 quiz: bool = False, options: ViewerOptions | None = None) -> None:
        super().__init__()
        self.options = options or ViewerOptions()
        if sum(x is not None for x in (trace, events, session)) != 1:
            raise ValueError("give exactly one of trace=, events= or session=")
        self.mode = mode_for(trace, events, session, self.options)
        self.set_reactive(CollvizApp.quiz, quiz)
        self.navigator = Navigator(self)
        self.quiz_flow = QuizFlow(self, self.navigator.move)
        self.mask_volatile = mask_volatile
        self.screenshot_dir = screenshot_dir or Path.cwd()
        self.event_log = EventLog(events or ())
        self.loaded = events is not None
        self.checked = trace is None  # a trace is read and checked in parts: see TraceReading
        self.frame_pacer = FramePacer(self)
        self.view_ahead = ViewAhead()
        self.status_line = ""
        self.viewer = ViewerScreen(mask_volatile=mask_volatile)

    def on_mount(self) -> None:
        """Show the viewer and start bringing events in (in the projector layout, if asked)."""
        self.register_theme(PROJECTOR_THEME)
        self.push_screen(self.viewer)
        if self.options.present:
            self.action_toggle_present()
        self.mode.start(self)
        if self.loaded:  # events given up front
            self.cursor = len(self.event_log)
        self.render_now()

    def on_events_arrived(self, message: EventsArrived) -> None:
        """Absorb a live batch (the one place a live event passes in the app): the cursor follows
        the tail unless the user stepped back, a held quiz step is asked once done; then the
        reader may send the next (:meth:`LiveMode.took_batch` says why only then)."""
        mode = self.mode
        assert isinstance(mode, LiveMode)
        try:
            mode.absorb(self.event_log, message.events)
            self.navigator.follow_tail()
            self.quiz_flow.ask_held()
            self.request_frame()
        finally:
            mode.took_batch()

    def on_session_failed(self, message: SessionFailed) -> None:
        """Say that the session failed; the app stays open."""
        self.status_line = f"session failed: {message.error}"
        self.notify(message.error, title="session failed", severity="error", timeout=30, markup=False)
        self.request_frame()

    def on_quiz_screen_answered(self, message: QuizScreen.Answered) -> None:
        """Reveal the step behind the quiz screen as soon as the prediction is graded."""
        self.quiz_flow.reveal()

    def current_view(self) -> ViewState:
        """The view at the cursor (built ahead where a move asked; a pipelined step's first pieces, if so)."""
        # the raw events before the cursor only while their pane is shown: reading them back from a
        # trace's file costs a cold seek as much as the rest of the frame
        view = self.view_ahead.view(self.event_log, self.shown_cursor, TAIL_LENGTH if self.log_visible else 0)
        pieces = self.navigator.pieces
        return first_pieces(self.event_log, view, pieces) if pieces is not None and view.spans else view

    def labels(self) -> Labels:
        """The header's words: the mode's, then the event position, status and notes."""
        mode, playback, history, kind = self.mode.labels(self, self.following)
        log = self.event_log
        position = "" if self.mask_volatile else f"event {self.shown_cursor}/{len(log)}"
        parts = (playback, position, self.reading_note(), self.status_line, self.trace_problem,
                 self.navigator.opening_note)
        if self.options.lesson is not None:
            mode = f"{self.options.lesson} · {mode}"
        return Labels(mode, "   ".join(part for part in parts if part), history, kind)

    def place(self, cursor: int, following: bool) -> None:
        """Set the cursor and whether it follows the run, without a frame (the caller draws one)."""
        self.set_reactive(CollvizApp.cursor, cursor)
        self.set_reactive(CollvizApp.following, following)

    def render_now(self) -> None:
        """Draw a frame now (:meth:`FramePacer.now`)."""
        self.frame_pacer.now()

    def request_frame(self) -> None:
        """Draw a frame now or, within :data:`FRAME_RATE`, soon (:meth:`FramePacer.request`)."""
        self.frame_pacer.request()

    @property
    def frames(self) -> int:
        """How many frames the app has drawn."""
        return self.frame_pacer.count

    def watch_cursor(self) -> None:
        """A new cursor means a new frame."""
        self.request_frame()

    def watch_log_visible(self, visible: bool) -> None:
        """Show or hide the event log pane (the view carries its events only while it is shown)."""
        if not self.viewer.is_mounted:  # the var's first read, before the screen exists: hidden already
            return
        self.render_now()
        self.viewer.set_log_visible(visible)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Replay keys only in replay, the gate key only in step-through (the mode says), n/p/Q
        only in a lesson (others always)."""
        if action in MODE_ACTIONS:
            return self.mode.allows(action)
        if action in ("lesson", "end_lesson"):
            return self.options.lesson is not None
        return True

    def action_toggle_quiz(self) -> None:
        """Replay or step-through: switch predict-then-reveal on or off."""
        self.quiz_flow.toggle()

    def action_toggle_log(self) -> None:
        """Show or hide the raw event log."""
        self.log_visible = not self.log_visible

    async def action_quit(self) -> None:
        """Stop the session's workers (in a thread), then exit with the run's code; in a lesson,
        go on to the next item (unless n, p or Q chose otherwise)."""
        if self.options.lesson is not None and self.options.navigation is None:
            self.options.navigation = "next"
        if isinstance(self.mode, LiveMode):  # live or step-through
            self.status_line = "stopping the workers…"
            self.render_now()
            await self.run_worker(partial(self.mode.leave, self.event_log, self.options), thread=True,
                                  group="control").wait()
        self.exit(self.exit_code())

    def exit_code(self) -> int:
        """The mode's: 0 for a replay; for a live run, its own status (0 ok or left with q before
        its end, 1 failed, 130 interrupted)."""
        return self.mode.exit_code(self.event_log)

    def on_unmount(self) -> None:
        """However the app ends, leave no worker behind."""
        self.mode.stop()


def make_app(*, trace: Path | None = None, events: Sequence[AnyEvent] | None = None, session: Session | None = None,
             mask_volatile: bool = False, screenshot_dir: Path | None = None, quiz: bool = False,
             options: ViewerOptions | None = None) -> CollvizApp:
    """The viewer for one source of events: a trace file, a list of events, or a live session.

    ``mask_volatile`` hides what differs between two traces of the same run (durations,
    event positions), for snapshot tests;
    ``screenshot_dir`` is where ``s`` writes SVGs (the current directory by default);
    ``quiz`` starts a replay in predict-then-reveal mode; ``options``: pacing, projector, lesson.
    """
    return CollvizApp(trace=trace, events=events, session=session, mask_volatile=mask_volatile,
                      screenshot_dir=screenshot_dir, quiz=quiz, options=options)


def run_viewer(*, trace: Path | None = None, session: Session | None = None, events: Sequence[AnyEvent] | None = None,
               quiz: bool = False, options: ViewerOptions | None = None) -> int:
    """Run the viewer in the terminal until the user quits; returns the exit code.

    ``run_viewer(session=...)`` for live and step-through runs: the caller has already called
    ``session.start()`` (fork before the app's threads exist); the app reads the session and
    stops it when the user quits. ``run_viewer(trace=path)`` for replay; ``events=`` for a run
    made from a user's artifacts.
    """
    app = make_app(trace=trace, session=session, events=events, quiz=quiz, options=options)
    code = app.run()
    return code if code is not None else (app.exit_code())
