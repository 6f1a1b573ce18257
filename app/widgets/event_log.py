"""The raw event log pane (toggleable): the events just before the cursor."""

from __future__ import annotations

from rich.text import Text

from collviz.runtime.wire.protocol import LAUNCHER_RANK, AnyEvent

from ..model.panes import EventTailFields
from .text_pane import TextPane

__all__ = ["EventLogPane", "describe"]

_SKIP = frozenset({"run", "rank", "seq", "t_ns", "values", "summary", "provenance", "narration"})


def describe(event: AnyEvent) -> str:
    """One line for an event: its type and the fields worth reading (no times, no payloads)."""
    fields = []
    for name in event.__struct_fields__:
        if name in _SKIP:
            continue
        value = getattr(event, name)
        if value in (None, "", [], {}):
            continue
        fields.append(f"{name}={value}")
    return f"{type(event).__name__} " + " ".join(fields)


class EventLogPane(TextPane):
    """The last events before the cursor, newest last, as many as fit."""

    def show(self, fields: EventTailFields) -> None:
        """Render the events before the cursor."""
        lines = max(1, self.size.height or 8)
        first = fields.cursor - len(fields.tail)
        text = Text(no_wrap=True, overflow="ellipsis")
        shown = fields.tail[-lines:]
        for offset, event in enumerate(shown, start=first + len(fields.tail) - len(shown)):
            who = "launch" if event.rank == LAUNCHER_RANK else f"r{event.rank}"
            text.append(f"{offset:>7} {who:>6} ", "dim")
            text.append(describe(event) + "\n")
        self.set_title(f"events · {fields.cursor}/{fields.length}")
        self.show_text(text)
