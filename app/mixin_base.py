"""The base of the app's action mixins (:mod:`.playback`, :mod:`.overlays`, :mod:`.classroom`):
Textual's ``App`` to the type checker, so a mixin's actions are checked against what the app
has, and ``object`` at run time, so the app's own class stays the one ``App`` in its bases."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.app import App

    AppMixin = App[int]
else:
    AppMixin = object

__all__ = ["AppMixin"]
