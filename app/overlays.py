"""The viewer's dialogs and overlays: the actions that open a screen over the frame (go to a call or step,
open a rank, a rank's detail, the bus factor, help) or save it (screenshot).

:class:`OverlayActions` is mixed into :class:`~collviz.app.app.CollvizApp`; it only asks the app
for the view and the log and pushes screens, so what the frame shows stays in ``app``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from collviz.runtime.errors import UsageError
from collviz.runtime.wire.files import write_output

from .mixin_base import AppMixin
from .model import EventLog, ViewState, call_range, seek_call, seek_step
from .navigator import Navigator
from .screens import FactorScreen, HelpScreen, NumberPrompt, RankDetailScreen

__all__ = ["OverlayActions"]


class OverlayActions(AppMixin):
    """The app's actions that open a dialog or a screen over the frame (see the module)."""

    event_log: EventLog
    mask_volatile: bool
    screenshot_dir: Path
    navigator: Navigator

    if TYPE_CHECKING:  # what the app provides

        def current_view(self) -> ViewState: ...

    def action_seek(self) -> None:
        """Ask for a call number (or ``s`` and a step number) and go there."""
        calls = call_range(self.event_log)
        call = f"call #({calls[0]}–{calls[1]})" if calls else "call #"
        question = f"go to {call}, or s + step (s1–s{max(self.event_log.phase_count, 1)}):"

        def seek(typed: str | None) -> None:
            """Go to the call or step typed (nothing when the dialog was cancelled)."""
            if typed is None:
                return
            if typed[0] in "sS":
                self.action_seek_to(int(typed[1:]))
            else:
                self.action_seek_call(int(typed.lstrip("#")))

        self.push_screen(NumberPrompt(question, "call number, or s and a step", prefixes="sS#"), seek)

    def action_seek_to(self, number: int) -> None:
        """Go to the end of step ``number`` (1-based)."""
        self.navigator.move(seek_step(self.event_log, number))

    def action_seek_call(self, number: int) -> None:
        """Go to the end of the step that ran call #``number``, naming its group where several
        groups have a call of that number; or say in one line that the run has no such call."""
        found = seek_call(self.event_log, number)
        if found is None:
            calls = call_range(self.event_log)
            have = f"its calls are #{calls[0]}–#{calls[1]}" if calls else "it has no collective call yet"
            self.notify(f"no call #{number} in this run: {have}", timeout=4, markup=False)
            return
        cursor, groups = found
        self.navigator.move(cursor)
        if len(groups) > 1:
            self.notify(f"call #{number} on {groups[0]} (also on {', '.join(groups[1:])})", timeout=4, markup=False)

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """Write an SVG of the current frame by the outputs' rule (:func:`write_output`: renamed over
        a new or regular file, written through a device, FIFO or link) and say where, or why not.
        ``filename`` and ``path`` (Textual's own parameters of this action) override the name made
        from the scenario, step and time, and the screenshot folder."""
        scenario = self.event_log.run_start.scenario if self.event_log.run_start else "collviz"
        name = filename or f"collviz-{scenario}-step{self.current_view().step + 1}-{time.strftime('%Y%m%dT%H%M%S')}.svg"
        path_to = (Path(path) if path else self.screenshot_dir).expanduser() / name
        try:
            write_output(path_to, [self.export_screenshot().encode()], "screenshot")
        except UsageError as exc:
            self.notify(str(exc), title="screenshot not saved", severity="error", markup=False)
            return
        self.notify(f"screenshot saved to {path_to}", title="screenshot", markup=False)

    def action_open_rank(self) -> None:
        """Ask for a rank number and open its detail (any rank; the digit keys reach 0–9)."""
        ranks = len(self.current_view().ranks)

        def open_rank(typed: str | None) -> None:
            """Open the rank typed, or say which ranks exist."""
            if typed is None:
                return
            number = int(typed)
            if 0 <= number < ranks:
                self.action_detail(number)
            else:
                self.notify(f"no rank {number}: this run has ranks 0–{ranks - 1}", timeout=3)

        if ranks:
            self.push_screen(NumberPrompt(f"open rank (0–{ranks - 1}):", "rank number"), open_rank)

    def action_detail(self, rank: int) -> None:
        """Open rank ``rank``'s detail (digit keys; beyond the world size, nothing happens)."""
        view = self.current_view()
        if rank < len(view.ranks):
            self.push_screen(RankDetailScreen(rank, view, mask_volatile=self.mask_volatile))

    def action_factor(self) -> None:
        """Explain the bus factor of the step's latest collective call (or say there is none)."""
        costs = self.current_view().costs
        if not costs:
            self.notify("this step ran no collective: no bus factor to explain", timeout=3)
            return
        self.push_screen(FactorScreen(costs[-1]))

    def action_help(self) -> None:
        """Show every key and what it does."""
        self.push_screen(HelpScreen())
