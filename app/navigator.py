"""Where the viewer's cursor goes: a step on or back, a pipelined step piece by piece, the tail of a
live run, a finished run or a loaded trace opened at its first collective.

The cursor itself is the app's (a reactive every frame follows); :class:`Navigator` decides where it
moves and holds what goes with it: how many pieces of a pipelined step are shown (``pieces``) and
why the view is not where the user left it (``opening_note``). Where to go is the model's
(:mod:`.model.navigation`); what differs by mode is the mode's (:mod:`.modes`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .model import TAIL_LENGTH, EventLog, ViewAhead, first_collective, next_boundary, previous_boundary, step_pieces
from .modes import ViewerMode

__all__ = ["Navigator", "NavigatorHost"]


class NavigatorHost(Protocol):
    """What the navigator uses of the app."""

    event_log: EventLog
    mode: ViewerMode
    cursor: int
    following: bool
    playing: bool
    quiz: bool
    loaded: bool
    log_visible: bool
    view_ahead: ViewAhead

    def call_after_refresh(self, callback: Callable[[], object]) -> object:
        """Call ``callback`` once the screen has refreshed."""

    def place(self, cursor: int, following: bool) -> None:
        """Set the cursor and whether it follows the run, without a frame (the caller draws one)."""

    def render_now(self) -> None:
        """Draw a frame now."""


class Navigator:
    """Moves the app's cursor for the user, for playback and for a live run (see the module)."""

    def __init__(self, host: NavigatorHost) -> None:
        self.host = host
        self.pieces: int | None = None
        """A pipelined step shown piece by piece: how many of its spans (None: all at the cursor)."""
        self.opening_note = ""
        """Why the view is not where the user left it (a finished run opened at its first
        collective); gone at the user's first move."""

    def move(self, cursor: int, pieces: int | None = None) -> None:
        """Put the cursor at ``cursor`` for the user and draw the frame at once (no throttling),
        a pipelined step's first ``pieces`` spans only if given."""
        log = self.host.event_log
        cursor = max(0, min(cursor, len(log)))
        self.opening_note = ""
        self.pieces = pieces
        self.host.place(cursor, cursor >= len(log) or cursor == self.host.mode.follow_cursor(log))
        if self.host.loaded or log.run_end is not None:  # asked for first: the collection the frame makes
            self.host.call_after_refresh(self._build_ahead)  # due then runs after this move, not in it
        self.host.render_now()

    def _build_ahead(self) -> None:
        """Build the view at the next step boundary while the viewer idles (:class:`~.model.ViewAhead`)."""
        host = self.host
        host.view_ahead.prepare(host.event_log, host.cursor, TAIL_LENGTH if host.log_visible else 0)

    def forward(self, ask: Callable[[int], bool]) -> None:
        """The next piece of a pipelined step, else the next step boundary, unless ``ask`` (the
        quiz) holds it back as a question first."""
        if self.next_piece():
            return
        target = next_boundary(self.host.event_log, self.host.cursor)
        if not ask(target):
            self.move_onto(target)

    def back(self) -> None:
        """One piece of a pipelined step back, else the previous step boundary."""
        if self.pieces is not None and self.pieces > 1:
            self.pieces -= 1
            self.host.render_now()
        else:
            self.move(previous_boundary(self.host.event_log, self.host.cursor))

    def move_onto(self, cursor: int) -> None:
        """Step forward to ``cursor``: onto a pipelined step, from its schedule's first piece."""
        self.move(cursor, pieces=1 if step_pieces(self.host.event_log, cursor) > 1 else None)

    def next_piece(self) -> bool:
        """Show one more piece of the pipelined step being stepped through (the whole step after
        its last); whether there was one."""
        if self.pieces is None:
            return False
        self.pieces += 1
        if self.pieces >= step_pieces(self.host.event_log, self.host.cursor):
            self.pieces = None
        self.host.render_now()
        return True

    def play_tick(self) -> None:
        """Replay: advance one step (or one piece of a pipelined step); stop at the end."""
        if not self.next_piece():
            self.move_onto(next_boundary(self.host.event_log, self.host.cursor))
        if self.host.cursor >= len(self.host.event_log):
            self.host.playing = False

    def follow_tail(self) -> None:
        """A live batch arrived: a view that follows the run goes where the mode follows it, and
        at the run's good end to its first collective."""
        if not self.host.following:
            return
        self.follow()
        if self.host.event_log.run_end is not None:
            self._show_first_collective()

    def follow(self) -> None:
        """Put the cursor where the mode follows the run; a step-through frame landing on a
        pipelined step shows it from its first piece (space or → adds the next)."""
        host = self.host
        landed = host.mode.follow_cursor(host.event_log)
        if landed != host.cursor and host.mode.lands_piece_by_piece:
            self.pieces = 1 if step_pieces(host.event_log, landed) > 1 else None
        host.cursor = landed

    def _show_first_collective(self) -> None:
        """A live run (not step-through, no quiz) has just finished well while the view followed
        it: its last step is its emptiest, so show its first collective instead, and say so."""
        host = self.host
        first = first_collective(host.event_log)
        run_end = host.event_log.run_end
        ended_well = run_end is not None and run_end[1].status == "ok"
        if first is None or not ended_well or not host.mode.opens_finished_runs_at_first_collective or host.quiz:
            return  # a failed run stays at its end, where the failure is
        host.following = False
        self._open_at(first)
        self.opening_note = "run finished: showing its first collective (→ steps on · end: the last step)"

    def open_loaded(self, paced: bool) -> None:
        """A trace was loaded: open it at its first collective, or at its first step's end where it
        plays (``paced``) or quizzes from the start, or has no collective."""
        host = self.host
        host.following = False
        first = first_collective(host.event_log)
        if paced or host.quiz or first is None:
            host.cursor = next_boundary(host.event_log, 0)
        else:
            self._open_at(first)
            self.opening_note = "opened at the first collective (home: the start · end: the last step)"

    def _open_at(self, cursor: int) -> None:
        """Open the run at ``cursor``: a pipelined step from its schedule's first piece (its first
        microbatch), as → would land on it."""
        self.pieces = 1 if step_pieces(self.host.event_log, cursor) > 1 else None
        self.host.cursor = cursor
