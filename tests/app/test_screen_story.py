"""One story per step, read from the rendered screen (issue 43, items 1, 5 and 7): the rank panels
hold the buffers of the call the cost and transfers panes describe, with the call's bytes and time
at 100×30; a buffer from an earlier step says which; a ring hop shows each rank's values before
and after; the memory peak names its largest category; ``g`` goes to a call number.

Every expected figure is worked out here by hand from the scenario's settings (the fsdp-tiny
fixture: vocab 16, d_model 16, seq 4, one block, 4 ranks; the ring: rank r holds 8r+1 … 8r+8) or
read from the trace's raw events, never from the view.
"""

from __future__ import annotations

import msgspec
import pytest

from collviz.app.app import make_app
from collviz.app.model import EventLog, seek_call
from collviz.runtime.wire.protocol import Collective, Memory, Phase
from collviz.runtime.wire.trace import read_trace

from support.app import until
from support.paths import FIXTURES
from support.screens import cut_units, screen_lines, screens_after

SIZES = [(100, 30), (160, 50)]
RANKS = 4

# fsdp-tiny's units, in float32 bytes (FSDP2 shards dim 0 evenly over 4 ranks: every dim 0 here is
# a multiple of 4). embed: tokens 16×16 + positions 4×16 = 320 floats = 1,280 B, 320 B a shard.
# block 0: two LayerNorms 2·(16+16), four 16×16 Linear with bias 4·272, fc1 16×64+64, fc2 64×16+16
# = 64 + 1,088 + 1,088 + 1,040 = 3,280 floats = 13,120 B (12.8 KiB), 3,280 B (3.2 KiB) a shard.
EMBED_CALL = "320 B→1.2 KiB"
BLOCK_CALL = "3.2 KiB→12.8 KiB"


async def _screens(app, size: tuple[int, int], keys: list[list[str]]) -> list[str]:
    """The screen's text after each key list (:func:`~support.screens.screens_after`), one string each."""
    return ["\n".join(rows) for rows in await screens_after(app, size, keys)]


def _step(number: int) -> list[str]:
    return ["g", "s", *str(number), "enter"]


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
async def test_fsdp_steps_1_to_6_tell_one_story(size):
    app = make_app(trace=FIXTURES / "fsdp-tiny.cvz", mask_volatile=True)
    setup, embed_gather, embed_compute, embed_reshard, block_gather, block_compute = \
        await _screens(app, size, [_step(n) for n in range(1, 7)])
    for screen in (setup, embed_gather, embed_compute, embed_reshard, block_gather, block_compute):
        assert cut_units(screen.splitlines()) == []
    assert setup.count("embed tokens shard") == RANKS  # every unit sharded: the first unit's shard first
    # the embedding's gather: its shard before, gathered after, the call's bytes and time, on every rank
    assert "step 2/" in embed_gather and "embed forward: all-gather" in embed_gather
    assert embed_gather.count("embed tokens shard") == RANKS
    assert embed_gather.count("tokens (gathered)") == RANKS
    assert embed_gather.count(f"all_gather {EMBED_CALL}") == RANKS
    assert embed_gather.count("‒.‒‒ ms") == RANKS  # each rank's own time (masked: it varies by run)
    assert "W_query (gathered)" not in embed_gather
    # rank 1's 80-float shard lands at elements 80–160 of rank 0's gathered buffer: 320 B
    assert "320 B r1[0:80]→r0[80:160]" in embed_gather
    # the cost and transfers panes describe the same call: S = the gathered 1,280 B (nccl-tests'
    # all_gather size), each rank's shard sent to the 3 others: 4 × 3 = 12 transfers
    assert "S = 1.2 KiB" in embed_gather and "transfers · 12" in embed_gather
    for quiet in (setup, embed_compute, embed_reshard, block_compute):
        assert "no collective call in this step" in quiet and "transfers · 0" in quiet
    # the compute step holds what the gather brought, saying from which step
    assert embed_compute.count("(from step 2)") >= RANKS and "no collective call in this step" in embed_compute
    assert embed_reshard.count("freed in step 4") == RANKS
    # the block is named on every rank, shortened (b0) where the panel is narrow, never cut away
    block = "b0" if size[0] == 100 else "block 0"
    assert block_gather.count(f"{block} W_query (gathered)") == RANKS and "…W_query" not in block_gather
    assert block_gather.count(f"all_gather {BLOCK_CALL}") == RANKS
    assert "S = 12.8 KiB" in block_gather and "transfers · 12" in block_gather
    assert "3.2 KiB r1[0:820]→r0[820:1640]" in block_gather  # 3,280 floats / 4 = 820 a shard
    assert block_compute.count("(from step 5)") >= RANKS


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
async def test_a_ring_hop_shows_each_ranks_values_before_and_after(size):
    """Hop 1 (where the ring opens): rank r sends its chunk r right and adds the chunk r−1 arriving
    from the left (chunks of 2): rank 0 adds rank 3's 31, 32 to its 7, 8."""
    app = make_app(trace=FIXTURES / "ring-all-reduce.cvz", mask_volatile=True)
    (screen,) = await _screens(app, size, [[]])
    assert "step 2/8 hop 1/6" in screen
    assert screen.count("before (from step 1)") == RANKS and screen.count("x [8] after") == RANKS
    lines = screen.splitlines()
    rank0 = [line.split("│")[1].split() for line in lines if line.startswith("│") and "│" in line[1:]]
    before, after = [str(v) for v in range(1, 9)], ["1", "2", "3", "4", "5", "6", "38", "40"]
    at = rank0.index(before)
    assert rank0[at + 2] == after  # the next title line, then the values after the hop


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
async def test_a_ring_hops_partial_sums_name_whole_ranks_in_a_narrow_panel(size):
    """Hop 2: rank 0's chunk 2 (elements 4–6) now holds ranks 2, 3 and 0 (rank 3 sent it on with
    rank 2's added), chunk 3 (6–8) still holds 3 and 0 from hop 1. At 100 columns the second range
    goes on a line of its own rather than losing a rank's name at the panel's edge."""
    app = make_app(trace=FIXTURES / "ring-all-reduce.cvz", mask_volatile=True)
    (screen,) = await _screens(app, size, [["right"]])
    assert "step 3/8 hop 2/6" in screen
    rank0 = [line.split("│")[1].strip() for line in screen.splitlines()[3:14] if line.startswith("│")]
    sums = rank0[rank0.index(next(line for line in rank0 if line.startswith("Σ"))):]
    assert " ".join(" ".join(sums).split()).startswith("Σ [4:6] r0+r2+r3 [6:8] r0+r3"), rank0
    assert not any(line.endswith("+") for line in rank0), rank0


