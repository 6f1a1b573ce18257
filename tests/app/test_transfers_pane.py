"""The transfers pane draws only the rows in view, yet shows what a ``Static`` of its whole text
showed: the same rows at every width (a long line wrapped after its bytes), as many rows wanted,
and every line reachable by scrolling, the "↓ more: scroll" hint going at the bottom.

The expected rows are Textual's own wrap of the listing written out by hand."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.content import Content

from collviz.app.model.panes import TransferFields
from collviz.app.widgets import TransfersPane
from collviz.runtime.wire.protocol import Collective, Transfer

from support.pane_rows import pane_rows
from support.screens import screen_lines

GROUP = [2, 3, 6, 7]
"""The call's communicator: four of 8 ranks."""
COUNT = 786432
"""Elements of each member's input: 3 MiB of float32."""


class _OnePane(App[None]):
    def __init__(self, width: int, height: int) -> None:
        super().__init__()
        self.pane_size = (width, height)

    def compose(self) -> ComposeResult:
        pane = TransfersPane(id="transfers")
        pane.styles.width, pane.styles.height = self.pane_size
        pane.styles.border = ("round", "white")
        pane.styles.padding = (0, 1)
        yield pane


def _all_gather() -> TransferFields:
    """An all-gather of :data:`COUNT` float32 a rank on :data:`GROUP`: 12 transfers, each a
    member's whole input into its place in another's output."""
    call = Collective(run="r", rank=2, seq=1, t_ns=1, phase=1, edge="end", op="all_gather", group="pg1",
                      group_ranks=GROUP, group_seq=1, dtype="float32", count=COUNT, bytes_in=4 * COUNT,
                      bytes_out=16 * COUNT, algo_bytes=16 * COUNT)
    transfers = tuple(Transfer(run="r", rank=dst, seq=n, t_ns=n, phase=1, src=src, dst=dst, bytes=4 * COUNT,
                               buffer="output", start=COUNT * GROUP.index(src), length=COUNT, kind="logical")
                      for n, (dst, src) in enumerate((d, s) for d in GROUP for s in GROUP if s != d))
    return TransferFields(transfers, 20, 0, call, "")


_TEXT = "logical data movement: input → output\n" + "".join(
    f"3.0 MiB r{src}[0:{COUNT}]→r{dst}[{COUNT * i}:{COUNT * (i + 1)}]\n"
    for dst in GROUP for i, src in enumerate(GROUP) if src != dst) + "… 8 more\n"
"""The listing, by hand: each sender's whole input lands at its place in the group; 8 of the
step's 20 transfers are not listed."""


async def test_the_rows_are_textuals_wrap_of_the_whole_listing_at_every_width():
    """At 60 columns every line fits; at 30 and 20 each transfer wraps after its bytes (never
    between the number and its unit); the rows wanted are as many."""
    for width in (64, 34, 24):
        app = _OnePane(width, 50)
        async with app.run_test(size=(80, 60)) as pilot:
            pane = app.query_one(TransfersPane)
            pane.show(_all_gather())
            await pilot.pause()
            expected = [line.plain for line in Content(_TEXT).wrap(width - 4)]
            assert pane_rows(pane) == expected, width
            assert pane.rows_wanted(width - 4).full == len(expected)
            if width < 40:  # each transfer's line wraps after its bytes
                assert expected.count("3.0 MiB") == 12


async def test_every_line_is_reached_by_scrolling_and_the_hint_goes_at_the_bottom():
    """Five rows tall, the pane shows the head and two transfers, says more is below, and scrolled
    to its end shows the last transfer and the count of those not listed, the hint gone."""
    app = _OnePane(60, 5)
    async with app.run_test(size=(80, 10)) as pilot:
        pane = app.query_one(TransfersPane)
        pane.show(_all_gather())
        for _ in range(3):
            await pilot.pause()
        lines = _TEXT.split("\n")
        screen = screen_lines(app.export_screenshot())[1:]  # below the screenshot's title
        assert lines[0] in screen[1] and lines[2] in screen[3] and pane.border_subtitle == "↓ more: scroll"
        assert pane.allow_vertical_scroll  # what the mouse wheel needs
        pane.scroll_end(animate=False, immediate=True)
        for _ in range(3):
            await pilot.pause()
        screen = screen_lines(app.export_screenshot())[1:]
        assert lines[-3] in screen[1] and lines[-2] in screen[2] and pane.border_subtitle == ""
