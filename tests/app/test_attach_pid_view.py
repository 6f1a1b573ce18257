"""The viewer on a job read by pid (``collviz attach --pid``), at 100×30: a real session over
hand-made stacks of four ranks (:mod:`support.pid_stacks`) in which ranks 0, 2 and 3 wait in
all_reduce for rank 1, in its own load_batch — the call worded by its place (no group, number or
sizes shown), rank 1 named at its line, and what a stack cannot hold said so."""

from __future__ import annotations

from pathlib import Path

from collviz.app.app import make_app
from collviz.app.widgets.rank_panel import RankPanel
from collviz.runtime.live.pace import Pace
from collviz.runtime.sessions.live import pid_session
from collviz.runtime.wire.protocol import Collective, Stall

from support.app import until
from support.pid_stacks import IN_ALL_REDUCE, LOADING, stack_reader
from support.screens import screen_lines


async def test_the_viewer_names_the_rank_the_others_wait_for_at_its_own_line(monkeypatch):
    monkeypatch.setattr(Path, "exists", lambda self: True)  # the hand-made pids are running
    waiting = {0: IN_ALL_REDUCE, 1: LOADING, 2: IN_ALL_REDUCE, 3: IN_ALL_REDUCE}
    reader, _ = stack_reader([waiting])
    session = pid_session(reader, pace=Pace(0.01, 0.01))
    session.start()
    app = make_app(session=session)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: any(isinstance(event, Stall) for event in app.event_log.events))
        await pilot.pause()
        header = " ".join(app.screen.query_one("#header").render().plain.split())
        panels = [(" ".join(panel.body().plain.split("\n")), str(panel.border_subtitle))
                  for panel in app.screen.query(RankPanel)]
        lines = screen_lines(app.export_screenshot())
        memory = "".join(segment.text for segment in app.screen.query_one("#memory").build_lines(90, 8)[0])
        cost = " ".join(app.screen.query_one("#cost").render().plain.split())
        session.stop()
    where = "rank 1 is missing from the call, at train.py:12 in load_batch"
    assert "live stalled: all_reduce at train.py:30 in step: ranks 0, 2, 3 waiting" in header
    assert header.startswith("collviz attach-pid · backend and device not read · 4 ranks ·"), header  # not "on cpu"
    assert any("at train.py:12 in load_batch" in line for line in lines), "on screen at 100×30"
    assert panels[:2] == [("all_reduce in flight…", "running"), (where, "started")], \
        "rank 0 inside the call, no sizes (a stack holds none); rank 1 out of it, its own panel saying where"
    assert "all_reduce at train.py:30 in step has not ended on r0, r2, r3: no cost" in cost
    assert memory == "memory not recorded: the attached job's stacks hold none"


async def test_a_call_every_rank_left_shows_no_size_or_time_it_never_read(monkeypatch):
    monkeypatch.setattr(Path, "exists", lambda self: True)
    everyone = {rank: IN_ALL_REDUCE for rank in range(4)}
    apart = {rank: LOADING for rank in range(4)}
    reader, _ = stack_reader([everyone, apart])
    session = pid_session(reader, pace=Pace(0.01, 0.01))
    session.start()
    app = make_app(session=session)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: sum(isinstance(event, Collective) and event.edge == "end"
                                       for event in app.event_log.events) == 4)
        await pilot.pause()
        cost = " ".join(app.screen.query_one("#cost").render().plain.split())
        session.stop()
    assert cost == ("all_reduce at train.py:30 in step · 4 ranks · sizes not read (a stack holds none) t not recorded "
                    "t: not recorded: read from the ranks' stacks, which hold no call's time")
