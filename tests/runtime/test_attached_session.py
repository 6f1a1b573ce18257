"""The attached session (``collviz attach TARGET`` in the viewer): a real 2-rank gloo job under
plain torchrun, rank 1 stalled in its own function (the session fixture ``attached_job``, the job
of ``support.attach_job``), read as collviz events from the stall to the job's end and recorded;
and its rules on hand-made answers (a rank that stops answering, a launcher that knows when the
job ends, calls completed between two readings, a stop).

Expected calls are the job's own: CALLS_BEFORE all_reduces of ELEMENTS float32 ones, then one more
that rank 0 enters while rank 1 is in ``slow_data_loader``.
"""

from __future__ import annotations

import json

import torch

from collviz.runtime.live.feed import Feed
from collviz.runtime.live.pace import Pace
from collviz.runtime.live.recorder_reader import RecorderReader
from collviz.runtime.sessions.contract import RunOutcome
from collviz.runtime.sessions.live import LiveSession
from collviz.runtime.wire.protocol import Collective, Phase, RankEnd, RankStart, RunEnd, RunStart, Stall
from collviz.runtime.wire.trace import read_trace

from support.attach_job import CALLS_BEFORE, DEADLINE_S, ELEMENTS, STALLED_LINE, WORKERS, KeptEvents, asking, fr_answer
from support.cli import run_cli

TENSOR = torch.ones(ELEMENTS)
CALL = ("all_reduce", str(TENSOR.dtype).removeprefix("torch."), ELEMENTS, TENSOR.nbytes, TENSOR.nbytes)
"""What each of the job's calls is on every rank: op, element type, count, bytes in and out."""
CALLS = CALLS_BEFORE + 1


def _ends(events, rank: int) -> list[tuple]:
    return [(e.phase, e.group_seq, e.op, e.dtype, e.count, e.bytes_in, e.bytes_out) for e in events
            if isinstance(e, Collective) and e.edge == "end" and e.rank == rank]


def test_the_session_starts_with_the_jobs_world_and_says_what_it_cannot_show(attached_job):
    events = attached_job["events"]
    start = events[0]
    assert isinstance(start, RunStart)
    assert (start.world_size, start.backend, start.mode) == (2, "gloo", "live")
    assert start.backend_reason == "attached to a running job: Flight Recorder sizes and states, no values"
    assert set(start.options) == {"untimed", "not_recorded"}
    assert sorted(e.rank for e in events if isinstance(e, RankStart)) == [0, 1]


def test_every_call_each_rank_completed_is_one_step_shown_once(attached_job):
    events = attached_job["events"]
    for rank in (0, 1):
        assert _ends(events, rank) == [(seq - 1, seq, *CALL) for seq in range(1, CALLS + 1)]
        phases = [(e.index, e.edge) for e in events if isinstance(e, Phase) and e.rank == rank]
        assert phases == [(step, edge) for step in range(CALLS) for edge in ("begin", "end")], "never re-emitted"
        assert [e.seq for e in events if e.rank == rank] == list(range(len([e for e in events if e.rank == rank])))
    names = {e.index: e.name for e in events if isinstance(e, Phase)}
    assert names == {seq - 1: f"all_reduce #{seq} on group 0 (default_pg)" for seq in range(1, CALLS + 1)}


def test_while_rank_1_stalls_rank_0_is_inside_the_next_call_and_a_stall_names_rank_1_at_its_line(attached_job):
    stalled = attached_job["stalled"]
    assert _ends(stalled, 0) == _ends(stalled, 1) == [(seq - 1, seq, *CALL) for seq in range(1, CALLS)]
    begun = [(e.rank, e.group_seq) for e in stalled if isinstance(e, Collective) and e.edge == "begin"]
    assert (0, CALLS) in begun and (1, CALLS) not in begun
    stalls = [e for e in attached_job["events"] if isinstance(e, Stall)]
    stall = stalls[0]
    assert stall == stalled[-1], "reported as soon as a second reading confirmed it"
    assert {(e.group, e.group_seq, e.op) for e in stalls} == {(stall.group, stall.group_seq, stall.op)}
    assert [e.waited_s for e in stalls] == sorted(e.waited_s for e in stalls), "again while it lasts, counting up"
    where = f"rank 1 is missing from the call, at job.py:{STALLED_LINE} in slow_data_loader"
    assert (stall.op, stall.group, stall.group_seq, stall.waiting, stall.elsewhere) == (
        "all_reduce", "0 (default_pg)", CALLS, [0], [where])
    assert stall.text.startswith(f"all_reduce #{CALLS} on group 0 (default_pg): rank 0 waiting ")
    assert stall.text.endswith(f" s; {where}")


