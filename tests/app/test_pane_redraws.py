"""A pane builds its text again only where what it draws differs: a step alike the last but for its
events' numbers and times keeps the text shown (a run's steps repeat their transfers, costs and
checks), and any drawn difference (a range, the call, the count, the palette, a check, a size)
is redrawn. Expected texts are written out by hand from the fixture."""

from __future__ import annotations

import msgspec
from rich.color import Color
from textual.app import App, ComposeResult
from textual.geometry import Region

from collviz.app.model import CallCost, EventLog, view_at
from collviz.app.model.panes import CostFields, NarrationFields, PipelineFields, TransferFields
from collviz.app.model.view import RunState
from collviz.app.widgets import CostPane, NarrationPane, PipelineTimeline, RankHeatmap, TransfersPane
from collviz.app.widgets.line_widget import _spans_of
from collviz.app.widgets.render import HIGH_CONTRAST_COLOURS, RANK_COLOURS, use_palette
from collviz.runtime.wire.protocol import Buffer, Check, Collective, Span, Transfer

from support.pane_rows import pane_rows, pane_strips
from support.synthetic import all_gather_events

GROUP = [1, 3, 5, 7]
"""The call's communicator: every other rank of 8 (rank 3 is its second member)."""


class _Panes(App[None]):
    def compose(self) -> ComposeResult:
        yield TransfersPane(id="transfers")
        yield NarrationPane(id="narration")
        yield CostPane(id="cost")
        yield PipelineTimeline(id="pipeline")
        yield RankHeatmap(id="heatmap")


def _all_gather(seq: int) -> tuple[Collective, tuple[Transfer, ...]]:
    """An all-gather of 2 float32 a rank on :data:`GROUP` (call number ``seq``, at a time of its
    own), and the 12 transfers into its members' outputs."""
    call = Collective(run="r", rank=1, seq=seq, t_ns=1000 * seq, phase=seq, edge="end", op="all_gather", group="pg1",
                      group_ranks=GROUP, group_seq=seq, dtype="float32", count=2, bytes_in=8, bytes_out=32,
                      algo_bytes=32)
    transfers = tuple(Transfer(run="r", rank=dst, seq=100 * seq + n, t_ns=1000 * seq + n, phase=seq, src=src, dst=dst,
                               bytes=8, buffer="output", start=2 * GROUP.index(src), length=2, kind="logical")
                      for n, (dst, src) in enumerate((d, s) for d in GROUP for s in GROUP if s != d))
    return call, transfers


_LINES = [f"8 B r{src}[0:2]→r{dst}[{2 * i}:{2 * i + 2}]" for dst in GROUP for i, src in enumerate(GROUP) if src != dst]
"""Each transfer's line, by hand: the sender's whole input lands at its place in the group."""


async def test_the_transfers_listing_is_kept_for_a_step_alike_and_rebuilt_where_it_differs():
    app = _Panes()
    async with app.run_test(size=(80, 40)) as pilot:
        pane = app.query_one(TransfersPane)

        async def shown() -> str:
            """The pane's rows as its user scrolls through them, one a line."""
            await pilot.pause()
            return "\n".join(pane_rows(pane))

        call, transfers = _all_gather(1)
        pane.show(TransferFields(transfers, 12, 0, call, ""))
        listing = pane._listing
        assert await shown() == "logical data movement: input → output\n" + "".join(f"{line}\n" for line in _LINES)
        again, later = _all_gather(2)  # the next step: the same moves, other numbers and times
        pane.show(TransferFields(later, 12, 0, again, ""))
        assert pane._listing is listing
        pane.show(TransferFields(later, 12, 0, None, ""))  # the step's call unknown: no sender's range
        assert await shown() == "logical data movement into output\n" + "".join(
            f"8 B r{src}→r{dst}[{2 * i}:{2 * i + 2}]\n" for dst in GROUP for i, src in enumerate(GROUP) if src != dst)
        pane.show(TransferFields(later, 100, 0, again, ""))  # 88 more than the 12 listed
        assert (await shown()).endswith(f"{_LINES[-1]}\n… 88 more\n")
        moved = (msgspec.structs.replace(later[0], start=4), *later[1:])  # one range differs: past r3's input
        pane.show(TransferFields(moved, 12, 0, again, ""))
        assert (await shown()).splitlines()[1] == "8 B r3→r1[4:6]"
        try:
            pane.show(TransferFields(transfers, 12, 0, call, ""))
            kept, listing = await shown(), pane._listing
            use_palette(HIGH_CONTRAST_COLOURS)
            pane.show(TransferFields(transfers, 12, 0, call, ""))  # the same step in the projector's colours
            assert pane._listing is not listing and await shown() == kept
            first = pane_strips(pane)[1]  # 8 B r3[0:2]→r1[0:2]
            sender = [segment for segment in first if segment.text == "r3"]
            assert len(sender) == 1 and sender[0].style.bgcolor.triplet == Color.parse(HIGH_CONTRAST_COLOURS[3]).triplet
        finally:
            use_palette(RANK_COLOURS)


