"""The narration pane: a teacher's notes for the current phase first, then the scenario's text,
then the run's own checks."""

from __future__ import annotations

from rich.text import Text

from collviz.runtime.wire.protocol import NOTE_MARK

from ..model.panes import NarrationFields
from .text_pane import TextPane

__all__ = ["NarrationPane", "narration_text"]


def narration_text(narration: str) -> Text:
    """The phase's narration with the teacher's notes (after :data:`NOTE_MARK`) pinned on top, in
    bold, so a class sees the teacher's question before the scenario's explanation."""
    scenario, *notes = narration.split(f"\n\n{NOTE_MARK}")
    text = Text()
    for note in notes:
        text.append(NOTE_MARK.strip(), "bold reverse")
        text.append(f" {note.strip()}\n\n", "bold")
    text.append(scenario)
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
        text.append_text(narration_text(fields.narration or ""))
        for check in fields.checks:
            mark, style = ("✓", "green") if check.ok else ("✗", "bold red")
            text.append(f"\n{mark} r{check.rank} {check.name}", style)
            if check.detail:
                text.append(f" {check.detail}", "dim")
        self.show_text(text)