def test_the_session_ends_ok_once_no_rank_answers(attached_job):
    assert attached_job["outcome"].status == "ok"
    ends = [e for e in attached_job["events"] if isinstance(e, RunEnd)]
    assert ends == [attached_job["events"][-1]] and ends[0].status == "ok"
    assert ends[0].detail == "the job ended: no rank's worker server answers any more (its exit status is its launcher's)"
    assert not any(isinstance(e, RankEnd) for e in attached_job["events"]), "no rank was silent while others answered"
    code, out, _ = attached_job["job"]
    assert code == 0 and sorted(out.split()) == ["0", "1", "finished", "finished"], "the job went on unharmed"


def test_the_recording_holds_the_same_events_and_replays_and_exports_the_same_calls(attached_job, tmp_path):
    trace = attached_job["trace"]
    assert read_trace(trace).events == attached_job["events"]
    replayed = run_cli("replay", "--headless", str(trace), timeout=DEADLINE_S)
    assert replayed.returncode == 0, replayed.stderr
    lines = replayed.stdout.splitlines()
    assert [line for line in lines if line.startswith("phase ")] == [
        f"phase {seq - 1}  all_reduce #{seq} on group 0 (default_pg)" for seq in range(1, CALLS + 1)]
    assert any(line.startswith("hang: all_reduce #6") and "slow_data_loader" in line for line in lines)
    out = tmp_path / "attached.json"
    exported = run_cli("export", "--perfetto", str(out), str(trace), timeout=DEADLINE_S)
    assert exported.returncode == 0, exported.stderr
    slices = [e for e in json.loads(out.read_text())["traceEvents"] if e.get("cat") == "collective"]
    pids = sorted({e["pid"] for e in slices})
    assert len(pids) == 2, "one process per rank"
    assert sorted((e["pid"], e["name"], e["args"]["group_seq"], e["args"]["bytes_in"]) for e in slices) == [
        (pid, "all_reduce", seq, TENSOR.nbytes) for pid in pids for seq in range(1, CALLS + 1)]


# ---- the session's rules, on hand-made answers ----------------------------------------------------

def _session(ask, **options) -> LiveSession:
    """A session on the two hand-made ranks answering through ``ask``, read every 10 ms."""
    return LiveSession(RecorderReader(WORKERS, ask=ask), pace=Pace(0.01, 0.01), **options)


def _poll_until(session: LiveSession, done, polls: int = 200) -> list:
    events: list = []
    for _ in range(polls):
        events.extend(session.poll(0.05))
        if done(events) or session.finished:
            return events
    raise AssertionError(f"never got there: {events[-3:]}")


def _readings(asked) -> int:
    return sum(handler == "fr_trace_json" for handler, _ in asked)


def test_a_rank_that_stops_answering_is_named_after_two_readings_while_the_other_still_answers():
    ask, asked = asking([{0: fr_answer(3, False), 1: fr_answer(3, False)}, {0: fr_answer(4, True), 1: None}])
    session = _session(ask)
    session.start()
    events = _poll_until(session, lambda found: any(isinstance(e, RankEnd) for e in found))
    [named] = [e for e in events if isinstance(e, RankEnd)]
    assert (named.rank, named.status) == (1, "error") and _readings(asked) == 3, "one answer, then two silences"
    assert named.error == "it stopped answering (no answer within 2 s): ended or stuck; no longer read"
    assert not session.finished, "rank 0 still answers: the job goes on"
    session.stop()
    assert session.outcome is not None and session.outcome.status == "interrupted"


def test_a_job_that_ends_while_ranks_wait_ends_the_session_failed_naming_the_wait(tmp_path):
    waiting = {0: fr_answer(4, True), 1: fr_answer(3, False)}  # rank 0 in all_reduce #4, rank 1 not yet
    ask, asked = asking([waiting, waiting, {0: None, 1: None}])
    session = _session(ask, record=tmp_path / "t.cvz")
    session.start()
    events = _poll_until(session, lambda found: session.finished)
    detail = "the job ended while rank 0 waited in all_reduce #4 on group 0 (default_pg) for rank 1"
    assert session.outcome == RunOutcome("failed", detail, 1)
    assert [(e.status, e.detail) for e in events if isinstance(e, RunEnd)] == [("failed", detail)]
    assert [e.group_seq for e in events if isinstance(e, Stall)] == [4], "the stall, confirmed while the job ran"
    assert [ranks for handler, ranks in asked if handler == "dump_traceback"] == [[1]], "no stack asked at the end"
    assert read_trace(tmp_path / "t.cvz").events == events


