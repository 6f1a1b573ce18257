"""SVG snapshots of replayed, really recorded traces (tests/fixtures/*.cvz; see its README).

Run-dependent figures (durations, event positions) are masked with ``mask_volatile`` so a fresh
trace of the same scenario renders the same frames. Update with ``--snapshot-update``.
"""

from __future__ import annotations


import pytest

from collviz.app.app import make_app
from collviz.runtime.wire.protocol import Phase
from collviz.runtime.wire.trace import read_trace

from support.paths import FIXTURES
from support.synthetic import all_gather_events


SIZE = (120, 36)


def _at_step(step: int, *keys: str):
    """A ``run_before`` that waits for the trace to load, then seeks to ``step`` (1-based)."""

    async def run_before(pilot) -> None:
        app = pilot.app
        for _ in range(500):
            if app.loaded:
                break
            await pilot.pause(0.02)
        assert app.loaded, "trace did not load"
        await pilot.press("g", "s", *str(step), "enter")
        await pilot.press(*keys)
        for _ in range(3):  # let after-refresh work (a pane's "↓ more: scroll" hint) settle
            await pilot.pause(0.05)

    return run_before


async def _after_the_all_gather(pilot) -> None:
    """A ``run_before`` for the synthetic all-gather: its second step (the all-gather's end)."""
    await pilot.pause()
    await pilot.press("home", "right", "right")
    await pilot.pause()


def _app(name: str):
    return make_app(trace=FIXTURES / f"{name}.cvz", mask_volatile=True)


def test_all_gather_before(snap_compare):
    """Step 1 (setup): every rank holds only its own W_query shard."""
    assert snap_compare(_app("all-gather"), terminal_size=SIZE, run_before=_at_step(1))


def test_all_gather_after(snap_compare):
    """Step 2: every rank holds the gathered tensor, each row coloured by its source rank."""
    assert snap_compare(_app("all-gather"), terminal_size=SIZE, run_before=_at_step(2))


def test_all_gather_after_minimum_size(snap_compare):
    """The same frame at the smallest supported terminal, 100x30."""
    assert snap_compare(_app("all-gather"), terminal_size=(100, 30), run_before=_at_step(2))


def test_reduce_scatter_after(snap_compare):
    """Step 2: each rank's shard of the sum, in the reduced-from-several-ranks style."""
    assert snap_compare(_app("reduce-scatter"), terminal_size=SIZE, run_before=_at_step(2))


def test_memory_timeline_at_release(snap_compare):
    """Last step: memory falls back to zero on every rank; the timeline is complete."""
    assert snap_compare(_app("all-gather"), terminal_size=SIZE, run_before=_at_step(4))


def test_rank_detail_with_provenance(snap_compare):
    """Clicking rank 1 after the all-gather lists which rank each run of elements came from."""

    async def run_before(pilot) -> None:
        await _at_step(2)(pilot)
        panels = pilot.app.screen.query("RankPanel")
        await pilot.click(panels[1])
        await pilot.pause()

    assert snap_compare(_app("all-gather"), terminal_size=SIZE, run_before=run_before)


def test_all_reduce_after(snap_compare):
    """Step 2: every rank holds the same reduced value, in the reduced-from-several-ranks style."""
    assert snap_compare(_app("all-reduce"), terminal_size=SIZE, run_before=_at_step(2))


def _fsdp_step(name: str) -> int:
    """The 1-based step of the fsdp-tiny fixture's phase called ``name``."""
    trace = read_trace(FIXTURES / "fsdp-tiny.cvz")
    begins = {e.name: e.index for e in trace.events if isinstance(e, Phase) and e.edge == "begin" and e.rank == 0}
    return begins[name] + 1


def test_fsdp_forward_all_gather_shows_transfers_and_cost(snap_compare):
    """FSDP2's all-gather of block 0: every rank's shard arrives at its place, with bytes, time,
    algbw and busbw (times masked)."""
    step = _fsdp_step("block 0 forward: all-gather")
    assert snap_compare(_app("fsdp-tiny"), terminal_size=(160, 50), run_before=_at_step(step))


def test_fsdp_backward_reduce_scatter_shows_transfers_and_cost(snap_compare):
    """Block 0's gradient reduce-scatter: each rank receives every other rank's part of its shard."""
    step = _fsdp_step("block 0 backward: reduce-scatter")
    assert snap_compare(_app("fsdp-tiny"), terminal_size=(160, 50), run_before=_at_step(step))


def test_fsdp_reshard_draws_the_gathered_weight_as_freed(snap_compare):
    """After block 0's reshard its gathered W_query is struck through, 'freed in step k'."""
    step = _fsdp_step("block 0 forward: reshard")
    assert snap_compare(_app("fsdp-tiny"), terminal_size=(160, 50), run_before=_at_step(step))


def test_fsdp_memory_by_category_with_peaks_at_the_end(snap_compare):
    """The whole step's memory: params, grads, optimizer, activations, communication stacked on one
    scale, ranks with identical samples on one row, the peak marked and named."""
    step = _fsdp_step("AdamW step on the shards")
    assert snap_compare(_app("fsdp-tiny"), terminal_size=(220, 60), run_before=_at_step(step))


