"""The viewer's teaching actions: the projector layout and its theme, a lesson's n/p/Q, the
narration's scroll.

:class:`ClassroomActions` is mixed into :class:`~collviz.app.app.CollvizApp`, as
:class:`~.overlays.OverlayActions` is; it asks the app only for its viewer screen, its options, a
frame and quitting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.theme import Theme

from .mixin_base import AppMixin
from .screens import ViewerScreen
from .theme import PROJECTOR_THEME, palette_for
from .viewer_options import ViewerOptions
from .widgets.narration import NarrationPane

__all__ = ["ClassroomActions"]


class ClassroomActions(AppMixin):
    """The app's projector, lesson and narration actions (see the module)."""

    viewer: ViewerScreen
    options: ViewerOptions

    if TYPE_CHECKING:  # what the app provides

        def render_now(self) -> None: ...

    def action_toggle_present(self) -> None:
        """Switch the projector layout (and its theme) on or off; the options keep the choice (a
        lesson's next item opens as this one was left)."""
        present = self.options.present = not self.viewer.has_class("-present")
        self.theme = PROJECTOR_THEME.name if present else "textual-dark"
        self.viewer.set_present(present)
        self.render_now()

    def watch_theme(self, theme: str) -> None:
        """Rank colours follow the theme (the projector theme's are colour-blind safe)."""
        palette_for(theme)
        if self.viewer.is_mounted:
            self.viewer.refresh_palette()
            self.render_now()

    def get_theme(self, theme_name: str) -> Theme | None:
        """Textual's lookup minus two copies of the theme registry per call (it runs per painted
        line and cost a fifth of a frame); same result, same fallback."""
        themes = getattr(self, "_registered_themes", None)
        if not isinstance(themes, dict):
            return super().get_theme(theme_name)
        for name in theme_name.split(","):
            theme = themes.get(name.strip())
            if theme is not None:
                return theme
        return None

    async def action_lesson(self, direction: int) -> None:
        """Lesson: leave this item for the next (1) or the previous (-1) one."""
        self.options.navigation = "next" if direction > 0 else "previous"
        await self.action_quit()

    async def action_end_lesson(self) -> None:
        """Lesson: end the whole lesson (q only leaves this item)."""
        self.options.navigation = "end"
        await self.action_quit()

    def action_scroll_narration(self, lines: int) -> None:
        """Scroll the narration pane by ``lines`` (down when positive)."""
        self.viewer.query_one(NarrationPane).scroll_rows(lines)
