"""The page ``collviz serve`` gives each browser tab: textual-serve's own, with every file it needs
served by this server (a classroom's network may reach no font service, and no student's browser
should contact one), collviz's glyph font where Roboto Mono has no glyph (⏸, ✓, ◆, arrows …), a
title and an icon.

textual-serve (1.1) loads Roboto Mono from an outside font service and has no option to do
otherwise: :class:`ClassroomServer` renders collviz's copy of its page template (``serve_page/
templates``: the outside link replaced by ``@font-face`` rules for the font textual-serve ships in
its own static folder, and for ``serve_page/static/collviz-glyphs.ttf`` over
:data:`GLYPH_RANGES`), and serves ``serve_page/static`` beside textual-serve's static folder.
Imported only once textual-serve is known to be installed (the ``collviz[serve]`` extra).
"""

from __future__ import annotations

from pathlib import Path

import aiohttp_jinja2
from aiohttp import web
from textual_serve.server import Server

__all__ = ["GLYPH_RANGES", "PAGE", "STATIC_ROUTE", "ClassroomServer"]

PAGE = Path(__file__).resolve().parents[1] / "serve_page"
"""collviz's page template (``templates``) and static files (``static``)."""

STATIC_ROUTE = "/collviz-static"
"""Where the page finds collviz's own static files."""

GLYPH_RANGES = ((0x2010, 0x2015), (0x2070, 0x209F), (0x2190, 0x21FF), (0x2300, 0x23FF), (0x25A0, 0x25FF),
                (0x2600, 0x27BF))
"""The code points collviz's glyph font holds, drawn from it rather than from Roboto Mono: dashes,
super- and subscripts, arrows, technical signs (⏸), geometric shapes, symbols and dingbats
(``docs/serve_glyphs.py`` builds the font from these ranges)."""


def unicode_range() -> str:
    """:data:`GLYPH_RANGES` as a CSS ``unicode-range`` value."""
    return ", ".join(f"U+{low:04X}-{high:04X}" for low, high in GLYPH_RANGES)


class ClassroomServer(Server):
    """textual-serve's server, rendering collviz's page (see the module) for every tab."""

    def __init__(self, command: str, *, host: str, port: int, title: str) -> None:
        super().__init__(command, host=host, port=port, title=title, templates_path=PAGE / "templates")

    async def _make_app(self) -> web.Application:
        """textual-serve's application, with collviz's static files and what its page names."""
        app = await super()._make_app()
        app.router.add_static(STATIC_ROUTE, PAGE / "static", name="collviz-static")
        aiohttp_jinja2.get_env(app).globals.update(collviz_static=f"{self.public_url}{STATIC_ROUTE}/",
                                                   glyph_ranges=unicode_range())
        return app