def _check(seq: int, rank: int, ok: bool = True) -> Check:
    return Check(run="r", rank=rank, seq=seq, t_ns=seq, phase=seq, name="grads equal", ok=ok, detail="max |Δ| 0")


async def test_the_narration_is_kept_for_a_step_alike_and_rebuilt_where_a_check_differs():
    app = _Panes()
    async with app.run_test(size=(80, 40)):
        pane = app.query_one(NarrationPane)
        running = RunState("running", "running")
        pane.show(NarrationFields(True, "step 1", "Each rank sums.", running, tuple(_check(1, r) for r in (0, 2, 4, 6))))
        shown = pane._shown
        listed = "".join(f"\n✓ r{r} grads equal max |Δ| 0" for r in (0, 2, 4, 6))
        assert shown.plain == f"✓ 4 checks pass (listed below)\n\nEach rank sums.\n{listed}"
        pane.show(NarrationFields(True, "step 2", "Each rank sums.", running, tuple(_check(9, r) for r in (0, 2, 4, 6))))
        assert pane._shown is shown and str(pane.border_title) == "step 2"
        failed = (_check(9, 0), _check(9, 2, ok=False), _check(9, 4), _check(9, 6))
        pane.show(NarrationFields(True, "step 2", "Each rank sums.", running, failed))
        assert pane._shown.plain.startswith("✗ r2 grads equal max |Δ| 0\n✓ 3 checks pass (listed below)")


def _cost(algo_bytes: int) -> CallCost:
    return CallCost(op="all_gather", group="pg1", ranks=4, dtype="float32", bytes_in=8, bytes_out=32,
                    algo_bytes=algo_bytes, seconds=None, timed="unknown", calls=1, reported=4, rate=None)


async def test_the_cost_is_kept_for_a_step_alike_and_rebuilt_where_an_earlier_call_s_size_differs():
    app = _Panes()
    async with app.run_test(size=(80, 40)):
        pane = app.query_one(CostPane)
        pane.show(CostFields((_cost(16), _cost(32)), 2, 0, (), ""))
        shown = pane._shown
        assert shown.plain.endswith("\nbefore it: all_gather 16 B")
        pane.show(CostFields((_cost(16), _cost(32)), 2, 1, (), ""))  # the next step: the same two calls
        assert pane._shown is shown
        pane.show(CostFields((_cost(24), _cost(32)), 2, 2, (), ""))
        assert pane._shown.plain.endswith("\nbefore it: all_gather 24 B")


async def test_a_hidden_pipeline_pane_is_drawn_once_spans_come():
    app = _Panes()
    async with app.run_test(size=(80, 40)) as pilot:
        pane = app.query_one(PipelineTimeline)
        pane.show(PipelineFields((), 0, 4))
        pane.show(PipelineFields((), 0, 4))  # still none: nothing to draw
        assert not pane.has_class("-visible")
        spans = tuple(Span(run="r", rank=r, seq=1, t_ns=2000 + 1000 * r, phase=0, kind="forward", microbatch=0,
                           duration_ns=1000) for r in range(4))
        pane.show(PipelineFields(spans, 0, 4))
        await pilot.pause()
        assert pane.has_class("-visible")
        drawn = ["".join(segment.text for segment in line) for line in pane.build_lines(*pane.content_size)]
        assert [line.split()[0] for line in drawn[1:5]] == ["r0", "r1", "r2", "r3"]


def test_changed_lines_are_refreshed_as_one_region_per_run_of_neighbours():
    assert _spans_of([0, 1, 2, 5, 7, 8], 10) == [Region(0, 0, 10, 3), Region(0, 5, 10, 1), Region(0, 7, 10, 2)]
    assert _spans_of([4], 6) == [Region(0, 4, 6, 1)]



def _with_values(ranks, rank: int, values: list[float]):
    """``ranks`` with ``rank``'s shown buffers holding ``values`` instead (new lists, as a new step's)."""
    def changed(view):
        buffers = tuple(msgspec.structs.replace(b, values=list(values)) if isinstance(b, Buffer) and b.values else b
                        for b in view.buffers)
        return view._replace(buffers=buffers)
    return tuple(changed(view) if view.rank == rank else view for view in ranks)


async def test_the_heatmap_rows_are_kept_for_equal_values_in_new_lists_and_redrawn_for_one_value():
    events = all_gather_events(6)
    ranks = view_at(EventLog(events), len(events)).ranks
    app = _Panes()
    async with app.run_test(size=(100, 40)) as pilot:
        pane = app.query_one(RankHeatmap)
        pane.show(ranks)
        await pilot.pause()
        redraws = []
        pane.lines_changed = lambda **_: redraws.append(1)  # type: ignore[method-assign]
        shown = next(b for b in ranks[2].buffers if b.values)
        pane.show(_with_values(ranks, 2, list(shown.values)))  # equal values, other list objects
        assert redraws == []
        pane.show(_with_values(ranks, 2, [*shown.values[:-1], shown.values[-1] + 1]))
        assert redraws == [1]
