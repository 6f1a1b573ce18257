"""Base of the widgets drawn straight from lines of segments, repainting only changed lines."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import ClassVar, NamedTuple

from rich.segment import Segment
from rich.style import Style
from textual.content import Content
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from .render import DrawnColours, Line, cells_of, colours_drawn, content_size, line_to_strip, padded_strip, styled_segments

__all__ = ["LineWidget", "STRIPS_KEPT", "Piece", "piece", "joined"]

_TEXT, _STYLE, _CONTROL = itemgetter(0), itemgetter(1), itemgetter(2)

STRIPS_KEPT = 1024
"""Strips (and styled pieces) a widget keeps by content (all are dropped when it would keep more)."""


class Piece(NamedTuple):
    """A run of segments that lines share: a 64-rank heatmap's 64 rows of equal data are each a
    label and one piece of cells, the same object on every row that draws it."""

    segments: tuple[Segment, ...]
    cells: int
    """The cells the segments take (:func:`~.render.cells_of` their texts)."""


def piece(segments: Iterable[Segment]) -> Piece:
    """A :class:`Piece` of ``segments``, its width measured."""
    held = tuple(segments)
    return Piece(held, cells_of(list(map(_TEXT, held))))


def joined(pieces: Sequence[Piece]) -> Line:
    """The line ``pieces`` draw, as one list of segments."""
    return [segment for part in pieces for segment in part.segments]


def _content_key(segments: Sequence[Segment]) -> tuple:
    """What segments draw, as a dict key: their texts, their styles' identities and their control codes."""
    return "\0".join(map(_TEXT, segments)), tuple(map(id, map(_STYLE, segments))), tuple(map(_CONTROL, segments))


