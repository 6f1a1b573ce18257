"""The viewer's frames: drawn now, or at most :data:`FRAME_RATE` a second however fast events arrive.

A frame is the view at the cursor and the header's words, handed to every screen on the stack that
shows the view (a ``show_view(view, labels)`` method: the viewer, an open rank's detail).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from textual.timer import Timer

from .model import Labels, ViewState, paused_collector

__all__ = ["FRAME_RATE", "FrameHost", "FramePacer"]

FRAME_RATE = 40.0
"""Most frames per second the app renders, however fast events arrive."""


class FrameHost(Protocol):
    """What the frames use of the app."""

    @property
    def screen_stack(self) -> Sequence[Any]:
        """The screens open, bottom first."""

    def current_view(self) -> ViewState:
        """The view at the cursor."""

    def labels(self) -> Labels:
        """The header's words."""

    def set_timer(self, delay: float, callback: Callable[[], Any]) -> Timer:
        """Call ``callback`` once, ``delay`` seconds from now."""


class FramePacer:
    """Draws the app's frames; ``count`` says how many it has drawn."""

    def __init__(self, host: FrameHost) -> None:
        self.host = host
        self.count = 0
        self._last = 0.0
        self._timer: Timer | None = None

    def now(self) -> None:
        """Render a frame now on every screen that shows the view, the cyclic collector paused
        until it is built (:func:`~.model.paused_collector` says why)."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._last = time.monotonic()
        self.count += 1
        with paused_collector():
            view, labels = self.host.current_view(), self.host.labels()
            for screen in self.host.screen_stack:
                show = getattr(screen, "show_view", None)
                if show is not None:
                    show(view, labels)

    def request(self) -> None:
        """Render now if the frame interval has passed, else make sure a frame follows when it has."""
        wait = self._last + 1.0 / FRAME_RATE - time.monotonic()
        if wait <= 0:
            self.now()  # inline: a flood of messages can starve timers
        elif self._timer is None:
            self._timer = self.host.set_timer(wait, self.now)  # the trailing frame

