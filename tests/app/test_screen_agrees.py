"""What a class sees agrees with itself (issue 43's small things), read from the rendered screen at
100×30 and 160×50: the legend explains only the colours drawn; a 16- or 64-rank heatmap's rows give
their values (in the cells where they fit, else their range); a finished step's marks agree with
one another; a pipelined step shown piece by piece shows the buffers and transfers of that piece.

Expected figures come from the fixtures' own settings or raw events, worked out here: the synthetic
all-gather's rank r holds r·10 and r·10 + 1 (two floats a shard), so after it every rank holds
0, 1, 10, 11, … 10(n−1), 10(n−1) + 1.
"""

from __future__ import annotations

import re

import pytest

from collviz.app.app import make_app
from collviz.runtime.sources import open_artifacts
from collviz.runtime.wire.protocol import Buffer, Phase, ProcessExit, RankEnd, Span, Transfer
from collviz.runtime.wire.trace import read_trace

from support.app import until
from support.paths import FIXTURES
from support.screens import screen_lines, screens_after
from support.synthetic import all_gather_events

SIZES = [(100, 30), (160, 50)]
SIZE_IDS = ["100x30", "160x50"]


def _step(number: int) -> list[str]:
    return ["g", "s", *str(number), "enter"]


def _call(number: int) -> list[str]:
    return ["g", "#", *str(number), "enter"]


def _sums(rows: list[str]) -> set[str]:
    """The Σk swatches on screen (the legend's; a panel's partial-sums line says ``Σ [0:2]``)."""
    return {word for row in rows for word in row.replace("\u00a0", " ").split() if word.startswith("Σ") and word != "Σ"}


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_the_legend_explains_only_the_colours_drawn(size):
    """fsdp's gathers hold each rank's own data, no sum: no Σ swatch; its reduce-scatter (call #9)
    sums all 4 ranks: Σ4 alone. The ring's hop 1 adds one neighbour's chunk to each rank's: Σ2
    alone; hop 2 adds a third: Σ2 and Σ3."""
    fsdp = make_app(trace=FIXTURES / "fsdp-tiny.cvz", mask_volatile=True)
    setup, gather, reduce_scatter = await screens_after(fsdp, size, [_step(1), _step(2), _call(9)])
    for rows in (setup, gather):
        assert _sums(rows) == set() and not any("summed over" in row for row in rows)
        assert any(" r0  " in row.replace("\u00a0", " ") for row in rows)  # each rank's swatch stays
    assert _sums(reduce_scatter) == {"Σ4"}
    ring = make_app(trace=FIXTURES / "ring-all-reduce.cvz", mask_volatile=True)
    hop1, hop2 = await screens_after(ring, size, [[], ["right"]])
    assert _sums(hop1) == {"Σ2"} and _sums(hop2) == {"Σ2", "Σ3"}


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_no_legend_where_no_cell_is_coloured(size):
    """An NCCL log holds no values or provenance: no swatch, no placeholder row, no legend."""
    events = open_artifacts([FIXTURES / "nccl" / "job-4ranks.log"]).events
    app = make_app(events=events, mask_volatile=True)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.loaded, tries=500)
        for _ in range(3):
            await pilot.pause(0.05)
        rows = screen_lines(app.export_screenshot())
        assert not app.screen.query_one("#legend").display
    assert _sums(rows) == set() and not any("no data" in row or "summed over" in row for row in rows)


def _heatmap_rows(rows: list[str], world: int) -> dict[int, str]:
    """Each rank's first heatmap line, from its label (``r12 ✓``) to the column's end."""
    found: dict[int, str] = {}
    for row in rows:
        for column in row.split("│")[1:2]:  # the heatmap pane is the first on the row
            for rank in range(world):
                at = column.find(f"r{rank} ")
                if at >= 0 and (at == 0 or column[at - 1] == " ") and rank not in found:
                    found[rank] = column[at:]
    return found


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_a_16_rank_heatmap_gives_its_values(size):
    """16 ranks gather 32 floats: at 160×50 (a 104-column row, two lines a rank) the values
    themselves, 0 1 10 11 … 150 151, in rank order; at 100×30 (one 54-column line) each row ends
    with 0–151."""
    world = 16
    gathered = [str(rank * 10 + i) for rank in range(world) for i in range(2)]
    app = make_app(events=all_gather_events(world=world), mask_volatile=True)
    (rows,) = await screens_after(app, size, [_step(2)])
    heatmap = _heatmap_rows(rows, world)
    assert sorted(heatmap) == list(range(world))
    if size == (160, 50):
        for rank in range(world):
            first = heatmap[rank].split()[2:]  # after the label and the mark
            assert first == gathered[: len(first)] and len(first) >= world, heatmap[rank]
    else:
        assert all(heatmap[rank].split()[-1] == "0–151" for rank in range(world)), heatmap


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_a_64_rank_heatmap_gives_its_values_range(size):
    """64 ranks gather 128 floats, 0 … 631: too many to write; at 160×50 each row ends with its
    range, at 100×30 (four narrow columns) one line under the rows says it for every rank."""
    world = 64
    app = make_app(events=all_gather_events(world=world), mask_volatile=True)
    (rows,) = await screens_after(app, size, [_step(2)])
    if size == (160, 50):
        screen = " ".join(" ".join(rows).split())
        assert all(re.search(rf"r{rank} ✓ 0–631", screen) for rank in range(world)), screen
    else:
        assert any("values 0–631 on every rank" in row for row in rows)