async def _header_second_line(name: str, width: int) -> str:
    app = make_app(trace=FIXTURES / f"{name}.cvz", mask_volatile=True)
    async with app.run_test(size=(width, 30)) as pilot:
        await until(pilot, lambda: app.loaded, tries=500)
        await pilot.pause()
        return "".join(segment.text for segment in app.screen.query_one("RunHeader").render_line(1)).rstrip()


@pytest.mark.parametrize("name", ["pp", "ring-all-reduce", "fsdp-tiny"])
@pytest.mark.parametrize("width", [100, 160])
async def test_the_headers_second_line_ends_at_a_whole_word(name, width):
    """What the second line says in a terminal wide enough for all of it, cut at 100 and 160
    columns after a whole word with "…" (never ``gl…`` or ``co…``); the backend's reason, the
    last part, goes whole where it does not fit."""
    whole = await _header_second_line(name, 400)
    shown = await _header_second_line(name, width)
    assert len(shown) <= width
    kept = shown.removesuffix("…")
    assert whole.startswith(kept) and whole[len(kept):][:1] in ("", " "), (shown, whole)
    if not shown.endswith("…"):  # what is left out is whole parts: the reason
        assert whole[len(kept):] in ("", "   gloo on CPU (--backend gloo)"), (shown, whole)
    assert not kept.rstrip().endswith("·")


AXIS_LABELS = {
    "pp": {"setup", "GPipe", "AdamW", "check", "3 more steps"},
    "ring-all-reduce": {"setup", *(f"hop {k}" for k in range(1, 7)), "compare"},
}
"""Each fixture's steps as the memory axis names them, by hand: the part before the colon, a
count with what it counts (pp's last phase is "3 more steps, unobserved: …")."""


@pytest.mark.parametrize("name", sorted(AXIS_LABELS))
@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
async def test_the_memory_axis_names_steps_whole_or_not_at_all(name, size):
    app = make_app(trace=FIXTURES / f"{name}.cvz", mask_volatile=True)
    (screen,) = await _screens(app, size, [["end"]])
    (axis,) = [line for line in screen.splitlines() if "┊setup" in line]
    shown = [label.strip() for label in axis.strip("│ ").split("┊")[1:]]
    assert shown and all(label in AXIS_LABELS[name] or label == "" for label in shown), axis


