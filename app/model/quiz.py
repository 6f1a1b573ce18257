"""Predict, then reveal: quiz questions made from a run's own events, and their grading.

At each step that ran a collective, the question is what one rank's buffer holds afterwards: its
values, or which ranks' data each element holds (its provenance). A buffer too large to type
(a training step's gathered weight, a gradient shard) is asked about one part of it: whose data
does row 17 of the gathered W_query hold? The answer is what that rank really reported after the
call — nothing here knows what a collective "should" produce. A step with nothing to ask says why
(:func:`nothing_to_ask`). Pure functions of the event list, so a recorded trace quizzes exactly as
its live run would.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from collviz.runtime.wire.protocol import Buffer

from .log import EventLog

__all__ = ["Question", "Grade", "Score", "QuizRound", "questions", "grade", "expand_provenance", "nothing_to_ask",
           "TYPED_ELEMENTS"]

TYPED_ELEMENTS = 16
"""The most elements a question asks to type (values, or ranks element by element); a larger
buffer is asked about one part of it, by provenance only."""


@dataclass(frozen=True)
class Question:
    """What rank ``rank``'s ``buffer`` holds after step ``step`` (0-based phase) ran ``op``."""

    step: int
    op: str
    rank: int
    buffer: str
    shape: tuple[int, ...]
    values: tuple[float, ...]
    """The values the rank reported after the call (empty for a question about a part)."""
    provenance: tuple[frozenset[int], ...]
    """Per element asked about, the ranks whose data it holds (observed); empty where none was."""
    part: str = ""
    """The part of the buffer asked about (``row 17``, ``elements 512–1023``); empty: all of it."""

    @property
    def text(self) -> str:
        """The question as the screen asks it."""
        size = "×".join(map(str, self.shape)) or "1"
        if self.part:
            return (f"Step {self.step + 1}: {self.op}. Whose data does {self.part} of rank {self.rank}'s "
                    f"{self.buffer} [{size}] hold afterwards? Type 'who:' and the ranks (e.g. who: 1, or "
                    f"who: 0+1+2+3 for a sum of theirs).")
        count = len(self.values)
        return (f"Step {self.step + 1}: {self.op}. What does rank {self.rank}'s {self.buffer} [{size}] hold "
                f"afterwards? Type its {count} value{'s' if count != 1 else ''}, or start with 'who:' and give, "
                f"element by element, the ranks whose data it holds (e.g. who: 0+1, 2, 3).")


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

    def ask(self, log: EventLog, step: int) -> Question | None:
        """The question of ``step`` if it has one not asked yet (from now on it counts as asked)."""
        if step in self.asked:
            return None
        question = next((q for q in questions(log, steps=(step,)) if q.step == step), None)
        if question is not None:
            self.asked.add(step)
        return question

    def over(self, log: EventLog) -> bool:
        """Whether every question the run has so far was asked."""
        return all(q.step in self.asked for q in questions(log))


def expand_provenance(buffer: Buffer) -> tuple[frozenset[int], ...]:
    """Per element of ``buffer``, the ranks its provenance runs name (empty where not observed)."""
    count = math.prod(buffer.shape) if buffer.shape else 1
    ranks: list[frozenset[int]] = [frozenset()] * count
    for run in buffer.provenance or ():
        for i in range(run.start, min(run.start + run.length, count)):
            ranks[i] = frozenset(run.ranks)
    return tuple(ranks)


