"""The viewer on an attached job (``collviz attach TARGET``): the events an attached session gave
while rank 1 of a real gloo job stalled in its own function (the session fixture
``attached_job``), shown live, with the stalled rank and the line of its code on screen; and a
real attached session, on hand-made answers, read by the viewer to the job's end; a wait that
ends is no longer shown as a stall."""

from __future__ import annotations

import re

import torch

from collviz.app.app import make_app
from collviz.app.model import EventLog, RunState, view_at
from collviz.runtime.live.recorder_reader import RecorderReader
from collviz.runtime.live.pace import Pace
from collviz.runtime.sessions.live import LiveSession
from collviz.runtime.wire.protocol import Collective, Stall

from collviz.app.widgets.rank_panel import RankPanel

from support.app import SIZE, FakeSession, until
from support.attach_job import CALLS_BEFORE, ELEMENTS, STALLED_LINE, WORKERS, asking, fr_answer
from support.screens import screen_lines


async def test_the_viewer_shows_who_the_job_waits_for_and_where_its_code_is(attached_job):
    stalled = attached_job["stalled"]
    app = make_app(session=FakeSession(stalled))
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: len(app.event_log) == len(stalled))
        await pilot.pause()
        narration = " ".join(app.screen.query_one("#narration").render().plain.split())
        header = " ".join(app.screen.query_one("#header").render().plain.split())
        panels = [(" ".join(panel.body().plain.split("\n")), str(panel.border_subtitle))
                  for panel in app.screen.query(RankPanel)]
        lines = screen_lines(app.export_screenshot())
        memory = "".join(segment.text for segment in app.screen.query_one("#memory").build_lines(90, 8)[0])
    where = f"rank 1 is missing from the call, at job.py:{STALLED_LINE} in slow_data_loader"
    assert f"stalled: all_reduce #{CALLS_BEFORE + 1} on group 0 (default_pg): rank 0 waiting" in narration
    assert where in narration
    assert f"live stalled: all_reduce #{CALLS_BEFORE + 1} on group 0" in header
    assert any(f"at job.py:{STALLED_LINE} in slow_data_loader" in line for line in lines), "on screen at 100×30"
    size = torch.ones(ELEMENTS).nbytes
    assert panels == [(f"all_reduce {size} B→{size} B in flight…", "running"),
                      (where, f"done all_reduce #{CALLS_BEFORE} on group 0 (default_pg)")], \
        "rank 0 inside the call; rank 1 out of it, its own panel saying where it is"
    assert memory == "memory not recorded: the attached job's Flight Recorder holds none"


async def test_the_viewer_reads_an_attached_session_to_the_jobs_end():
    ask, _ = asking([{0: fr_answer(3, False), 1: fr_answer(3, False)}, {0: None, 1: None}])
    session = LiveSession(RecorderReader(WORKERS, ask=ask), pace=Pace(0.01, 0.01))
    session.start()
    app = make_app(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.event_log.run_end is not None)
        assert app.event_log.run_end[1].status == "ok" and app.exit_code() == 0
        assert sorted(app.event_log.phases) == [0, 1, 2], "one step per call of the hand-made answers"
        assert app.current_view().state == RunState(
            "finished", "finished: the job ended: no rank's worker server answers any more "
                        "(its exit status is its launcher's)")


def test_a_wait_that_ends_is_no_longer_shown_as_a_stall(attached_job):
    events = attached_job["events"]
    log = EventLog(events)
    stall = next(i for i, e in enumerate(events) if isinstance(e, Stall))
    over = next(i for i, e in enumerate(events) if isinstance(e, Collective) and e.edge == "end" and e.rank == 0
                and e.group_seq == CALLS_BEFORE + 1)  # rank 0, the one that waited, completes the call
    assert view_at(log, stall + 1).state.kind == view_at(log, over).state.kind == "stalled"
    assert view_at(log, over).ranks[1].note == f"rank 1 is missing from the call, at job.py:{STALLED_LINE} in slow_data_loader"
    assert view_at(log, over + 1).state == RunState("running", "running")
    assert [rank.note for rank in view_at(log, over + 1).ranks] == ["", ""]
    assert view_at(log, len(log)).state.kind == "finished"


async def test_at_the_jobs_end_the_view_stays_on_the_stall_it_showed():
    waiting = {0: fr_answer(4, True), 1: fr_answer(3, False)}
    ask, _ = asking([waiting, waiting, waiting, {0: None, 1: None}])
    session = LiveSession(RecorderReader(WORKERS, ask=ask), pace=Pace(0.01, 0.01))
    session.start()
    app = make_app(session=session)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.event_log.run_end is not None)
        await pilot.pause()
        log = app.event_log
        assert log.stalls and app.cursor == len(log), "not sent back to the first call"
        assert app.navigator.opening_note == ""
        view = app.current_view()
        assert view.state == RunState("failed", "failed: the job ended while rank 0 waited in all_reduce #4 on "
                                                "group 0 (default_pg) for rank 1"), "how it ended, the stall kept"
        assert view.ranks[1].note.startswith("rank 1 is missing from the call, at ")
        assert app.exit_code() == 1


def test_a_lasting_stall_reported_again_replaces_the_earlier_report():
    from collviz.app.model.view import lasting_stall
    from collviz.runtime.wire.protocol import RunStart

    def stall(seq: int, waited_s: float) -> Stall:
        return Stall(run="r", rank=-1, seq=seq, t_ns=seq, group="0", group_seq=4, op="all_reduce", waiting=[0],
                     elsewhere=["rank 1 is missing from the call, at job.py:3 in f"], waited_s=waited_s,
                     text=f"all_reduce #4 on group 0: rank 0 waiting {waited_s:.0f} s")

    start = RunStart(run="r", rank=-1, seq=0, t_ns=0, scenario="attach", world_size=2, backend="gloo",
                     device_kind="cpu", backend_reason="", mode="live", description="", torch_version="",
                     nccl_version="")
    log = EventLog([start, stall(1, 7.0), stall(2, 65.0)])
    shown = lasting_stall(log, len(log))
    assert shown is not None and shown.waited_s == 65.0
    assert lasting_stall(log, 2) is not None and lasting_stall(log, 2).waited_s == 7.0


async def test_while_a_steady_job_is_read_slowly_the_header_says_when_the_next_reading_comes():
    """Read every 30 s (the pace's fastest): after the first reading, the header counts down to the
    next one, so a still view is not taken for a frozen one."""
    steady = {0: fr_answer(3, False), 1: fr_answer(3, False)}
    ask, asked = asking([steady])
    session = LiveSession(RecorderReader(WORKERS, ask=ask), pace=Pace(30.0, 30.0))
    session.start()
    app = make_app(session=session)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: len(app.event_log.phases) == 3)
        await pilot.pause(1.2)  # the countdown is redrawn every second
        header = " ".join(app.screen.query_one("#header").render().plain.split())
        readings = len([handler for handler, _ in asked if handler == "fr_trace_json"])
    found = re.search(r"next reading in ~(\d+) s", header)
    assert found is not None, header
    assert 2 <= int(found.group(1)) <= 30 and readings == 1
    assert "paced to 0.4 %" not in header, "no meter here: the pace alone holds it"
