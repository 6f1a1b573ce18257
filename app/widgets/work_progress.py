"""A progress line for long work in the viewer: opening a large trace, a bench sweep, a compare."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label, ProgressBar

__all__ = ["WorkProgress"]


class WorkProgress(Horizontal):
    """What is in progress and how far it has come: a label and Textual's ProgressBar.

    Hidden until :meth:`show` is called; :meth:`hide` when the work is done. The label is plain
    text (it may hold a path or a scenario name from a run, never markup).
    """

    DEFAULT_CSS = """
    WorkProgress {
        display: none;
        height: 1;
        padding: 0 1;
    }
    WorkProgress.-active { display: block; }
    WorkProgress Label { width: auto; margin-right: 2; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._label = ""

    def compose(self) -> ComposeResult:
        """A label, then the bar (with percentage and ETA)."""
        yield Label(id="work-label")
        yield ProgressBar(id="work-bar", show_eta=True)

    def show(self, label: str, done: float, total: float) -> None:
        """Show ``label`` and ``done`` of ``total`` steps (the label is laid out again only when
        it changes: a trace opening reports ten times a second, and a new layout repaints the
        whole screen while the reader needs the processor)."""
        self.add_class("-active")
        if label != self._label:
            self._label = label
            self.query_one("#work-label", Label).update(Text(label))
        self.query_one("#work-bar", ProgressBar).update(total=max(total, 1), progress=done)

    def hide(self) -> None:
        """The work is done: take the line away."""
        self.remove_class("-active")
        self._label = ""
