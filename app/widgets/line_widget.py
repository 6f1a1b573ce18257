"""Base of the widgets drawn straight from lines of segments, repainting only changed lines."""

from __future__ import annotations

from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from .render import Line, lines_to_strips

__all__ = ["LineWidget"]


class LineWidget(Widget):
    """A line-API widget: subclasses say what to draw in :meth:`build_lines`.

    After the state that :meth:`build_lines` reads has changed, call :meth:`lines_changed`: the
    lines are rebuilt and only those that differ are repainted. With every rank's panel changing
    at 30 frames per second this is what keeps a full screen within a frame's budget (laying out
    text, or repainting unchanged lines, costs several times more).
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._strips: list[Strip] | None = None
        self._strips_size = (0, 0)

    def build_lines(self, width: int, height: int) -> list[Line]:
        """The lines to draw in a content area of ``width`` × ``height`` cells."""
        raise NotImplementedError

    def lines_changed(self, *, layout: bool = False) -> None:
        """Rebuild the lines and repaint those that differ (everything, with a new ``layout``)."""
        width, height = self.content_size
        old = self._strips
        if layout or not width or old is None or self._strips_size != (width, height):
            self._strips = None
            self.refresh(layout=layout)
            return
        new = self._build_strips(width, height)
        self._strips = new
        changed = [y for y in range(max(len(old), len(new))) if y >= len(old) or y >= len(new) or old[y] != new[y]]
        if changed:
            self.refresh(*(Region(0, y, width, 1) for y in changed))

    def _build_strips(self, width: int, height: int) -> list[Strip]:
        self._strips_size = (width, height)
        return lines_to_strips(self.build_lines(width, height), width, self.visual_style.rich_style)

    def render_line(self, y: int) -> Strip:
        """Line ``y`` of the content, from strips rebuilt only when needed."""
        width, height = self.content_size
        if self._strips is None or self._strips_size != (width, height):
            self._strips = self._build_strips(width, height)
        if y < len(self._strips):
            return self._strips[y]
        return Strip.blank(width, self.visual_style.rich_style)

    def on_resize(self) -> None:
        """Rebuild at the new size."""
        self._strips = None
