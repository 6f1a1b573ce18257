"""A small dialog that asks for one whole number (g: a step; r: a rank) and returns it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

__all__ = ["NumberPrompt"]


class NumberPrompt(ModalScreen[int | None]):
    """Dismisses with the number typed, or ``None`` when cancelled (or nothing was typed)."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, question: str, placeholder: str) -> None:
        """``question`` labels the input (e.g. ``go to step (1–41):``); ``placeholder`` fills it empty."""
        super().__init__()
        self.question = question
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        """A label and an integer input."""
        with Vertical(id="number-box"):
            yield Label(self.question)
            yield Input(placeholder=self.placeholder, type="integer", id="number-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Return the number typed, if any."""
        event.stop()
        value = event.value.strip()
        self.dismiss(int(value) if value.lstrip("-").isdigit() else None)

    def action_cancel(self) -> None:
        """Close without an answer."""
        self.dismiss(None)