def _finishing_out_of_order(world: int, last: int) -> list:
    """The synthetic all-gather with each rank ending the run right after its own end of the
    release step, ``last`` ending that step after every other rank has ended the run (as a live
    run's ranks report: each exits as soon as it is done)."""
    events = all_gather_events(world=world)
    ends = {event.rank: event for event in events if isinstance(event, RankEnd)}
    late = [event for event in events if event.rank == last and getattr(event, "phase", None) == 2
            and not isinstance(event, RankEnd)] + [ends[last]]
    ordered = []
    for event in events:
        if isinstance(event, RankEnd) or event in late:
            continue
        if isinstance(event, ProcessExit) and late:
            ordered += late
            late = []
        ordered.append(event)
        if isinstance(event, Phase) and event.index == 2 and event.edge == "end":
            ordered.append(ends[event.rank])
    return ordered


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_a_finished_step_marks_every_rank_alike(size):
    """At the end of the release step (rank 10 the last to end it; the others have ended the run
    already) every one of the 16 rows is marked done (✓), rank 10's too: none is left running (●)."""
    world = 16
    app = make_app(events=_finishing_out_of_order(world, last=10), mask_volatile=True)
    (rows,) = await screens_after(app, size, [_step(3)])
    heatmap = _heatmap_rows(rows, world)
    assert {rank: line.split()[1] for rank, line in heatmap.items()} == {rank: "✓" for rank in range(world)}


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_each_piece_of_a_pipelined_step_shows_that_piece(size):
    """pp's GPipe step (step 2), piece by piece: at piece k (spans in the order they ended) the
    panels hold the buffers and the transfers pane counts the transfers stamped by the k-th span's
    end, read from the trace's raw events: no output gradient at the first piece, rank 0's
    forward of microbatch 0; every panel's rank still running the step."""
    events = read_trace(FIXTURES / "pp.cvz").events
    spans = sorted((e for e in events if isinstance(e, Span) and e.phase == 1), key=lambda e: e.t_ns)
    app = make_app(trace=FIXTURES / "pp.cvz", mask_volatile=True)
    screens = await screens_after(app, size, [[], ["right"], ["right"]])
    for piece, rows in enumerate(screens, start=1):
        until_ns = spans[piece - 1].t_ns
        moved = [e for e in events if isinstance(e, Transfer) and e.phase == 1 and e.t_ns <= until_ns]
        screen = "\n".join(rows)
        assert f"piece {piece} of {len(spans)}" in screen
        assert f"transfers · {len(moved)} " in screen
        names = {e.name: e.t_ns <= until_ns for e in events if isinstance(e, Buffer) and e.phase == 1}
        if size == (160, 50):  # panels wide enough for every name whole
            assert {name for name, held in names.items() if held} == {name for name in names if name in screen}
            assert "─ done ─" not in screen and screen.count("─ running ─") == 4
    first = "\n".join(screens[0])
    assert "r0 forward of microbatch 0" in first and "output grad" not in first
    assert spans[0].rank == 0 and spans[0].microbatch == 0 and spans[0].kind == "forward"


CUT_NUMBER = re.compile(r"\d…(?!\+)")
"""A number cut off from what follows it (``(211.8…``, ``through 4…``); a panel's ``…+N`` counts
what it left out."""


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_a_cut_title_never_ends_in_a_number(size):
    """Phase names with numbers in them, cut to fit the header and the narration's title: pp's
    'GPipe: 4 microbatches through 4 stages' and 'AdamW on stage 3's own parameters (211.8 KiB)',
    moe's 'route: top-2 experts per token, at most 4 …'. A cut keeps whole words and never leaves a
    number without the word after it."""
    pp = make_app(trace=FIXTURES / "pp.cvz", mask_volatile=True)
    moe = make_app(trace=FIXTURES / "moe.cvz", mask_volatile=True)
    screens = [*await screens_after(pp, size, [_step(2), _step(3)]), *await screens_after(moe, size, [_step(2)])]
    for rows in screens:
        assert [row for row in rows if CUT_NUMBER.search(row)] == []
    assert any("GPipe: 4 microbatches" in row for row in screens[0])  # cut, if at all, after a whole word


NCCL_SIXTEEN = FIXTURES / "nccl" / "real" / "nccl-1412-sixteen-ranks-rings-of-a-rank-without-comm-line.log"


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_an_nccl_logs_topology_step_says_once_that_it_has_no_values(size):
    """The 16-rank NCCL log's last step (a tree): the log holds topology, no values, so the pane
    says so in one line instead of a dash on each of the 16 rows; the run has ended well, so every
    rank is marked done (✓), the 11 ranks whose own end the log lacks too, none running (●)."""
    world = 16
    events = open_artifacts([NCCL_SIXTEEN]).events
    assert len({event.rank for event in events if isinstance(event, RankEnd)}) == 5  # 11 ranks without an end
    app = make_app(events=events, mask_volatile=True)
    (rows,) = await screens_after(app, size, [["end"]])
    assert any("NCCL tree, channels 01, 05 on world" in row for row in rows)
    heatmap = _heatmap_rows(rows, world)
    assert {rank: line.split() for rank, line in heatmap.items()} == {
        rank: [f"r{rank}", "✓"] for rank in range(world)}
    assert sum(row.count("no values recorded for this step") for row in rows) == 1
