"""The g dialog: ask for a step number and return it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

__all__ = ["SeekScreen"]


class SeekScreen(ModalScreen[int | None]):
    """Dismisses with the step number typed (1-based), or ``None`` when cancelled."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, step_count: int) -> None:
        super().__init__()
        self.step_count = step_count

    def compose(self) -> ComposeResult:
        """A label and an integer input."""
        with Vertical(id="seek-box"):
            yield Label(f"go to step (1–{self.step_count}):")
            yield Input(placeholder="step number", type="integer", id="seek-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Return the number typed, if any."""
        event.stop()
        value = event.value.strip()
        self.dismiss(int(value) if value.lstrip("-").isdigit() else None)

    def action_cancel(self) -> None:
        """Close without seeking."""
        self.dismiss(None)
