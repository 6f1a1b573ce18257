"""The provenance legend: the colours drawn on screen and what each stands for — a rank's own
data, a sum over k ranks, the placeholder — and nothing for a colour not drawn."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from .render import PLACEHOLDER_STYLE, REDUCED_SHADES, DrawnColours, rank_style, reduced_style

__all__ = ["Legend", "legend_text"]

_LAST_SHADE = len(REDUCED_SHADES) + 1
"""The least count of ranks summed that shares the last, lightest shade with every larger one."""


def _sum_labels(counts: frozenset[int]) -> list[tuple[int, str]]:
    """One swatch per shade drawn, as ``(count whose style it takes, label)``: each count below
    :data:`_LAST_SHADE` its own; the counts sharing the last shade as one, ``Σ8–16`` for those drawn
    (``Σ16`` where only that one is)."""
    own = sorted(count for count in counts if count < _LAST_SHADE)
    shared = sorted(count for count in counts if count >= _LAST_SHADE)
    labels = [(count, f"Σ{count}") for count in own]
    if shared:
        span = f"{shared[0]}–{shared[-1]}" if len(shared) > 1 else str(shared[0])
        labels.append((shared[0], f"Σ{span}"))
    return labels


def legend_text(colours: DrawnColours, labelled_rows: bool = False) -> Text:
    """The legend of the provenance ``colours`` drawn (see :class:`Legend`); empty where none is."""
    rows: list[Text] = []
    if colours.ranks:
        if labelled_rows:
            rows.append(Text("colour = the rank whose data a cell holds, as each row's label"))
        else:
            swatches = Text()
            for rank in sorted(colours.ranks):
                # no-break spaces inside a swatch: lines wrap between swatches, never through one
                swatches.append(f"\u00a0r{rank}\u00a0", rank_style(rank))
                swatches.append(" ")
            rows.append(swatches)
    if colours.sums:
        sums = Text()
        for count, label in _sum_labels(colours.sums):
            sums.append(f"\u00a0{label}\u00a0", reduced_style(count))
        sums.append(" summed over k ranks" if labelled_rows else " summed over k ranks (named under the grid)")
        rows.append(sums)
    if colours.placeholder:
        rows.append(Text.assemble((" · ", PLACEHOLDER_STYLE), " no data"))
    return Text("\n").join(rows)


class Legend(Static):
    """Swatches explaining the provenance colours on screen: each rank whose data is drawn (or,
    where the heatmap's row labels are the swatches, a line saying so), each count of ranks summed
    that is drawn, the placeholder where one is; empty where no cell is coloured (a script's run,
    an attached job, an imported artifact)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._shown: tuple[DrawnColours, bool] | None = None

    @property
    def has_rows(self) -> bool:
        """Whether the legend says anything (some provenance colour is drawn)."""
        return self._shown is not None and bool(self._shown[0])

    def show(self, colours: DrawnColours, labelled_rows: bool = False, *, again: bool = False) -> bool:
        """Explain ``colours``; ``labelled_rows``: the ranks are drawn as rows of one heatmap, each
        row's label in its rank's colour, so that label is the rank's swatch (64 swatches would take
        the lines the transfers pane needs on a short screen); ``again``: redraw even if unchanged
        (the palette changed). Returns whether the legend changed."""
        shown = (colours, labelled_rows)
        if shown == self._shown and not again:
            return False
        self._shown = shown
        self.update(legend_text(colours, labelled_rows))
        return True
