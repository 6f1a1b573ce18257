"""Predict, then reveal: the quiz question of one step, the prediction typed, the marks shown.

The screen sits at the bottom, so the rank panels behind it keep showing the inputs (the view is
at the step's gate). Enter grades the prediction and posts :class:`QuizScreen.Answered`, on which
the app reveals the step (moves the cursor past it); the marks are then shown element by element,
and Enter again closes the screen with the grade. Escape skips the question.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from ..model.quiz import Grade, Question, grade
from ..widgets.render import format_values

__all__ = ["QuizScreen", "marks_text"]


WRONG_LISTED = 16
"""Wrong elements listed one by one; beyond, only counted."""


def marks_text(graded: Grade) -> Text:
    """The tally (``✓ 62 of 64 right``), then only the elements predicted wrong: the prediction
    and what the run reported, written as the rank panels write it (a float result keeps its
    ``.0``)."""
    question = graded.question
    right, total = sum(graded.right), len(graded.right)
    text = Text()
    text.append("✓ " if right == total else "✗ ", style="bold green" if right == total else "bold red")
    text.append(f"all {total} right" if right == total and total > 1 else f"{right} of {total} right", style="bold")
    actual = (format_values(question.values) if graded.kind == "values"
              else ["+".join(f"r{r}" for r in sorted(s)) or "none" for s in question.provenance])
    wrong = [i for i, ok in enumerate(graded.right) if not ok]
    for i in wrong[:WRONG_LISTED]:
        said = graded.predicted[i] if i < len(graded.predicted) else "—"
        text.append("\n✗ ", style="bold red")
        text.append(f"[{i}] you: {said}   the run: {actual[i]}")
    if len(wrong) > WRONG_LISTED:
        text.append(f"\n… and {len(wrong) - WRONG_LISTED} more wrong", style="dim")
    return text


class QuizScreen(ModalScreen[Grade | None]):
    """Ask ``question``; dismiss with its :class:`Grade` (None when skipped)."""

    BINDINGS = [("escape", "skip", "skip the question")]
    DEFAULT_CSS = """
    QuizScreen { align: center bottom; background: $background 0%; }
    #quiz-box { width: 100%; height: auto; max-height: 60%; border: thick $accent; background: $surface;
                padding: 0 1; }
    #quiz-marks { height: auto; max-height: 20; overflow-y: auto; }
    """

    class Answered(Message):
        """The prediction was graded: time to reveal the step behind the screen."""

        def __init__(self, graded: Grade) -> None:
            super().__init__()
            self.grade = graded

    def __init__(self, question: Question) -> None:
        super().__init__()
        self.question = question
        self.graded: Grade | None = None

    def compose(self) -> ComposeResult:
        """The question, the prediction's input, and (after Enter) the marks."""
        with Vertical(id="quiz-box"):
            yield Static(Text(self.question.text), id="quiz-question")
            yield Input(placeholder="your prediction, then Enter (Escape skips)", id="quiz-input")
            yield Static(id="quiz-marks")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """First Enter: grade and reveal; second Enter: close with the grade."""
        if self.graded is not None:
            self.dismiss(self.graded)
            return
        self.graded = grade(self.question, event.value)
        self.query_one("#quiz-marks", Static).update(marks_text(self.graded))
        self.query_one("#quiz-input", Input).placeholder = "Enter: continue"
        self.query_one("#quiz-input", Input).value = ""
        self.post_message(self.Answered(self.graded))

    def action_skip(self) -> None:
        """Close without grading."""
        self.dismiss(self.graded)
