"""The projector theme: high contrast, and rank colours that stay apart for colour-blind viewers.

Registered with Textual's theme machinery, so it is also in the command palette's theme list;
choosing it (or leaving it) switches the rank palette with it.
"""

from __future__ import annotations

from textual.theme import Theme

from .widgets.render import HIGH_CONTRAST_COLOURS, RANK_COLOURS, use_palette

__all__ = ["PROJECTOR_THEME", "palette_for"]

PROJECTOR_THEME = Theme(
    name="collviz-projector",
    primary="#56b4e9",
    secondary="#e69f00",
    accent="#f0e442",
    warning="#f0e442",
    error="#d55e00",
    success="#009e73",
    foreground="#ffffff",
    background="#000000",
    surface="#000000",
    panel="#303030",
    boost="#1c1c1c",
    dark=True,
)
"""White on black, borders and accents from the same colour-blind-safe palette as the ranks."""


def palette_for(theme_name: str) -> None:
    """Use the rank colours that go with ``theme_name``."""
    use_palette(HIGH_CONTRAST_COLOURS if theme_name == PROJECTOR_THEME.name else RANK_COLOURS)
