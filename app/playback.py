"""The viewer's keys that move through the run: ←/→, [/] (a step that moves data), home/end, and space and +/- as each mode has
them (a replay plays at a speed, a step-through run releases its next gate or pauses its pacing).

:class:`PlaybackActions` is mixed into :class:`~collviz.app.app.CollvizApp`, as
:class:`~.overlays.OverlayActions` is; where the cursor goes is the :class:`~.navigator.Navigator`'s,
the quiz's questions the :class:`~.quiz_flow.QuizFlow`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.timer import Timer

from .mixin_base import AppMixin
from .model import EventLog, faster, next_exchange, slower
from .modes import StepMode, ViewerMode
from .navigator import Navigator
from .quiz_flow import QuizFlow

__all__ = ["PlaybackActions"]


class PlaybackActions(AppMixin):
    """The app's moving keys and replay timer (see the module)."""

    event_log: EventLog
    mode: ViewerMode
    navigator: Navigator
    quiz_flow: QuizFlow
    cursor: int
    playing: bool
    speed: float
    quiz: bool
    status_line: str
    _play_timer: Timer | None = None

    if TYPE_CHECKING:  # what the app provides

        def render_now(self) -> None: ...

        def request_frame(self) -> None: ...

    def action_step(self, direction: int) -> None:
        """→: the next step (asked first in quiz mode) or piece of a pipelined step; ←: back one."""
        if direction > 0:
            self.navigator.forward(self.quiz_flow.ask_before)
        else:
            self.navigator.back()

    def action_exchange(self, direction: int) -> None:
        """]: the next step that moves data (a collective call, a hop, microbatches), asked first in
        quiz mode; [: the previous one. Where there is none, the view stays and says so."""
        target = next_exchange(self.event_log, self.cursor, direction)
        if target is None:
            self.notify(f"no {'later' if direction > 0 else 'earlier'} step moves data", timeout=3)
        elif direction < 0:
            self.navigator.move(target)
        elif not self.quiz_flow.ask_before(target):
            self.navigator.move_onto(target)

    def action_home(self) -> None:
        """Go to the start of the log."""
        self.navigator.move(0)

    def action_end(self) -> None:
        """Go to the end of the log (live: follow it again, step-through: where every rank last arrived)."""
        self.navigator.move(self.mode.follow_cursor(self.event_log))

    def action_speed(self, direction: int) -> None:
        """Replay faster (1) or slower (-1)."""
        self.speed = faster(self.speed) if direction > 0 else slower(self.speed)

    def action_toggle_play(self) -> None:
        """Replay: play from here (from the start when at the end), or pause."""
        if not self.playing and self.cursor >= len(self.event_log):
            self.navigator.move(0)
        self.playing = not self.playing

    def watch_playing(self) -> None:
        """Start or stop the playback timer."""
        self._restart_playback()
        self.render_now()

    def watch_speed(self) -> None:
        """Play at the new speed."""
        self._restart_playback()
        self.render_now()

    def _restart_playback(self) -> None:
        if self._play_timer is not None:
            self._play_timer.stop()
            self._play_timer = None
        if self.playing:
            self._play_timer = self.set_interval(1.0 / self.speed, self.navigator.play_tick)

    def action_release_gate(self) -> None:
        """Step-through: release every rank at the next gate (each press advances one phase),
        or show the next piece of a pipelined step that landed piece by piece."""
        assert isinstance(self.mode, StepMode)
        if self.navigator.next_piece():  # a pipelined step landed piece by piece: its next piece first
            return
        if self.mode.release_next_gate(self) and self.quiz:  # its frame waits for its question
            self.quiz_flow.hold(self.mode.released)

    def action_toggle_pacing(self) -> None:
        """Paced step-through: pause or resume the pacing clock."""
        assert isinstance(self.mode, StepMode)
        self.mode.toggle_pacing(self)
        self.render_now()
