"""The collviz Textual app: one event log, a cursor, and the screens that show the view at it.

Live, step-through and replay differ in where events come from and in a few keys and labels: that
is a mode object (:mod:`.modes`), chosen from the source given. Everything on screen is
``view_at(log, cursor)``; frames are throttled to :data:`FRAME_RATE` however fast events arrive.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from pathlib import Path

from collviz.runtime.sessions.contract import Session
from collviz.runtime.wire.protocol import AnyEvent
from textual.app import App
from textual.binding import Binding
from textual.reactive import var
from textual.theme import Theme
from textual.timer import Timer

from .messages import EventsArrived, LoadProgress, SessionFailed, TraceFailed, TraceLoaded
from .model import (
    EXIT_INTERRUPTED,
    TAIL_LENGTH,
    EventLog,
    ViewState,
    faster,
    first_collective,
    first_pieces,
    next_boundary,
    previous_boundary,
    slower,
    step_at,
    step_pieces,
    view_at,
)
from .model.quiz import Grade, QuizRound, nothing_to_ask
from .overlays import OverlayActions
from .modes import MODE_ACTIONS, Labels, LiveMode, ReplayMode, StepMode, ViewerMode, live_mode
from .viewer_options import ViewerOptions
from .screens import ViewerScreen
from .screens.quiz import QuizScreen
from .theme import PROJECTOR_THEME, palette_for

__all__ = ["CollvizApp", "make_app", "run_viewer", "FRAME_RATE",
           "EXIT_INTERRUPTED"]

FRAME_RATE = 40.0
"""Most frames per second the app renders, however fast events arrive."""


FREEZE_EVERY = 50_000
"""Live events absorbed between two ``gc.freeze()`` calls, which move the (long-lived) log out of
the cyclic collector's reach so its full collections do not grow with the log."""