def test_ring_partial_sums_grow_hop_by_hop(snap_compare):
    """Hop 2 of the ring: chunks summed over 2 and 3 ranks in different shades."""
    assert snap_compare(_app("ring-all-reduce"), terminal_size=SIZE, run_before=_at_step(3))


def test_desync_failure_names_the_rank_that_misbehaved(snap_compare):
    """The end of the desync run: the header names rank 2's all_gather against the others' all_reduce."""

    async def run_before(pilot) -> None:
        await _at_step(1, "end")(pilot)

    assert snap_compare(_app("desync"), terminal_size=SIZE, run_before=run_before)


def test_64_ranks_compact_heatmap(snap_compare):
    """64 ranks at 160x50: one row per rank in two columns, each a heatmap of the gathered buffer
    coloured by source rank, every rank in the legend."""
    assert snap_compare(make_app(events=all_gather_events(64), mask_volatile=True), terminal_size=(160, 50),
                        run_before=_after_the_all_gather)


def test_all_gather_by_ring_hop_2(snap_compare):
    """collviz all-gather --algo ring, hop 2 of 3: each rank forwards the block it received in
    hop 1, coloured by the rank it came from; the transfers are real p2p sends of hop 2."""
    assert snap_compare(_app("all-gather-ring"), terminal_size=(160, 50), run_before=_at_step(3))


def test_pp_timeline_shows_each_stage_and_the_bubble(snap_compare):
    """GPipe on 4 stages: the pipeline pane's rows, forwards then backwards, idle between."""
    assert snap_compare(_app("pp"), terminal_size=(160, 50), run_before=_at_step(2))


def test_fsdp_reduce_scatter_at_100x30_shows_gradients_before_and_the_kept_shard(snap_compare):
    """Block 0's reduce-scatter at the smallest size: each rank's own gradient (its batch alone)
    and the averaged shard it keeps, both of this step, before anything older."""
    step = _fsdp_step("block 0 backward: reduce-scatter")
    assert snap_compare(_app("fsdp-tiny"), terminal_size=(100, 30), run_before=_at_step(step))


@pytest.mark.parametrize("present", [False, True], ids=["plain", "present"])
def test_fsdp_all_gather_at_100x30_keeps_the_cost_headline(snap_compare, present):
    """Block 0's forward all-gather at the smallest size, plain and in the projector layout: the
    cost pane's headline (S, t, algbw, busbw × 3/4) whole above the transfers and legend."""
    from collviz.app.viewer_options import ViewerOptions

    from collviz.app.theme import palette_for

    app = make_app(trace=FIXTURES / "fsdp-tiny.cvz", mask_volatile=True, options=ViewerOptions(present=present))
    step = _fsdp_step("block 0 forward: all-gather")
    try:
        assert snap_compare(app, terminal_size=(100, 30), run_before=_at_step(step))
    finally:
        palette_for("textual-dark")  # the palette is module state: leave it as the next test expects


def test_a_quiz_question_in_fsdp(snap_compare):
    """The quiz in a training scenario: block 0's forward all-gather asks whose data one row of
    rank 0's gathered W_query holds."""
    step = _fsdp_step("block 0 forward: all-gather")

    async def run_before(pilot) -> None:
        await _at_step(step - 1)(pilot)
        await pilot.press("z", "right")
        await pilot.pause()

    assert snap_compare(_app("fsdp-tiny"), terminal_size=(160, 50), run_before=run_before)


@pytest.mark.parametrize("name", ["desync", "hang"])
def test_failures_at_100x30_name_the_cause(snap_compare, name):
    """desync (caught at once) and hang (rank 2 never arrives) at the smallest size, at the end."""
    assert snap_compare(_app(name), terminal_size=(100, 30), run_before=_at_step(1, "end"))


def test_a_lesson_header_names_the_item(snap_compare):
    from collviz.app.viewer_options import LessonPlace, ViewerOptions

    app = make_app(trace=FIXTURES / "reduce-scatter.cvz", mask_volatile=True,
                   options=ViewerOptions(lesson=LessonPlace("collectives", 7, 8, "reduce-scatter")))
    assert snap_compare(app, terminal_size=(100, 30), run_before=_at_step(2))


def test_moe_cost_gives_each_ranks_bytes_and_time(snap_compare):
    """moe's dispatch: uneven all-to-all, each rank's bytes and time, the slowest named."""
    trace = read_trace(FIXTURES / "moe.cvz")
    step = next(e.index for e in trace.events if isinstance(e, Phase) and e.rank == 0
                and e.edge == "begin" and e.name.startswith("dispatch")) + 1
    assert snap_compare(_app("moe"), terminal_size=(160, 50), run_before=_at_step(step))


def test_16_ranks(snap_compare):
    """16 ranks after an all-gather: the heatmap's colours stay apart (see test_render)."""
    assert snap_compare(make_app(events=all_gather_events(16), mask_volatile=True), terminal_size=(160, 50),
                        run_before=_after_the_all_gather)
