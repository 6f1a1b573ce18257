"""The viewer's dialogs and overlays: the actions that open a screen over the frame (go to step,
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
from .model import EventLog, ViewState, seek_step
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
        """Ask for a step number and go there."""

        def seek(number: int | None) -> None:
            """Go to the step typed (nothing when the dialog was cancelled)."""
            if number is not None:
                self.action_seek_to(number)

        self.push_screen(NumberPrompt(f"go to step (1–{max(self.event_log.phase_count, 1)}):", "step number"), seek)

    def action_seek_to(self, number: int) -> None:
        """Go to the end of step ``number`` (1-based)."""
        self.navigator.move(seek_step(self.event_log, number))

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

        def open_rank(number: int | None) -> None:
            """Open the rank typed, or say which ranks exist."""
            if number is None:
                return
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
