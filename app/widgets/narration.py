"""The narration pane: a teacher's notes for the current phase first, then the step's verdict (a
failed check, a lone check, or how many passed: seen without scrolling in a short pane), then the
scenario's text, then the passing checks one by one where they were counted."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from rich.text import Text

from collviz.runtime.wire.protocol import NOTE_MARK, Check

from ..model.panes import NarrationFields
from .text_pane import TextPane

__all__ = ["NarrationPane", "narration_text", "LISTED_FIRST"]

LISTED_FIRST = 2
"""Passing checks listed one by one above the explanation; more are counted there (one line) and
listed after it, so a 64-rank step's checks do not push its explanation out of the pane."""


def narration_text(narration: str, checks: Sequence[Check] = ()) -> Text:
    """The phase's narration with the teacher's notes (after :data:`NOTE_MARK`) pinned on top, in
    bold, so a class sees the teacher's question before the scenario's explanation; the step's
    ``checks`` between the notes and the explanation (see the module's docstring)."""
    scenario, *notes = narration.split(f"\n\n{NOTE_MARK}")
    text = Text()
    for note in notes:
        text.append(NOTE_MARK.strip(), "bold reverse")
        text.append(f" {note.strip()}\n\n", "bold")
    failed = [check for check in checks if not check.ok]
    passed = [check for check in checks if check.ok]
    counted = len(passed) > LISTED_FIRST
    verdict = _checks_text(failed if counted else [*failed, *passed])
    if counted:
        verdict.append("\n" if verdict else "")
        verdict.append(f"✓ {len(passed)} checks pass (listed below)", "green")
    if verdict:
        text.append_text(verdict)
        text.append("\n\n")
    text.append(scenario)
    if counted:
        text.append("\n\n")
        text.append_text(_checks_text(passed))
    return text


def _checks_text(checks: Sequence[Check]) -> Text:
    """One line a check: ``✓ r0 NAME detail`` (a failed one ``✗``, in red)."""
    text = Text()
    for check in checks:
        mark, style = ("✓", "green") if check.ok else ("✗", "bold red")
        if text:
            text.append("\n")
        text.append(f"{mark} r{check.rank} {check.name}", style)
        if check.detail:
            text.append(f" {check.detail}", "dim")
    return text


_CHECK_DRAWN = attrgetter("ok", "rank", "name", "detail")
"""What a check's line is drawn from: not its number or time, which differ from step to step."""


class NarrationPane(TextPane):
    """What just happened, in words, under the phase's name (ctrl+↑/↓ scroll it); a failed or
    stalled run's whole reason first."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._drawn: tuple[object, ...] | None = None

    def show(self, fields: NarrationFields) -> None:
        """Render the narration and checks of the step shown; the text is built only where it
        would differ from the one shown (a run's steps repeat their narration and checks)."""
        self.set_title(fields.phase_name or "narration")
        if not fields.started:
            self._drawn = None
            self.show_text(Text("waiting for the run to start…", "dim"))
            return
        failure = fields.state.text if fields.state.kind in ("failed", "stalled") else None
        drawn = (failure, fields.narration, tuple(map(_CHECK_DRAWN, fields.checks)))
        if drawn == self._drawn:
            return
        self._drawn = drawn
        text = Text()
        if failure is not None:  # the whole reason, which the header's line cuts
            text.append(f"{failure}\n\n", "bold red")
        text.append_text(narration_text(fields.narration or "", fields.checks))
        self.show_text(text)
