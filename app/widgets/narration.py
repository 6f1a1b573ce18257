"""The narration pane: a teacher's notes for the current phase first, then the run's own checks
(the step's verdict, seen without scrolling in a short pane), then the scenario's text."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from collviz.runtime.wire.protocol import NOTE_MARK, Check

from ..model.panes import NarrationFields
from .text_pane import TextPane

__all__ = ["NarrationPane", "narration_text", "checks_text"]


def narration_text(narration: str, checks: Text | None = None) -> Text:
    """The phase's narration with the teacher's notes (after :data:`NOTE_MARK`) pinned on top, in
    bold, so a class sees the teacher's question before the scenario's explanation; ``checks``
    (the step's verdicts) between the notes and the explanation."""
    scenario, *notes = narration.split(f"\n\n{NOTE_MARK}")
    text = Text()
    for note in notes:
        text.append(NOTE_MARK.strip(), "bold reverse")
        text.append(f" {note.strip()}\n\n", "bold")
    if checks:
        text.append_text(checks)
        text.append("\n\n")
    text.append(scenario)
    return text


def checks_text(checks: Sequence[Check]) -> Text:
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


class NarrationPane(TextPane):
    """What just happened, in words, under the phase's name (ctrl+↑/↓ scroll it); a failed or
    stalled run's whole reason first."""

    def show(self, fields: NarrationFields) -> None:
        """Render the narration and checks of the step shown."""
        self.set_title(fields.phase_name or "narration")
        if not fields.started:
            self.show_text(Text("waiting for the run to start…", "dim"))
            return
        text = Text()
        if fields.state.kind in ("failed", "stalled"):  # the whole reason, which the header's line cuts
            text.append(f"{fields.state.text}\n\n", "bold red")
        text.append_text(narration_text(fields.narration or "", checks_text(fields.checks)))
        self.show_text(text)
