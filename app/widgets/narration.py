"""The narration pane: the scenario's text for the current phase, and the run's own checks."""

from __future__ import annotations

from rich.text import Text

from ..model import ViewState
from .text_pane import TextPane

__all__ = ["NarrationPane"]


class NarrationPane(TextPane):
    """What just happened, in words, under the phase's name."""

    def show(self, view: ViewState) -> None:
        """Render the narration and checks of ``view``'s step."""
        self.set_title(view.phase_name or "narration")
        if view.run is None:
            self.show_text(Text("waiting for the run to start…", "dim"))
            return
        text = Text(view.narration or "")
        for check in view.checks:
            mark, style = ("✓", "green") if check.ok else ("✗", "bold red")
            text.append(f"\n{mark} r{check.rank} {check.name}", style)
            if check.detail:
                text.append(f" {check.detail}", "dim")
        self.show_text(text)
        self.hint_overflow()
