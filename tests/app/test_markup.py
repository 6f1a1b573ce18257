"""Nothing from a run is ever markup: text like ``[bold]``, ``[/x]`` and ``[link=…]`` in any field
that reaches the screen is shown literally and never crashes the viewer (gloo's error texts start
with ``[/__w/pytorch/…]``)."""

from __future__ import annotations

import msgspec

from collviz.app.app import make_app
from collviz.app.screens import RankDetailScreen
from collviz.runtime.wire.protocol import Buffer, Phase, RankEnd, RankStart, RunEnd, RunStart, Stall

from support.app import until
from support.synthetic import all_gather_events


HOSTILE = "[/__w/pytorch/unbound_buffer.cc:78] [bold]x[/] [link=https://e.x]y[/link] [/x]"


def _hostile_events() -> list:
    events = all_gather_events(world=4, fail_rank=2)
    out = []
    for event in events:
        if isinstance(event, RunStart):
            event = msgspec.structs.replace(event, scenario=f"sc {HOSTILE}", description=HOSTILE,
                                            backend_reason=HOSTILE, example=HOSTILE)
        elif isinstance(event, RankStart):
            event = msgspec.structs.replace(event, device=f"cpu {HOSTILE}", host=HOSTILE)
        elif isinstance(event, Phase):
            event = msgspec.structs.replace(event, name=f"{event.name} {HOSTILE}",
                                            narration=f"{event.narration} {HOSTILE}" if event.edge == "begin" else "")
        elif isinstance(event, Buffer):
            event = msgspec.structs.replace(event, name=f"{event.name} {HOSTILE}", role=HOSTILE)
        elif isinstance(event, RankEnd) and event.status == "error":
            event = msgspec.structs.replace(event, error=f"RuntimeError: {HOSTILE}")
        elif isinstance(event, RunEnd):
            out.append(Stall(run=event.run, rank=-1, seq=event.seq, t_ns=event.t_ns - 1, group="world", group_seq=1,
                             op="all_reduce", waiting=[0, 1, 3], elsewhere=[HOSTILE], waited_s=5.0, text=HOSTILE))
            event = msgspec.structs.replace(event, seq=event.seq + 1, detail=f"rank 2 failed: {HOSTILE}")
        out.append(event)
    return out


async def test_hostile_text_in_every_field_is_shown_literally():
    app = make_app(events=_hostile_events())
    async with app.run_test(size=(220, 60)) as pilot:
        await pilot.press("home")
        for _ in range(4):
            await pilot.press("right")
            await pilot.pause()
        screen = app.export_screenshot()
        await pilot.press("l")  # the raw event log pane
        await pilot.pause()
        await pilot.click("RankPanel")
        await until(pilot, lambda: isinstance(app.screen, RankDetailScreen))
        detail = app.export_screenshot()
        await pilot.press("escape", "question_mark")
        await pilot.pause()
    plain = screen.replace("&#160;", " ")
    assert "[bold]x[/]" in plain or "[bold]x" in plain  # the literal brackets, not bold text
    assert "unbound_buffer.cc:78]" in plain
    assert "[bold]x" in detail.replace("&#160;", " ")
