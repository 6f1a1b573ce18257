"""The quiz's flow through a run: when a step is asked as a question before it is shown, and
where the cursor goes once it is answered.

The questions and their grading are the model's (:mod:`.model.quiz`). :class:`QuizFlow` decides
when to ask — → in a replay; in step-through, the step space released, held until every rank has
done it (or the run ended) — shows the question (:class:`~.screens.quiz.QuizScreen`), and keeps
the score.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .model import EventLog, next_boundary, step_at
from .model.quiz import Grade, QuizRound, nothing_to_ask
from .modes import ViewerMode
from .screens.quiz import QuizScreen

__all__ = ["QuizFlow", "QuizHost"]


class QuizHost(Protocol):
    """What the quiz flow uses of the app."""

    event_log: EventLog
    mode: ViewerMode
    cursor: int
    following: bool
    quiz: bool
    status_line: str

    def push_screen(self, screen: QuizScreen, callback: Callable[[Grade | None], None]) -> object:
        """Show ``screen``; ``callback`` gets its result when it closes."""

    def notify(self, message: str, *, title: str = ..., timeout: float | None = ...) -> None:
        """Say ``message`` in a toast."""


class QuizFlow:
    """Asks each collective's step before revealing it; ``move`` puts the cursor for the user."""

    def __init__(self, host: QuizHost, move: Callable[[int], None]) -> None:
        self.host = host
        self.move = move
        self.round = QuizRound()
        """The steps asked, the score, and the released step held for its question."""

    def toggle(self) -> None:
        """Switch predict-then-reveal on or off, saying which (off: with the score)."""
        host = self.host
        host.quiz = not host.quiz
        host.status_line = ""
        host.notify(f"quiz on: {host.mode.quiz_key} asks before each collective's step" if host.quiz
                    else f"quiz off · {self.round.score.text}")

    def ask_before(self, target: int) -> bool:
        """With the quiz on, ask the step shown at ``target`` first (see :meth:`ask`); whether it did."""
        return self.host.quiz and self.ask(target)

    def ask(self, target: int) -> bool:
        """If the step shown at ``target`` has a question not asked yet, ask it; whether it did.
        A step with nothing to ask says so in the header and why in a toast (which wraps: the
        reason is whole at 100 columns, where the header's second line is not)."""
        host, log = self.host, self.host.event_log
        step = step_at(log, target)
        question = self.round.ask(log, step)
        if question is None:
            if step not in self.round.asked:
                host.status_line = f"quiz: nothing to ask at step {step + 1}"
                host.notify(nothing_to_ask(log, step), title="quiz: nothing to ask", timeout=8)
            return False
        host.status_line = ""

        def answered(graded: Grade | None) -> None:
            """The quiz screen closed: count the grade; at the last question, the score."""
            self.move(host.mode.after_answer(host.event_log, target))
            if graded is not None:
                self.round.score.add(graded)
                if self.round.over(host.event_log):
                    host.notify(f"quiz over: {self.round.score.text}", title="quiz", timeout=30)

        host.push_screen(QuizScreen(question), answered)
        return True

    def reveal(self) -> None:
        """The prediction is graded: show the step behind the quiz screen."""
        self.move(next_boundary(self.host.event_log, self.host.cursor))

    def hold(self, gate: int) -> None:
        """Step-through: hold the frame of the step released at ``gate`` until it is answered."""
        self.round.hold = gate
        self.host.following = False

    def ask_held(self) -> None:
        """A live batch was absorbed: once the held step has ended on every rank (or the run has
        ended), ask its question (if it ran a collective) before it is shown, else show it and
        follow again."""
        hold, log = self.round.hold, self.host.event_log
        if hold is None or not (log.ended_on_every_rank(hold) or log.run_end is not None):
            return
        ends = log.step_ends
        target = ends[hold] if hold < len(ends) else len(log)
        self.round.hold = None
        if not self.ask(target):
            self.move(self.host.mode.follow_cursor(log))  # follow again: it may already be the next gate's wait
