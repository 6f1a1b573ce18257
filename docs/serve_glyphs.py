"""Build ``app/serve_page/static/collviz-glyphs.ttf``: the glyphs ``collviz serve``'s page needs that
Roboto Mono (textual-serve's font, served from the wheel) lacks — arrows, ceilings, super- and
subscripts, geometric shapes, marks (✓ ✗ ● ◆ ★ …) — taken from DejaVu Sans Mono, plus the pause
sign ⏸ (U+23F8), which DejaVu lacks, drawn here as two bars. Renamed "collviz glyphs", as the
Bitstream Vera licence asks of a modified font (its text: ``LICENSE-glyphs.txt`` beside it).

The glyphs are those of ``GLYPH_RANGES`` (``app/commands/serve_page.py``, which gives the page's
``@font-face`` the same ranges). Maintainers run it once with fontTools (``pip install
fonttools``) in an environment with collviz installed:
``python docs/serve_glyphs.py [/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fontTools import subset
from fontTools.pens.ttGlyphPen import TTGlyphPen
from fontTools.ttLib import TTFont

from collviz.app.commands.serve_page import GLYPH_RANGES, PAGE

SOURCE = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
TARGET = PAGE / "static" / "collviz-glyphs.ttf"
PAUSE = 0x23F8
FAMILY = "collviz glyphs"


def _add_pause(font: TTFont) -> None:
    """⏸ as two upright bars, as wide as every glyph of the monospaced font."""
    width = font["hmtx"]["M"][0]
    top = getattr(font["OS/2"], "sCapHeight", 0) or font["head"].unitsPerEm * 7 // 10
    bar = width // 5
    pen = TTGlyphPen(None)
    for left in (width // 2 - bar - bar // 2, width // 2 + bar // 2):
        pen.moveTo((left, 0))
        pen.lineTo((left, top))
        pen.lineTo((left + bar, top))
        pen.lineTo((left + bar, 0))
        pen.closePath()
    font["glyf"]["uni23F8"] = pen.glyph()
    font["hmtx"]["uni23F8"] = (width, 0)
    for table in font["cmap"].tables:
        if table.isUnicode():
            table.cmap[PAUSE] = "uni23F8"


def _rename(font: TTFont) -> None:
    for record in font["name"].names:
        if record.nameID in (1, 16):
            record.string = FAMILY
        elif record.nameID in (3, 4):
            record.string = f"{FAMILY} regular"
        elif record.nameID == 6:
            record.string = FAMILY.replace(" ", "-")


def main(source: str = SOURCE) -> None:
    """Write :data:`TARGET` from ``source`` (DejaVu Sans Mono)."""
    font = TTFont(source)
    _add_pause(font)
    options = subset.Options()
    options.name_IDs = ["*"]
    options.notdef_outline = True
    options.layout_features = []
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[code for low, high in GLYPH_RANGES for code in range(low, high + 1)])
    subsetter.subset(font)
    _rename(font)
    font.save(TARGET)
    print(f"{TARGET}: {TARGET.stat().st_size:,} bytes")


if __name__ == "__main__":
    main(*sys.argv[1:])