class LineWidget(Widget):
    """A line-API widget: subclasses say what to draw in :meth:`build_lines`.

    After the state that :meth:`build_lines` reads has changed, call :meth:`lines_changed`: the
    lines are rebuilt and only those that differ are repainted. With every rank's panel changing
    at 30 frames per second this is what keeps a full screen within a frame's budget (laying out
    text, or repainting unchanged lines, costs several times more).

    A line's strip is kept by the line's content (at this width and base style): most lines of a
    frame are lines of an earlier frame (a heatmap's rows repeat from step to step, a chart's axis
    stays), and turning segments into a styled strip costs far more than looking the line up
    (about 3 µs a segment against 0.05 µs). The key is the segments' texts, the identities of
    their styles (the widgets draw with shared style objects; an equal but distinct style only
    misses the cache) and their control codes: hashing rich's segments themselves calls Python
    methods per segment and cost a millisecond a frame at 64 ranks. The line is kept with its
    strip, so a style's identity cannot pass to another object while its key is held.

    A widget whose lines repeat runs of segments (the rows of ranks holding equal data) gives them
    as :class:`Piece` objects in :meth:`build_pieces`: each distinct piece is styled once (kept by
    its identity, so a piece drawn every frame, a rank's label, is looked up without reading its
    segments, and by its content, so a step drawn again finds the cells it drew) and a line's strip
    is its pieces' styled segments concatenated, its width the sum of theirs; the colours drawn
    are read from the distinct pieces.

    A widget drawing provenance colours sets :attr:`REPORTS_COLOURS`: whenever the colours its
    lines draw change, it posts :class:`ColoursDrawn`, so the legend explains what is on screen.
    """

    REPORTS_COLOURS: ClassVar[bool] = False
    """Whether the widget posts :class:`ColoursDrawn` (it draws provenance colours)."""

    class ColoursDrawn(Message):
        """The provenance colours ``widget`` draws are now ``colours``."""

        def __init__(self, widget: LineWidget, colours: DrawnColours) -> None:
            super().__init__()
            self.widget = widget
            self.colours = colours

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.colours: DrawnColours = DrawnColours()
        """The provenance colours the lines drawn last draw (where :attr:`REPORTS_COLOURS`)."""
        self._strips: list[Strip] | None = None
        self._strips_size = (0, 0)
        self._kept: dict[tuple, tuple[Line, Strip]] = {}
        self._styled: dict[tuple, tuple[Piece, list[Segment]]] = {}
        self._by_id: dict[int, tuple[Piece, list[Segment]]] = {}  # each entry holds its piece: its id stays its own
        self._kept_for: tuple[int, Style] | None = None
        self._title: str | None = None

    def set_title(self, title: str) -> None:
        """Title the border with ``title``, as plain text (titles carry buffer names and other text
        from the run), unless it already is: setting it repaints the widget, and Textual reads
        ``border_title`` back as markup, built anew each time."""
        if title != self._title:
            self._title = title
            self.border_title = Content(title)

    def build_lines(self, width: int, height: int) -> list[Line]:
        """The lines to draw in a content area of ``width`` × ``height`` cells."""
        raise NotImplementedError

    def build_pieces(self, width: int, height: int) -> list[list[Piece]] | None:
        """The lines to draw as pieces, equal runs of segments given as one :class:`Piece` object
        (drawn in place of :meth:`build_lines`'s lines, which must be the same pieces joined);
        None (the default): draw :meth:`build_lines`."""
        return None

    def lines_changed(self, *, layout: bool = False) -> None:
        """Rebuild the lines and repaint those that differ (everything, with a new ``layout``)."""
        width, height = content_size(self)
        old = self._strips
        if layout or not width or old is None or self._strips_size != (width, height):
            self._strips = None
            self.refresh(layout=layout)
            return
        new = self._build_strips(width, height)
        self._strips = new
        changed = [y for y in range(max(len(old), len(new))) if y >= len(old) or y >= len(new) or old[y] != new[y]]
        if changed:
            self.refresh(*_spans_of(changed, width))

    def _build_strips(self, width: int, height: int) -> list[Strip]:
        self._strips_size = (width, height)
        base = self.visual_style.rich_style
        kept = self._kept
        if self._kept_for != (width, base) or max(len(kept), len(self._styled), len(self._by_id)) > STRIPS_KEPT:
            kept.clear()
            self._styled.clear()
            self._by_id.clear()
            self._kept_for = (width, base)
        pieces = self.build_pieces(width, height)
        if pieces is not None:
            return self._strips_of_pieces(pieces, width, base)
        strips = []
        lines = self.build_lines(width, height)
        if self.REPORTS_COLOURS:
            self._note_colours(lines)
        for line in lines:
            key = _content_key(line)
            found = kept.get(key)
            if found is None:
                found = kept[key] = (line, line_to_strip(line, width, base))
            strips.append(found[1])
        return strips

    def _strips_of_pieces(self, lines: list[list[Piece]], width: int, base: Style) -> list[Strip]:
        """The strips of lines given as pieces, each distinct piece styled once; a line too long,
        or over no base style, goes through :func:`line_to_strip`."""
        by_id = self._by_id
        strips = []
        for line in lines:
            segments: list[Segment] = []
            length = 0
            for part in line:
                found = by_id.get(id(part))
                if found is None:
                    found = by_id[id(part)] = (part, self._styled_piece(part, base))
                segments += found[1]
                length += part.cells
            if length > width or not base:
                strips.append(line_to_strip(joined(line), width, base))
            else:
                strips.append(padded_strip(segments, length, width, base))
        if self.REPORTS_COLOURS:
            self._note_colours([part.segments for part in {id(part): part for line in lines for part in line}.values()])
        return strips

    def _styled_piece(self, part: Piece, base: Style) -> list[Segment]:
        """``part``'s segments over ``base``, kept by their content: a step drawn again makes new
        pieces of the cells it drew before."""
        key = _content_key(part.segments)
        found = self._styled.get(key)
        if found is None:
            found = self._styled[key] = (part, styled_segments(part.segments, base))
        return found[1]

    def _note_colours(self, lines: Iterable[Sequence[Segment]]) -> None:
        """Keep the colours ``lines`` draw, and say so where they changed."""
        colours = colours_drawn(lines)
        if colours != self.colours:
            self.colours = colours
            self.post_message(self.ColoursDrawn(self, colours))

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


def _spans_of(lines: list[int], width: int) -> list[Region]:
    """The regions ``width`` columns wide covering ``lines`` (in order), one per run of neighbouring
    lines: a memory chart's rows change together when the cursor moves, and each region costs the
    refresh and the compositor's repaint alike."""
    regions: list[Region] = []
    start = previous = lines[0]
    for line in lines[1:]:
        if line != previous + 1:
            regions.append(Region(0, start, width, previous + 1 - start))
            start = line
        previous = line
    regions.append(Region(0, start, width, previous + 1 - start))
    return regions
