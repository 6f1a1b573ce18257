"""SVG snapshots of replayed, really recorded traces (tests/fixtures/*.cvz; see its README).

Run-dependent figures (durations, event positions) are masked with ``mask_volatile`` so a fresh
recording of the same scenario renders the same frames. Update with ``--snapshot-update``.
"""

from __future__ import annotations

from pathlib import Path

from collviz.app.app import make_app

FIXTURES = Path(__file__).parent / "fixtures"
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
        await pilot.press("g", *str(step), "enter")
        await pilot.press(*keys)
        await pilot.pause()

    return run_before


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
