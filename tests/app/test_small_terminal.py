"""At 100×30, the smallest size the viewer draws, and there with ``--present``: every step of every
fixture trace (and of a 16-rank run and an imported NCCL log) is walked; the current call's S, t,
algbw and busbw with its factor are on the screen without scrolling, and no number loses its unit
(the screen's text is searched for a number followed by a cut unit, ``8.38 m`` for ms,
``211.8 K…`` for KiB, at a pane's edge or before an ellipsis)."""

from __future__ import annotations

import dataclasses

import pytest

from collviz.app.app import make_app
from collviz.app.model import CallCost
from collviz.app.viewer_options import ViewerOptions
from collviz.runtime.observation.metrics import Bandwidth
from collviz.runtime.sources.detect import open_artifacts

from support.app import until
from support.paths import FIXTURES
from support.screens import cut_units, headline, walk_every_step


TRACES = ("all-gather", "reduce-scatter", "all-reduce", "all-gather-ring", "ring-all-reduce", "desync", "hang",
          "moe", "pp", "fsdp-tiny")
WITHOUT_CALLS = ("all-gather-ring", "ring-all-reduce", "pp")
"""Fixtures whose ranks only send and receive: no collective call has a cost."""


def test_the_search_finds_a_cut_unit_and_passes_whole_ones():
    assert cut_units(["│all_gather 16 B→64 B 8.38 m│"]) == ["│all_gather 16 B→64 B 8.38 m│"]
    assert cut_units(["step 3/5 AdamW (211.8 K…"]) and cut_units(["busbw 1.2 GB/│"])
    assert cut_units(["busbw 1.2 GB/s│"]) == []
    assert cut_units(["│all_gather 16 B→64 B 8.38 ms│", "t = 4.5 ms", "12.8 KiB in → 3.2 KiB out"]) == []


def test_the_headline_writes_s_t_algbw_and_busbw_with_the_factor():
    cost = CallCost(op="all_reduce", group="world", ranks=16, dtype="float32", bytes_in=4096, bytes_out=4096,
                    algo_bytes=4096, seconds=0.002, timed="call", calls=1, reported=16, rate=None)
    assert headline(cost) == ["S = 4.0 KiB", "t = 2 ms"]
    timed = dataclasses.replace(cost, rate=Bandwidth(algbw=2048e3, busbw=3840e3, formula=""))
    assert headline(timed)[2:] == ["algbw = S/t = 2.05 MB/s", "busbw = algbw × 2·15/16", "= 3.84 MB/s"]


def _app(name: str, present: bool):
    """The viewer of fixture ``name`` (``16-ranks``: a synthetic all-gather on 16 ranks, and
    ``16-ranks-all-reduce`` the same called an all-reduce, whose factor 2·15/16 makes busbw's
    line the longest; ``nccl-import``: the NCCL log fixture, imported)."""
    options = ViewerOptions(present=present)
    if name.startswith("16-ranks"):
        import msgspec

        from collviz.runtime.wire.protocol import Collective
        from support.synthetic import all_gather_events

        op = "all_reduce" if name.endswith("all-reduce") else "all_gather"
        events = [msgspec.structs.replace(e, op=op) if isinstance(e, Collective) else e for e in all_gather_events(16)]
        return make_app(events=events, options=options)
    if name == "nccl-import":
        return make_app(events=open_artifacts([FIXTURES / "nccl" / "job-4ranks.log"]).events, options=options)
    return make_app(trace=FIXTURES / f"{name}.cvz", options=options)


@pytest.mark.parametrize("present", [False, True], ids=["plain", "present"])
@pytest.mark.parametrize("name", (*TRACES, "16-ranks", "16-ranks-all-reduce", "nccl-import"))
async def test_every_step_at_100x30_shows_the_call_s_figures_and_keeps_every_unit_whole(name, present):
    walk = await walk_every_step(_app(name, present), (100, 30))
    assert walk.cut == [] and walk.hidden == []
    assert walk.checked or name in WITHOUT_CALLS, name  # the walk met calls to check


@pytest.mark.parametrize(("ranks", "size"), [(4, (100, 30)), (64, (100, 30)), (8, (100, 32)), (64, (160, 50))])
async def test_every_side_pane_fits_the_side_column(ranks, size):
    """The narration, cost and transfers lie inside the column that holds them, each with a line of
    its own text at least, and the legend too where it is shown (a short screen once laid the
    transfers and the legend out below its edge, where they were never seen)."""
    from support.synthetic import all_gather_events

    app = make_app(events=all_gather_events(ranks), mask_volatile=True)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.loaded)
        await pilot.press("end")
        await pilot.pause()
        side = app.screen.query_one("#side").region
        for name, least in (("narration", 3), ("cost", 3), ("transfers", 3), ("legend", 1)):
            pane = app.screen.query_one(f"#{name}")
            if name == "legend" and not pane.display:
                continue
            assert pane.region.height >= least and side.contains_region(pane.region), (name, pane.region, side)


def test_the_side_column_is_shared_by_priority():
    """Worked by hand: the cost pane keeps its headline (4 lines here, 7 with its details) and, in
    a column of 24 rows or more, grows to 9 rows; a pane with one line to say gets that line; the
    legend goes when the narration (5) and transfers (5, or 3 for one line) would not fit beside
    it; the transfers take a third of the rest (at least 5), no more than their text needs."""
    from collviz.app.widgets.side_column import SideShares, side_shares
    from collviz.app.widgets.text_pane import PaneRows

    call, listing = PaneRows(4, 7), PaneRows(2, 14)
    assert side_shares(20, 4, call, listing) == SideShares(narration=5, cost=6, transfers=5, legend=4)  # 100x30
    assert side_shares(20, 5, call, listing) == SideShares(narration=9, cost=6, transfers=5, legend=0)  # 8 ranks
    assert side_shares(38, 4, call, listing) == SideShares(narration=17, cost=9, transfers=8, legend=4)  # 160x50
    assert side_shares(38, 4, call, PaneRows(2, 3)) == SideShares(narration=20, cost=9, transfers=5, legend=4)
    quiet = PaneRows(1, 1)
    assert side_shares(20, 4, quiet, quiet) == SideShares(narration=10, cost=3, transfers=3, legend=4)
    assert side_shares(12, 4, call, listing) == SideShares(narration=3, cost=6, transfers=3, legend=0)  # pipeline
    assert side_shares(3, 4, PaneRows(6, 9), listing) == SideShares(narration=0, cost=3, transfers=0, legend=0)
    for height in range(3, 81):
        for legend in range(1, 9):
            for cost in (call, quiet, PaneRows(1, 12)):
                for transfers in (listing, quiet):
                    shares = side_shares(height, legend, cost, transfers)
                    assert shares.narration + shares.cost + shares.transfers + shares.legend == height
                    assert min(shares.narration, shares.transfers) >= 0
                    assert shares.cost >= min(height, cost.least + 2)