def test_calls_completed_between_two_readings_are_each_shown_once():
    ask, _ = asking([{0: fr_answer(2, False), 1: fr_answer(2, False)}, {0: fr_answer(9, False), 1: fr_answer(9, False)}])
    session = _session(ask)
    session.start()
    events = _poll_until(session, lambda found: len(_ends(found, 1)) >= 9)
    events += session.poll(0.05) + session.poll(0.05)  # later readings (the same answers) add nothing
    session.stop()
    for rank in (0, 1):
        assert [seq for _, seq, *_ in _ends(events, rank)] == list(range(1, 10))


def test_with_a_launcher_that_knows_the_job_silence_is_no_end_and_the_last_reading_follows_its_end(tmp_path):
    running = [True]
    ask, asked = asking([{0: None, 1: None}, {0: None, 1: None}, {0: fr_answer(2, False), 1: fr_answer(2, False)}])
    session = _session(ask, record=tmp_path / "t.cvz", running=lambda: running[0])
    session.start()
    events = _poll_until(session, lambda found: len(_ends(found, 1)) == 2)
    assert not session.finished and _readings(asked) == 3, "servers not up yet: not the job's end"
    running[0] = False
    events += _poll_until(session, lambda found: session.finished)
    assert session.outcome is not None and (session.outcome.status, session.outcome.detail) == ("ok", "the job has ended")
    assert _readings(asked) == 4 and not any(isinstance(e, RankEnd) for e in events)
    assert read_trace(tmp_path / "t.cvz").events == events


def test_stop_interrupts_and_leaves_the_trace_readable(tmp_path):
    ask, _ = asking([{0: fr_answer(3, True), 1: fr_answer(2, False)}])
    session = _session(ask, record=tmp_path / "t.cvz")
    session.start()
    events = _poll_until(session, lambda found: len(_ends(found, 1)) == 2)
    session.stop()
    session.stop()  # idempotent
    events += session.poll(0)
    assert isinstance(events[-1], RunEnd) and events[-1].status == "interrupted"
    assert read_trace(tmp_path / "t.cvz").events == events


def test_a_rank_that_never_answered_is_named_unless_a_launcher_says_the_job_is_still_starting():
    ask, _ = asking([{0: fr_answer(2, False), 1: None}])
    session = _session(ask)
    session.start()
    [named] = [e for e in _poll_until(session, lambda found: any(isinstance(e, RankEnd) for e in found))
               if isinstance(e, RankEnd)]
    assert named.rank == 1 and named.error.startswith("it never answered (no answer within 2 s)")
    session.stop()
    ask, asked = asking([{0: fr_answer(2, False), 1: None}])
    starting = _session(ask, running=lambda: True)
    starting.start()
    events = _poll_until(starting, lambda found: _readings(asked) >= 5)
    starting.stop()
    assert not any(isinstance(e, RankEnd) for e in events), "its server may not be up yet"


def test_a_lasting_waits_time_counts_up_at_every_reading_and_its_stack_is_read_once():
    """Rank 0 issued all_reduce #4 at 4,000 ns after the epoch (the hand-made answer's clock);
    readings at 100 s, 130 s and 190 s after it: the wait is confirmed at the second."""
    waiting = {0: fr_answer(4, True), 1: fr_answer(3, False)}
    ask, asked = asking([waiting] * 3)
    now = [0]
    sink = KeptEvents()
    reader = RecorderReader(WORKERS, ask=ask)
    feed = Feed(sink, "t", reader, now_ns=lambda: 4_000 + now[0] * 10**9)
    for after_s in (100, 130, 190):
        now[0] = after_s
        feed.take(reader.read())
    stalls = [e for e in sink.events if isinstance(e, Stall)]
    assert [(e.group_seq, e.waiting, round(e.waited_s)) for e in stalls] == [(4, [0], 130), (4, [0], 190)]
    assert stalls[-1].text.startswith("all_reduce #4 on group 0 (default_pg): rank 0 waiting 190 s; rank 1 is missing")
    assert [ranks for handler, ranks in asked if handler == "dump_traceback"] == [[1]]


def test_calls_a_rank_not_yet_answering_completed_are_shown_once_it_answers():
    ask, _ = asking([{0: fr_answer(3, False), 1: None}, {0: fr_answer(3, False), 1: fr_answer(3, False)}])
    session = _session(ask, running=lambda: True)
    session.start()
    events = _poll_until(session, lambda found: len(_ends(found, 1)) == 3)
    session.stop()
    assert [seq for _, seq, *_ in _ends(events, 0)] == [seq for _, seq, *_ in _ends(events, 1)] == [1, 2, 3]
