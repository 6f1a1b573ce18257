"""A small dialog that asks for one whole number (g: a call, or a step after ``s``; r: a rank) and
returns what was typed."""

from __future__ import annotations

import re

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

__all__ = ["NumberPrompt"]


class NumberPrompt(ModalScreen[str | None]):
    """Dismisses with what was typed (a number, after one of ``prefixes`` if given), or ``None``
    when cancelled (or nothing was typed); the input takes nothing else."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, question: str, placeholder: str, prefixes: str = "") -> None:
        """``question`` labels the input (e.g. ``open rank (0–3):``); ``placeholder`` fills it empty;
        ``prefixes``: characters one of which may come before the number (``s#``)."""
        super().__init__()
        self.question = question
        self.placeholder = placeholder
        self.prefixes = prefixes

    def compose(self) -> ComposeResult:
        """A label and an integer input."""
        with Vertical(id="number-box"):
            yield Label(self.question)
            prefix = f"[{re.escape(self.prefixes)}]?" if self.prefixes else ""
            yield Input(placeholder=self.placeholder, restrict=f"{prefix}[0-9]*", id="number-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Return what was typed, if it holds a number."""
        event.stop()
        value = event.value.strip()
        self.dismiss(value if value.lstrip(self.prefixes).isdigit() else None)

    def action_cancel(self) -> None:
        """Close without an answer."""
        self.dismiss(None)