async def test_the_memory_peak_names_its_largest_category():
    """At the end of fsdp-tiny's step 5 (phase 4): the first sample reaching the peak so far, and
    its largest category, read from rank 0's raw Memory events (every rank's are alike: one row)."""
    samples = [e for e in read_trace(FIXTURES / "fsdp-tiny.cvz").events
               if isinstance(e, Memory) and e.rank == 0 and e.phase <= 4]
    peak = max(s.peak_bytes for s in samples)
    at = next(s for s in samples if s.peak_bytes == peak)
    name, held = max(at.by_category.items(), key=lambda item: item[1])
    app = make_app(trace=FIXTURES / "fsdp-tiny.cvz", mask_volatile=True)
    (screen,) = await _screens(app, (160, 50), [_step(5)])
    near = " near it" if peak > at.live_bytes else ""
    assert f"peak {peak / 1024:.1f} KiB" in screen
    assert f"largest{near}: {name} {held / 1024:.1f} KiB" in screen


async def test_g_goes_to_a_call_number_or_a_step_and_says_when_there_is_no_such_call():
    """fsdp-tiny's calls, by hand: #1 embed, #2 block 0, #3 head forward all-gathers, then each
    unit backward (head, block 0, embed) an all-gather and a reduce-scatter: #1–#9."""
    app = make_app(trace=FIXTURES / "fsdp-tiny.cvz", mask_volatile=True)
    notes: list[str] = []
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.loaded, tries=500)
        app.notify = lambda message, **_: notes.append(message)  # type: ignore[method-assign]
        await pilot.press("g")
        assert "go to call #(1–9), or s + step" in "\n".join(screen_lines(app.export_screenshot()))
        await pilot.press("2", "enter")
        await pilot.pause()
        assert app.current_view().phase_name == "block 0 forward: all-gather"
        await pilot.press("g", "#", "7", "enter")
        await pilot.pause()
        assert app.current_view().phase_name == "block 0 backward: reduce-scatter"
        await pilot.press("g", "s", "3", "enter")
        await pilot.pause()
        assert app.current_view().step == 2
        await pilot.press("g", "9", "9", "enter")
        await pilot.pause()
        assert app.current_view().step == 2 and notes == ["no call #99 in this run: its calls are #1–#9"]


def test_a_call_number_on_two_communicators_goes_to_the_first_and_names_both():
    """fsdp-tiny with its head's backward calls (#4, #5) moved to a second communicator "tp" as its
    #1 and #2: call #1 is then the embed's forward all-gather on world and the head's backward
    all-gather on tp; #2 is block 0's forward all-gather and the head's reduce-scatter."""
    events = []
    for event in read_trace(FIXTURES / "fsdp-tiny.cvz").events:
        if isinstance(event, Collective) and event.group_seq in (4, 5):
            event = msgspec.structs.replace(event, group="tp", group_seq=event.group_seq - 3)
        events.append(event)
    log = EventLog(events)
    names = {e.index: e.name for e in events if isinstance(e, Phase)}
    ends = {names[step]: end for step, end in enumerate(log.step_ends)}
    assert seek_call(log, 1) == (ends["embed forward: all-gather"], ["world", "tp"])
    assert seek_call(log, 2) == (ends["block 0 forward: all-gather"], ["world", "tp"])
    assert seek_call(log, 9) == (ends["embed backward: reduce-scatter"], ["world"])
    assert seek_call(log, 10) is None


@pytest.mark.parametrize("before_phase", [0, 1], ids=["an earlier step", "the same step"])
def test_a_buffer_changed_in_the_step_carries_its_value_before(before_phase):
    """The synthetic all-gather's ``output``: zeros before (setup's, or moved into the call's own
    step), rank r's shard r·10 … after. Rank 2's view at the call's step end holds both."""
    from collviz.app.model import view_at

    from support.synthetic import SHARD, all_gather_events

    events = [msgspec.structs.replace(e, phase=before_phase) if getattr(e, "name", "") == "output"
              and getattr(e, "moment", "") == "before" else e for e in all_gather_events(world=RANKS)]
    log = EventLog(events)
    rank = view_at(log, log.step_ends[1]).ranks[2]
    (before,) = rank.previous
    assert (before.name, before.moment, before.phase, before.values) == ("output", "before", before_phase,
                                                                         [0.0] * RANKS * SHARD)
    after = next(b for b in rank.buffers if b.name == "output")
    assert after.values == [float(r * 10 + i) for r in range(RANKS) for i in range(SHARD)]
    assert view_at(log, log.step_ends[2]).ranks[2].previous == ()  # the step after changed nothing
