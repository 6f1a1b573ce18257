"""Predict, then reveal: quiz questions made from a run's own events, and their grading.

At each step that ran a collective, the question is what one rank's buffer holds afterwards: its
values, or which ranks' data each element holds (its provenance). The answer is what that rank
really reported after the call — nothing here knows what a collective "should" produce. Pure
functions of the event list, so a recorded trace quizzes exactly as its live run would.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from collviz.runtime.wire.protocol import AnyEvent, Buffer, Collective, Phase

__all__ = ["Question", "Grade", "Score", "QuizRound", "questions", "grade", "expand_provenance"]


@dataclass(frozen=True)
class Question:
    """What rank ``rank``'s ``buffer`` holds after step ``step`` (0-based phase) ran ``op``."""

    step: int
    op: str
    rank: int
    buffer: str
    shape: tuple[int, ...]
    values: tuple[float, ...]
    """The values the rank reported after the call."""
    provenance: tuple[frozenset[int], ...]
    """Per element, the ranks whose data it holds (observed); empty where none was observed."""

    @property
    def text(self) -> str:
        """The question as the screen asks it."""
        size = "×".join(map(str, self.shape)) or "1"
        return (f"Step {self.step + 1}: {self.op}. What does rank {self.rank}'s {self.buffer} [{size}] hold "
                f"afterwards? Type its {len(self.values)} values, or start with 'who:' and give, element by "
                f"element, the ranks whose data it holds (e.g. who: 0+1, 2, 3).")


@dataclass(frozen=True)
class Grade:
    """How a prediction compares with the run: one mark per element."""

    question: Question
    kind: str
    """``values`` or ``who``."""
    predicted: tuple[str, ...]
    right: tuple[bool, ...]

    @property
    def all_right(self) -> bool:
        """Every element predicted right."""
        return bool(self.right) and all(self.right)


@dataclass
class Score:
    """The tally of a run of quizzes."""

    grades: list[Grade] = field(default_factory=list)

    def add(self, graded: Grade) -> None:
        """Count one answered question."""
        self.grades.append(graded)

    @property
    def text(self) -> str:
        """``3 of 4 questions right (29 of 32 elements)``."""
        elements = sum(len(g.right) for g in self.grades)
        right = sum(sum(g.right) for g in self.grades)
        return (f"{sum(g.all_right for g in self.grades)} of {len(self.grades)} questions right "
                f"({right} of {elements} elements)")



@dataclass
class QuizRound:
    """One viewer's quizzes: the steps already asked, the score, and in a live step-through run the
    released step whose frame waits for its question (``hold``; None: none waits)."""

    score: Score = field(default_factory=Score)
    asked: set[int] = field(default_factory=set)
    hold: int | None = None

    def ask(self, events: Sequence[AnyEvent], step: int) -> Question | None:
        """The question of ``step`` if it has one not asked yet (from now on it counts as asked)."""
        if step in self.asked:
            return None
        question = next((q for q in questions(events) if q.step == step), None)
        if question is not None:
            self.asked.add(step)
        return question

    def over(self, events: Sequence[AnyEvent]) -> bool:
        """Whether every question the run has so far was asked."""
        return all(q.step in self.asked for q in questions(events))


def expand_provenance(buffer: Buffer) -> tuple[frozenset[int], ...]:
    """Per element of ``buffer``, the ranks its provenance runs name (empty where not observed)."""
    count = math.prod(buffer.shape) if buffer.shape else 1
    ranks: list[frozenset[int]] = [frozenset()] * count
    for run in buffer.provenance or ():
        for i in range(run.start, min(run.start + run.length, count)):
            ranks[i] = frozenset(run.ranks)
    return tuple(ranks)


def questions(events: Sequence[AnyEvent], rank: int = 0) -> list[Question]:
    """One question per step in which a collective ran and ``rank`` reported a buffer after it
    (with values: large tensors reported as summaries are not asked about)."""
    collective_ops: dict[int, str] = {}
    after: dict[int, Buffer] = {}
    names: dict[int, str] = {}
    for event in events:
        if isinstance(event, Phase) and event.edge == "begin":
            names.setdefault(event.index, event.name)
        elif isinstance(event, Collective) and event.edge == "begin":
            collective_ops.setdefault(event.phase, event.op)
        elif (isinstance(event, Buffer) and event.rank == rank and event.moment == "after"
              and event.values is not None and event.phase not in after):
            after[event.phase] = event
    found = []
    for step in sorted(set(collective_ops) & set(after)):
        buffer = after[step]
        found.append(Question(step, collective_ops[step], rank, buffer.name, tuple(buffer.shape),
                              tuple(float(v) for v in buffer.values), expand_provenance(buffer)))
    return found


_RANKS = re.compile(r"r?(\d+)")


def grade(question: Question, prediction: str) -> Grade:
    """Mark ``prediction``: values (within the precision the screen shows them: 3 significant
    digits) or, after ``who:``, rank sets like ``0+1`` or ``r0+r1`` per element."""
    text = prediction.strip()
    if text.lower().startswith("who:"):
        parts = tuple(p.strip() for p in re.split(r"[,;]", text[4:]) if p.strip())
        sets = [frozenset(int(m) for m in _RANKS.findall(p)) for p in parts]
        right = tuple(i < len(sets) and sets[i] == actual for i, actual in enumerate(question.provenance))
        return Grade(question, "who", parts, right)
    parts = tuple(p for p in re.split(r"[\s,;]+", text) if p)
    right = tuple(i < len(parts) and _close(parts[i], actual) for i, actual in enumerate(question.values))
    return Grade(question, "values", parts, right)


def _close(text: str, actual: float) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    return math.isclose(value, actual, rel_tol=5e-3, abs_tol=5e-4)