def _part(buffer: Buffer, ranks: tuple[frozenset[int], ...]) -> tuple[str, range] | None:
    """The part of a large buffer to ask about: the row (2-D) or the element run (1-D) where the
    second rank's data begins, one row or element in (the first rank's part is often the asked
    rank's own); None when its provenance is uniform or not observed."""
    if not any(ranks) or len(set(ranks)) < 1:
        return None
    changes = [i for i in range(1, len(ranks)) if ranks[i] != ranks[i - 1]]
    at = changes[0] if changes else len(ranks) // 2
    if len(buffer.shape) == 2 and buffer.shape[1]:
        width = buffer.shape[1]
        row = min(at // width + 1, buffer.shape[0] - 1)
        return f"row {row}", range(row * width, (row + 1) * width)
    end = next((i for i in changes if i > at), len(ranks))
    return f"elements {at}–{end - 1}", range(at, end)


def _question(step: int, op: str, buffer: Buffer) -> Question | None:
    """The question about ``buffer`` (one rank's, after the step's collective), or None."""
    ranks = expand_provenance(buffer)
    if buffer.values is not None and len(buffer.values) <= TYPED_ELEMENTS:
        return Question(step, op, buffer.rank, buffer.name, tuple(buffer.shape),
                        tuple(float(v) for v in buffer.values), ranks)
    part = _part(buffer, ranks) if buffer.provenance else None
    if part is None:
        return None
    name, elements = part
    return Question(step, op, buffer.rank, buffer.name, tuple(buffer.shape), (),
                    tuple(ranks[i] for i in elements), name)


def _collective_steps(log: EventLog, rank: int, steps: Sequence[int] | None = None
                      ) -> tuple[dict[int, str], dict[int, list[Buffer]]]:
    """The op of each step (of ``steps``, or all) whose collective call ended on some rank, and
    ``rank``'s after-buffers of those steps in log order. Read from the log's indexes: only the
    events asked about are decoded (a trace opened whole keeps its events in the file)."""
    ops = {number: phase.collectives.events[0].op for number, phase in log.phases.items()
           if phase.collectives.index and (steps is None or number in steps)}
    found: list[tuple[int, Buffer]] = []
    index = log.ranks.get(rank)
    for series in index.buffers.values() if index is not None and ops else ():
        events = series.events
        for at, (position, phase) in enumerate(zip(series.index, series.phase)):
            if phase in ops:
                event = events[at]
                if isinstance(event, Buffer) and event.moment == "after":
                    found.append((position, event))
    after: dict[int, list[Buffer]] = {}
    for _, buffer in sorted(found, key=lambda entry: entry[0]):
        after.setdefault(buffer.phase, []).append(buffer)
    return ops, after


def questions(log: EventLog, rank: int = 0, steps: Sequence[int] | None = None) -> list[Question]:
    """One question per step (of ``steps``, or all) in which a collective ran and ``rank``
    reported a buffer after it: its first such buffer small enough to type, else its first whose
    provenance was observed (asked about one part)."""
    ops, after = _collective_steps(log, rank, steps)
    found = []
    for step in sorted(set(ops) & set(after)):
        asked = [q for q in (_question(step, ops[step], b) for b in after[step]) if q is not None]
        typed = [q for q in asked if not q.part]
        if typed or asked:
            found.append((typed or asked)[0])
    return found


def nothing_to_ask(log: EventLog, step: int, rank: int = 0) -> str:
    """Why step ``step`` has no question for ``rank``'s buffers, in one line."""
    ops, after = _collective_steps(log, rank, (step,))
    if step not in ops:
        return f"step {step + 1} ran no collective: nothing to predict"
    if step not in after:
        return f"step {step + 1}'s {ops[step]}: rank {rank} showed no buffer after it"
    return f"step {step + 1}'s {ops[step]}: rank {rank}'s buffers after it are not observed element by element"


_RANKS = re.compile(r"r?(\d+)")


def grade(question: Question, prediction: str) -> Grade:
    """Mark ``prediction``: values (within the precision the screen shows them: 3 significant
    digits) or, after ``who:``, rank sets like ``0+1`` or ``r0+r1`` per element."""
    text = prediction.strip()
    if text.lower().startswith("who:") or question.part:
        body = text[4:] if text.lower().startswith("who:") else text
        parts = tuple(p.strip() for p in re.split(r"[,;]", body) if p.strip())
        sets = [frozenset(int(m) for m in _RANKS.findall(p)) for p in parts]
        if question.part and len(sets) == 1:  # one answer for the whole part
            sets = sets * len(question.provenance)
            parts = parts * len(question.provenance)
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