class CollvizApp(OverlayActions, App[int]):
    """The viewer. Build it with :func:`make_app`; it returns an exit code when it ends."""

    CSS_PATH = ["styles/app.tcss"]
    TITLE = "collviz"
    BINDINGS = [
        Binding("space", "toggle_play", "play/pause", key_display="space",
                tooltip="replay: play from here at the current speed, or pause"),
        Binding("space", "release_gate", "run a step", key_display="space",
                tooltip="step-through: release every rank into the next phase"),
        Binding("space", "toggle_pacing", "pause/resume", key_display="space",
                tooltip="paced step-through: pause or resume the gates' clock"),
        Binding("left", "step(-1)", "back", key_display="←", tooltip="the step before"),
        Binding("right", "step(1)", "step", key_display="→",
                tooltip="next step; on a pipelined step, one more piece of its schedule"),
        Binding("home", "home", "start", show=False, tooltip="the start of the run, before step 1"),
        Binding("end", "end", "latest", tooltip="go to the end; in a live run, follow it again"),
        Binding("plus,equals_sign", "speed(1)", "faster", key_display="+", tooltip="replay: play faster", show=False),
        Binding("minus", "speed(-1)", "slower", key_display="-", tooltip="replay: play slower", show=False),
        Binding("g", "seek", "go to step"),
        Binding("l", "toggle_log", "event log", show=False),
        Binding("s", "screenshot", "screenshot", tooltip="write an SVG of this frame and say where", show=False),
        Binding("0", "detail(0)", "rank detail", key_display="0–9",
                tooltip="open that rank's buffers in full (the mouse works too)", show=False),
        *(Binding(str(rank), f"detail({rank})", "", show=False) for rank in range(1, 10)),
        Binding("r", "open_rank", "open rank…", show=False, tooltip="open any rank's detail by its number"),
        Binding("b", "factor", "why this factor", show=False,
                tooltip="why busbw = algbw × factor, worked through with this step's latest collective"),
        Binding("P", "toggle_present", "projector", key_display="P", show=False,
                tooltip="the projector layout: larger cells, high contrast, colour-blind-safe rank colours"),
        Binding("n", "lesson(1)", "next item", show=False, tooltip="lesson: leave this item for the next one (q too)"),
        Binding("p", "lesson(-1)", "previous", tooltip="lesson: go back to the previous item"),
        Binding("Q", "end_lesson", "end lesson", key_display="Q", tooltip="lesson: end the whole lesson here"),
        Binding("z", "toggle_quiz", "quiz", show=False,
                tooltip="replay or step-through: predict each collective's result before it is revealed, with a score"),
        Binding("ctrl+down", "scroll_narration(3)", "narration ↓", show=False, key_display="ctrl+↓",
                tooltip="scroll the narration down (a teacher's notes come first)"),
        Binding("ctrl+up", "scroll_narration(-3)", "narration ↑", show=False, key_display="ctrl+↑",
                tooltip="scroll the narration up"),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "lesson(1)", "next item", tooltip="lesson: leave this item for the next one (n too)"),
        Binding("q", "quit", "quit", tooltip="quit; a live run's workers are stopped first"),
    ]

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

    def __init__(
        self,
        *,
        trace: Path | None = None,
        events: Sequence[AnyEvent] | None = None,
        session: Session | None = None,
        mask_volatile: bool = False,
        screenshot_dir: Path | None = None,
        quiz: bool = False,
        options: ViewerOptions | None = None,
    ) -> None:
        super().__init__()
        self.options = options or ViewerOptions()
        if sum(x is not None for x in (trace, events, session)) != 1:
            raise ValueError("give exactly one of trace=, events= or session=")
        self.mode = _mode_for(trace, events, session, self.options)
        self.set_reactive(CollvizApp.quiz, quiz)
        self.quizzes = QuizRound()
        self.mask_volatile = mask_volatile
        self.screenshot_dir = screenshot_dir or Path.cwd()
        self.event_log = EventLog(events or ())
        self.loaded = events is not None
        self.frames = 0
        self.absorbed = 0
        self._frozen = 0
        self.status_line = ""
        self.pieces: int | None = None
        """A pipelined step shown piece by piece: how many of its spans (None: all at the cursor)."""
        self.opening_note = ""
        """Why the view is not where the user left it (a finished run opened at its first
        collective); gone at the user's first move."""
        self._last_frame = 0.0
        self._frame_timer: Timer | None = None
        self._play_timer: Timer | None = None
        self.viewer = ViewerScreen(mask_volatile=mask_volatile)

    @property
    def live(self) -> bool:
        """Whether the events come from a running session (live or step-through)."""
        return isinstance(self.mode, LiveMode)

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
        """Absorb a live batch; the cursor follows the tail unless the user stepped back.

        The reader sends the next batch only once this one is absorbed (events arriving
        meanwhile join it), so the app's queue never holds a backlog of batches: Textual paints
        the screen when that queue runs dry, and a backlog kept it from running dry for seconds
        under a flood (64 ranks at 250,000 events/s: 30 frames/s built, 15 painted)."""
        try:
            self.event_log.extend(message.events)
            self.absorbed += len(message.events)
            if self.absorbed >= self._frozen + FREEZE_EVERY:
                gc.freeze()  # absorbed events live as long as the app: spare them every full collection
                self._frozen = self.absorbed
            if self.following:
                self._follow()
                if self.event_log.run_end is not None:
                    self._show_first_collective()
            hold = self.quizzes.hold
            if hold is not None and (self.event_log.ended_on_every_rank(hold) or self.event_log.run_end is not None):
                self._quiz_live_step()
            self.request_frame()
        finally:
            assert isinstance(self.mode, LiveMode)
            self.mode.took_batch()

    def _follow(self) -> None:
        """Put the cursor where the mode follows the run; a step-through frame landing on a
        pipelined step shows it from its first piece (space or → adds the next)."""
        landed = self.mode.follow_cursor(self.event_log)
        if landed != self.cursor and self.mode.lands_piece_by_piece:
            self.pieces = 1 if step_pieces(self.event_log, landed) > 1 else None
        self.cursor = landed

    def _show_first_collective(self) -> None:
        """A live run (not step-through, no quiz) has just finished well while the view followed
        it: its last step is its emptiest, so show its first collective instead, and say so."""
        first = first_collective(self.event_log)
        ended_well = self.event_log.run_end is not None and self.event_log.run_end[1].status == "ok"
        if first is None or not ended_well or not self.mode.opens_finished_runs_at_first_collective or self.quiz:
            return  # a failed run stays at its end, where the failure is
        self.following = False
        self.cursor = first
        self.opening_note = "run finished: showing its first collective (→ steps on · end: the last step)"

    def _quiz_live_step(self) -> None:
        """Step-through quiz: the held step has ended on every rank (or the run has ended); ask its
        question (if it ran a collective) before it is shown, else show it and follow again."""
        hold, ends = self.quizzes.hold, self.event_log.step_ends
        target = ends[hold] if hold is not None and hold < len(ends) else len(self.event_log)
        self.quizzes.hold = None
        if not self._ask(target):
            self._move(self.mode.follow_cursor(self.event_log))  # follow again: it may already be the next gate's wait

    def on_session_failed(self, message: SessionFailed) -> None:
        """Say that the session failed; the app stays open."""
        self.status_line = f"session failed: {message.error}"
        self.notify(message.error, title="session failed", severity="error", timeout=30, markup=False)
        self.request_frame()

    def on_load_progress(self, message: LoadProgress) -> None:
        """Show how far loading has come, in the progress line."""
        unit = "bytes" if message.stage == "reading" else "events"
        trace = self.mode.trace if isinstance(self.mode, ReplayMode) else ""
        self.viewer.show_progress(f"{message.stage} {trace} ({message.total:,} {unit})", message.done, message.total)

    def on_trace_loaded(self, message: TraceLoaded) -> None:
        """Show the loaded trace from its first step's end."""
        self.event_log = message.log
        self.loaded = True
        self.status_line = ""
        self.viewer.hide_progress()
        if message.warning:
            self.notify(message.warning, title="trace partly read", severity="warning", timeout=15, markup=False)
        self.following = False
        first = first_collective(self.event_log)
        if self.options.pace or self.quiz or first is None:  # play or quiz from the start
            self.cursor = next_boundary(self.event_log, 0)
        else:
            self.cursor = first
            self.opening_note = "opened at the first collective (home: the start · end: the last step)"
        if self.options.pace:
            self.playing = True
        self.render_now()

    def on_trace_failed(self, message: TraceFailed) -> None:
        """Say why the trace could not be read; the app stays open."""
        self.status_line = message.error
        self.notify(message.error, title="cannot read trace", severity="error", timeout=30, markup=False)
        self.render_now()

    def get_theme(self, theme_name: str) -> Theme | None:
        """Textual's lookup minus two copies of the theme registry per call (it runs per painted
        line and cost a fifth of a frame); same result, same fallback."""
        themes = getattr(self, "_registered_themes", None)
        if not isinstance(themes, dict):
            return super().get_theme(theme_name)
        for name in theme_name.split(","):
            theme = themes.get(name.strip())
            if theme is not None:
                return theme
        return None

    def current_view(self) -> ViewState:
        """The view at the cursor (a pipelined step's first :attr:`pieces` spans, if stepped so)."""
        # the raw events before the cursor only while their pane is shown: reading them back from a
        # trace's file costs a cold seek as much as the rest of the frame
        view = view_at(self.event_log, self.cursor, tail=TAIL_LENGTH if self.log_visible else 0)
        return first_pieces(view, self.pieces) if self.pieces is not None and view.spans else view

    def labels(self) -> Labels:
        """The header's words: the mode's, then the event position, status and notes."""
        mode, playback, history, kind = self.mode.labels(self, self.following)
        position = "" if self.mask_volatile else f"event {self.cursor}/{len(self.event_log)}"
        playback = "   ".join(part for part in (playback, position, self.status_line, self.opening_note) if part)
        if self.options.lesson is not None:
            mode = f"{self.options.lesson} · {mode}"
        return Labels(mode, playback, history, kind)

    def render_now(self) -> None:
        """Render a frame now on every screen that shows the view.

        The cyclic collector waits until the frame is built: a first visit of a 64-rank step
        decodes some 500 events (tens of thousands of objects, most kept in the store's cache),
        which set off dozens of collections mid-frame, each rescanning what the last ones kept
        (3 ms of a 15 ms seek); paused, one collection follows the frame."""
        if self._frame_timer is not None:
            self._frame_timer.stop()
            self._frame_timer = None
        self._last_frame = time.monotonic()
        self.frames += 1
        collecting = gc.isenabled()
        gc.disable()
        try:
            view = self.current_view()
            labels = self.labels()
            for screen in self.screen_stack:
                show = getattr(screen, "show_view", None)
                if show is not None:
                    show(view, labels)
        finally:
            if collecting:
                gc.enable()

    def request_frame(self) -> None:
        """Render now if the frame interval has passed, else make sure a frame follows when it has."""
        wait = self._last_frame + 1.0 / FRAME_RATE - time.monotonic()
        if wait <= 0:
            self.render_now()  # inline: a flood of messages can starve timers
        elif self._frame_timer is None:
            self._frame_timer = self.set_timer(wait, self.render_now)  # the trailing frame

    def watch_cursor(self) -> None:
        """A new cursor means a new frame."""
        self.request_frame()

    def watch_playing(self) -> None:
        """Start or stop the playback timer."""
        self._restart_playback()
        self.render_now()

    def watch_speed(self) -> None:
        """Play at the new speed."""
        self._restart_playback()
        self.render_now()

    def watch_log_visible(self, visible: bool) -> None:
        """Show or hide the event log pane (the view carries its events only while it is shown)."""
        if not self.viewer.is_mounted:  # the var's first read, before the screen exists: hidden already
            return
        self.render_now()
        self.viewer.set_log_visible(visible)

    def _restart_playback(self) -> None:
        if self._play_timer is not None:
            self._play_timer.stop()
            self._play_timer = None
        if self.playing:
            self._play_timer = self.set_interval(1.0 / self.speed, self._play_tick)

    def _play_tick(self) -> None:
        """Advance one step (or one piece of a pipelined step); stop at the end."""
        if not self._next_piece():
            self._move_onto(next_boundary(self.event_log, self.cursor))
        if self.cursor >= len(self.event_log):
            self.playing = False

    def _move(self, cursor: int, pieces: int | None = None) -> None:
        """Put the cursor at ``cursor`` for the user and draw the frame at once (no throttling),
        a pipelined step's first ``pieces`` spans only if given."""
        cursor = max(0, min(cursor, len(self.event_log)))
        self.opening_note = ""
        self.pieces = pieces
        self.set_reactive(CollvizApp.cursor, cursor)
        self.set_reactive(CollvizApp.following,
                          cursor >= len(self.event_log) or cursor == self.mode.follow_cursor(self.event_log))
        self.render_now()

    def action_step(self, direction: int) -> None:
        """Move to the next (1) or previous (-1) step boundary; in quiz mode, a step that ran a
        collective is first asked as a question (see :meth:`_ask`). A pipelined step stepped onto
        is shown piece by piece: → adds one span, ← takes one back, until the whole step."""
        if direction > 0:
            if self._next_piece():
                return
            target = next_boundary(self.event_log, self.cursor)
            if not (self.quiz and self._ask(target)):
                self._move_onto(target)
        elif self.pieces is not None and self.pieces > 1:
            self.pieces -= 1
            self.render_now()
        else:
            self._move(previous_boundary(self.event_log, self.cursor))

    def _move_onto(self, cursor: int) -> None:
        """Step forward to ``cursor``: onto a pipelined step, from its schedule's first piece."""
        self._move(cursor, pieces=1 if step_pieces(self.event_log, cursor) > 1 else None)

    def _next_piece(self) -> bool:
        """Show one more piece of the pipelined step being stepped through (the whole step after
        its last); whether there was one."""
        if self.pieces is None:
            return False
        self.pieces += 1
        if self.pieces >= step_pieces(self.event_log, self.cursor):
            self.pieces = None
        self.render_now()
        return True

    def action_toggle_quiz(self) -> None:
        """Replay or step-through: switch predict-then-reveal on or off."""
        self.quiz = not self.quiz
        self.status_line = ""
        self.notify(f"quiz on: {self.mode.quiz_key} asks before each collective's step" if self.quiz
                    else f"quiz off · {self.quizzes.score.text}")

    def _ask(self, target: int) -> bool:
        """If the step shown at ``target`` has a question not asked yet, ask it; whether it did.
        A step with nothing to ask says why in the header."""
        step = step_at(self.event_log, target)
        question = self.quizzes.ask(self.event_log, step)
        if question is None:
            if step not in self.quizzes.asked:
                self.status_line = f"quiz: {nothing_to_ask(self.event_log, step)}"
            return False
        self.status_line = ""

        def answered(graded: Grade | None) -> None:
            """The quiz screen closed: count the grade; at the last question, the score."""
            self._move(self.mode.after_answer(self.event_log, target))
            if graded is not None:
                self.quizzes.score.add(graded)
                if self.quizzes.over(self.event_log):
                    self.notify(f"quiz over: {self.quizzes.score.text}", title="quiz", timeout=30)

        self.push_screen(QuizScreen(question), answered)
        return True

    def on_quiz_screen_answered(self, message: QuizScreen.Answered) -> None:
        """Reveal the step behind the quiz screen as soon as the prediction is graded."""
        self._move(next_boundary(self.event_log, self.cursor))

    def action_home(self) -> None:
        """Go to the start of the log."""
        self._move(0)

    def action_end(self) -> None:
        """Go to the end of the log (live: follow it again, step-through: where every rank last arrived)."""
        self._move(self.mode.follow_cursor(self.event_log))

    def action_speed(self, direction: int) -> None:
        """Replay faster (1) or slower (-1)."""
        self.speed = faster(self.speed) if direction > 0 else slower(self.speed)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Replay keys only in replay, the gate key only in step-through (the mode says), n/p/Q
        only in a lesson (others always)."""
        if action in MODE_ACTIONS:
            return self.mode.allows(action)
        if action in ("lesson", "end_lesson"):
            return self.options.lesson is not None
        return True

    def action_toggle_present(self) -> None:
        """Switch the projector layout (and its theme) on or off."""
        present = not self.viewer.has_class("-present")
        self.theme = PROJECTOR_THEME.name if present else "textual-dark"
        self.viewer.set_present(present)
        self.render_now()

    def watch_theme(self, theme: str) -> None:
        """Rank colours follow the theme (the projector theme's are colour-blind safe)."""
        palette_for(theme)
        if self.viewer.is_mounted:
            self.viewer.refresh_palette()
            self.render_now()

    async def action_lesson(self, direction: int) -> None:
        """Lesson: leave this item for the next (1) or the previous (-1) one."""
        self.options.navigation = "next" if direction > 0 else "previous"
        await self.action_quit()

    def action_scroll_narration(self, lines: int) -> None:
        """Scroll the narration pane by ``lines`` (down when positive)."""
        pane = self.viewer.query_one("#narration")
        pane.scroll_relative(y=lines, animate=False)

    async def action_end_lesson(self) -> None:
        """Lesson: end the whole lesson (q only leaves this item)."""
        self.options.navigation = "end"
        await self.action_quit()

    def action_toggle_play(self) -> None:
        """Replay: play from here (from the start when at the end), or pause."""
        if not self.playing and self.cursor >= len(self.event_log):
            self._move(0)
        self.playing = not self.playing

    def action_release_gate(self) -> None:
        """Step-through: release every rank at the next gate (each press advances one phase),
        or show the next piece of a pipelined step that landed piece by piece."""
        mode = self.mode
        assert isinstance(mode, StepMode)
        if self._next_piece():  # a pipelined step landed piece by piece: its next piece first
            return
        if mode.release_next_gate(self) and self.quiz:  # hold the frame before the released step until it is answered
            self.quizzes.hold = mode.released
            self.following = False

    def action_toggle_pacing(self) -> None:
        """Paced step-through: pause or resume the pacing clock."""
        mode = self.mode
        assert isinstance(mode, StepMode)
        mode.toggle_pacing(self)
        self.render_now()

    def action_toggle_log(self) -> None:
        """Show or hide the raw event log."""
        self.log_visible = not self.log_visible

    async def action_quit(self) -> None:
        """Stop the session's workers (in a thread), then exit with the run's code; in a lesson,
        go on to the next item (unless n, p or Q chose otherwise)."""
        if self.options.lesson is not None and self.options.navigation is None:
            self.options.navigation = "next"
        if self.live:
            self.status_line = "stopping the workers…"
            self.render_now()
            await self.run_worker(self.mode.stop, thread=True, group="control").wait()
        self.exit(self.exit_code())

    def exit_code(self) -> int:
        """The mode's: 0 for a replay; for a live run, its own status (0 ok, 1 failed, 130 quit
        before its end)."""
        return self.mode.exit_code(self.event_log)

    def on_unmount(self) -> None:
        """However the app ends, leave no worker behind."""
        self.mode.stop()


def _mode_for(trace: Path | None, events: Sequence[AnyEvent] | None, session: Session | None,
              options: ViewerOptions) -> ViewerMode:
    """The mode for the one source given: replay, live or step-through (paced if asked)."""
    if session is None:
        return ReplayMode(trace=trace, events=events, pace=options.pace)
    if session.step:
        return StepMode(session, pace=options.pace, clock=options.clock)
    return live_mode(session)


def make_app(
    *,
    trace: Path | None = None,
    events: Sequence[AnyEvent] | None = None,
    session: Session | None = None,
    mask_volatile: bool = False,
    screenshot_dir: Path | None = None,
    quiz: bool = False,
    options: ViewerOptions | None = None,
) -> CollvizApp:
    """The viewer for one source of events: a trace file, a list of events, or a live session.

    ``mask_volatile`` hides what differs between two recordings of the same run (durations,
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
