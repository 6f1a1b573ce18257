"""The header: what runs where, the step, the run state and the replay controls."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text

from ..model import Labels
from ..model.panes import HeaderFields
from .render import fit_words
from .text_pane import TextPane

__all__ = ["RunHeader", "viewer_status"]

_STATE_STYLES = {
    "empty": "dim",
    "starting": "yellow",
    "running": "bold green",
    "waiting": "bold yellow",
    "stalled": "bold red",
    "finished": "bold cyan",
    "failed": "bold red",
    "interrupted": "bold magenta",
}


_UNREMARKABLE = frozenset({"empty", "starting", "running"})
"""Run states a header showing history does not repeat (the playback's words say enough)."""

_ENDED = frozenset({"finished", "failed", "interrupted"})
"""Run states after the run's end."""


def viewer_status(labels: Labels, state: str) -> str:
    """The header's first word, what the viewer is doing: ``replay`` (a trace), ``browsing``
    (a live run's earlier moment), ``finished`` (following a run that has ended), else ``live`` or
    ``stepping`` (following a run that goes on); ``state`` is the run's state kind at the cursor."""
    if labels.history:
        return "replay" if labels.kind == "replay" else "browsing"
    return "finished" if state in _ENDED else labels.kind


def _cut_at_a_word(text: Text, room: int) -> Text:
    """``text`` cut to ``room`` cells with "…" after its last whole word (a number keeps its unit),
    or after the last whole part where only a part's first word would be left (parts are set apart
    by three spaces: ``event…`` says nothing); unknown room (0 or less): all of it."""
    if room <= 0 or text.cell_len <= room:
        return text
    end = len(text.plain)
    while end and cell_len(text.plain[:end]) > room - 1:
        end -= 1
    if end < len(text.plain) and text.plain[end] != " ":  # mid-word: back to the word's start
        end = text.plain.rfind(" ", 0, end) + 1
    part = text.plain.rfind("   ", 0, end)
    if part > 0 and " " not in text.plain[part:end].strip():  # a part's first word alone: not it either
        end = part
    kept = text[:end]
    kept.rstrip()
    while kept.plain.endswith(("·", "(")):  # no dangling separator
        kept = kept[:-1]
        kept.rstrip()
    kept.append("…")
    return kept


class RunHeader(TextPane):
    """Two lines: scenario, backend, device, world size, mode, step k/n; run state and playback."""

    FIXED_ROWS = True
    _shown_with: tuple[HeaderFields, Labels] | None = None

    def on_resize(self) -> None:
        """A new width fits the mode's words and the phase name differently (the step counter stays)."""
        if self._shown_with is not None:
            self.show(*self._shown_with)
        super().on_resize()

    def show(self, fields: HeaderFields, labels: Labels) -> None:
        """Render the header's fields; ``labels`` are the app's own words."""
        self._shown_with = (fields, labels)
        mode, playback, history, _ = labels
        run = fields.run
        width = self.size.width  # 0: not laid out yet (a region's lookup: once)
        line = Text.assemble(("collviz ", "bold"), (run.scenario if run else "(no run yet)", "bold cyan"))
        total = max(fields.step_count, 1)
        # the log's start (home) is before the first step, so → from there visibly reaches step 1
        where = f" · before step 1/{total}" if fields.cursor == 0 else f" · step {min(fields.step + 1, total)}/{total}"
        if run is not None:  # the mode's words (a lesson's are long) give way to the step counter
            # a job read by its stacks says no backend: its device_kind is the protocol's default, not a reading
            said = f"{run.backend} on {run.device_kind}" if run.backend != "unknown" else "backend and device not read"
            place = f" · {said} · {run.world_size} ranks · "
            room = width - line.cell_len - cell_len(place) - cell_len(where)
            line.append((place + fit_words(mode, max(room, 1) if width else 0)).removesuffix(" · "))
        line.append(where, "bold")
        phase = fit_words(fields.phase_name, max(width - line.cell_len - 1, 1) if width else 0)
        if phase:
            line.append(f" {phase}", "italic")
        style = _STATE_STYLES[fields.state.kind]
        status = viewer_status(labels, fields.state.kind)
        state = Text(f" {status} ", f"bold reverse {style}" if not history else "bold reverse")
        if history:
            # a moment other than the run's present (a replay, a live run browsed back): the
            # playback's words first; the run's state at the cursor only where it says something
            state.append(f" {playback}" if playback else "", "bold")
            if fields.state.kind not in _UNREMARKABLE:
                state.append(f"   the run here: {fields.state.text}", style)
        else:
            if fields.state.text != status:  # "finished" once, not "finished · finished"
                state.append(f" {fields.state.text}", style)
            if playback:
                state.append(f"   {playback}")
        if run is not None and run.backend_reason:  # why this backend: where it fits whole (line 1 names it)
            reason = f"   {run.backend_reason}"
            if not width or state.cell_len + cell_len(reason) <= width:
                state.append(reason, "dim italic")
        self.show_text(Text("\n").join([line, _cut_at_a_word(state, width)]))
