"""``collviz run`` read from Flight Recorder, live: the launcher reads its ranks' worker servers
while they run, so each call arrives as the ranks complete it, and a wait that outlasts
``--timeout`` ends the run, naming the missing rank and its line of code. Real 2-rank gloo runs,
each once for the module.

The expected calls are written out by hand from the scripts below: all_reduce of float32 tensors
(4 bytes an element), numbered from 1 in issue order on the world group.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from collviz.runtime.live.pace import Pace
from collviz.runtime.plan import plan_script
from collviz.runtime.sessions.local import LocalSession
from collviz.runtime.userjob.script import check_script
from collviz.runtime.wire.protocol import Collective, Phase, ProcessExit, Stall, RunEnd
from collviz.runtime.wire.trace import read_trace

from collviz.runtime.live.workers import Answer, Worker

from support.fr_dumps import T0, dump, entry
from support.killed_job import KILLED_SCRIPT

PACED = textwrap.dedent('''
    import os
    import sys
    import time
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    for call, count in enumerate((3, 5, 7), start=1):
        dist.all_reduce(torch.ones(count))
        deadline = time.monotonic() + 300
        while call < 3 and not os.path.exists(f"{sys.argv[1]}-{call}") and time.monotonic() < deadline:
            time.sleep(0.05)
''')
"""Three calls; after each of the first two the ranks wait until the file named by the argument
and the call's number exists, which the poller makes once it has read that call from both ranks:
live, however slow the machine."""

PACED_CALLS = [("all_reduce", 1, 12), ("all_reduce", 2, 20), ("all_reduce", 3, 28)]

HANG = textwrap.dedent('''
    import time
    import torch
    import torch.distributed as dist


    def slow_loader():
        print("stalling", flush=True)
        time.sleep(120)


    dist.init_process_group("gloo")
    dist.all_reduce(torch.ones(4))
    if dist.get_rank() == 1:
        slow_loader()
    dist.all_reduce(torch.ones(8))
''')
HANG_LINE = HANG.splitlines().index("    time.sleep(120)") + 1
"""The line of the script rank 1 sleeps on (the script's first line is line 1)."""

TIMEOUT_S = 3
DEADLINE_S = 120


def _paced(folder: Path) -> list[tuple[object, bool]]:
    """The paced script's session, polled to its end: each event, and whether it was polled before
    any rank's process had exited (no ProcessExit polled yet)."""
    script, go = folder / "paced.py", folder / "go"
    script.write_text(PACED)
    session = LocalSession(plan_script(check_script(script, [str(go)]), 2, observe=False), pace=Pace(0.2, 0.2))
    session.start()
    polled: list[tuple[object, bool]] = []
    ended: dict[int, set[int]] = {}  # call number → the ranks whose end of it was polled
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not session.finished and time.monotonic() < deadline:
            for event in session.poll(0.05):
                polled.append((event, not any(isinstance(e, ProcessExit) for e, _ in polled)))
                if isinstance(event, Collective) and event.edge == "end":
                    ended.setdefault(event.group_seq, set()).add(event.rank)
                    if ended[event.group_seq] == {0, 1}:
                        Path(f"{go}-{event.group_seq}").touch()  # both ranks' end read: the ranks go on
    finally:
        session.stop()
    return polled


def _hang(folder: Path) -> dict:
    """``collviz run --nproc 2 --headless --timeout 3`` of the hanging script: how long after rank 1
    began to stall the run ended, its exit status, output and trace."""
    script, trace = folder / "hang.py", folder / "hang.cvz"
    script.write_text(HANG)
    process = subprocess.Popen([sys.executable, "-m", "collviz.app.cli", "run", "--nproc", "2", "--headless",
                                "--timeout", str(TIMEOUT_S), "--record", str(trace), str(script)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    try:
        seen = ""
        deadline = time.monotonic() + DEADLINE_S
        while "stalling" not in seen and time.monotonic() < deadline:
            seen += process.stdout.readline()
        stalled = time.monotonic()
        out, err = process.communicate(timeout=DEADLINE_S)
        took = time.monotonic() - stalled
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return {"code": process.returncode, "took": took, "stdout": seen + out, "stderr": err,
            "events": read_trace(trace).events if trace.exists() else []}


@pytest.fixture(scope="module")
def live_runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The paced script polled in this process, and the hanging one run by the command."""
    folder = tmp_path_factory.mktemp("run_live")
    return {"paced": _paced(folder), "hang": _hang(folder)}


def test_each_call_arrives_while_the_ranks_still_run(live_runs):
    polled = live_runs["paced"]
    ends = [(e.rank, e.group_seq) for e, alive in polled if isinstance(e, Collective) and e.edge == "end" and alive]
    for seq in (1, 2):  # the ranks wait after each until it was read: read live, before they exit
        assert {(0, seq), (1, seq)} <= set(ends), ends
    assert next(e for e, _ in polled if isinstance(e, RunEnd)).status == "ok"


def test_no_call_is_shown_twice_and_each_ranks_events_are_numbered_without_gaps(live_runs):
    events = [e for e, _ in live_runs["paced"]]
    for rank in (0, 1):
        seqs = [e.seq for e in events if e.rank == rank]
        assert seqs == list(range(len(seqs))), (rank, seqs)
        for edge in ("begin", "end"):
            calls = [(e.op, e.group_seq, e.bytes_in) for e in events
                     if isinstance(e, Collective) and e.rank == rank and e.edge == edge]
            assert calls == PACED_CALLS, (rank, edge)
    steps = {(e.rank, e.index) for e in events if isinstance(e, Phase) and e.edge == "begin"}
    assert steps == {(rank, index) for rank in (0, 1) for index in range(3)}, "one step per call, on each rank"


def test_a_wait_past_the_timeout_ends_the_run_naming_the_missing_rank_and_its_line(live_runs):
    run = live_runs["hang"]
    assert run["code"] == 1, run["stderr"]
    assert run["took"] < TIMEOUT_S + 6, "the hang is reported soon after it outlasts --timeout, then torn down"
    where = f"rank 1 is missing from the call, at hang.py:{HANG_LINE} in slow_loader"
    cause = next(line for line in run["stderr"].splitlines() if line.startswith("collviz: hang: "))
    assert cause.startswith("collviz: hang: all_reduce #2 on group 0") and where in cause
    stall = next(e for e in run["events"] if isinstance(e, Stall))
    assert (stall.op, stall.group_seq, stall.waiting, stall.elsewhere) == ("all_reduce", 2, [0], [where])
    assert stall.waited_s >= TIMEOUT_S
    assert next(e for e in run["events"] if isinstance(e, RunEnd)).status == "failed"
    assert "hang: all_reduce #2" in run["stdout"], "the summary says so"


def test_a_rank_still_inside_the_call_it_was_inside_a_status_before_may_wait():
    from collviz.runtime.sessions.recorder_live import stuck

    def status(enqueued: int, completed: int) -> dict:
        return {"0": {"last_enqueued_collective": enqueued, "last_started_collective": enqueued,
                      "last_completed_collective": completed}}

    assert stuck({0: status(5, 4), 1: status(5, 5)}, {0: status(5, 4), 1: status(6, 6)}), "rank 0 still inside #5"
    assert not stuck({0: status(5, 4)}, {0: status(9, 8)}), "it completed calls since: its calls flow"
    assert not stuck({0: status(5, 5)}, {0: status(5, 5)}), "in no call: nothing to wait in"
    assert not stuck({}, {0: status(5, 4)}), "one status says nothing yet"


WORLD_GROUP = ("0", "default_pg")


def _gloo_dump(calls: list[tuple[int, str, tuple[str, str], bool]]) -> bytes:
    """A rank's recorder (:mod:`support.fr_dumps`, as gloo's reads): ``calls`` as (sequence number,
    op, group, retired), in the order made. gloo's ``pg_config`` names the world, never a subgroup."""
    return json.dumps(dump([entry(seq, op, group=group, done=done, record_id=made, profiling_name=f"gloo:{op}",
                                  time_created_ns=T0 + made)
                            for made, (seq, op, group, done) in enumerate(calls)])).encode()


def _closed_after_dump(monkeypatch: pytest.MonkeyPatch, folder: Path, served: dict[int, bytes | Answer], dumped: dict[int, bytes]):
    """A LiveRecorder of 4 ranks in ``folder`` whose servers answer ``served`` (rank → its recorder,
    or the answer its server gives, read at each request: a test may change it; NCCL's handler:
    404), the others refusing, those of ``dumped`` having written that dump."""
    import math

    from collviz.runtime.live.recorder_reader import RECORDERS, Launched
    from collviz.runtime.sessions import recorder_live
    from collviz.runtime.sessions.intake import Intake
    from collviz.runtime.sessions.recorded import RecorderDumps
    from collviz.runtime.userjob.recorder import dump_path

    def servers(workers: list[Worker], handler: str, timeout_s: float) -> dict[int, Answer]:
        return {w.rank: Answer(w.rank, None, "no worker server there (its rank ended, or has not started)")
                if w.rank not in served else served[w.rank] if isinstance(served[w.rank], Answer)
                else Answer(w.rank, served[w.rank], status=200) if handler == RECORDERS[0]
                else Answer(w.rank, None, f"{handler} answered 404", status=404) for w in workers}

    monkeypatch.setattr(recorder_live, "ask_all", servers)
    dumps = RecorderDumps(str(folder), 4)
    dumps.after_forks()
    for rank, content in dumped.items():
        dump_path(folder, rank).write_bytes(content)
    intake = Intake(None, math.inf, "run")
    return recorder_live.LiveRecorder(intake, "run", dumps, Launched({}, "node"), recorder_live.UNWATCHED, 60.0, 0), intake


def _pair_shapes(rank: int) -> bytes:
    """Rank ``rank``'s recorder: the world's all_reduce #1, its pair's all_gather #1 (ranks 0, 1 on
    group ``1``; 2, 3 on ``2``), the world's all_reduce #2, each retired."""
    pair = ("1", "undefined") if rank < 2 else ("2", "undefined")
    return _gloo_dump([(1, "all_reduce", WORLD_GROUP, True), (1, "all_gather", pair, True),
                       (2, "all_reduce", WORLD_GROUP, True)])


def test_a_rank_whose_server_closed_after_its_last_dump_is_read_from_that_dump(monkeypatch, tmp_path):
    """Rank 0 wrote its last dump and closed its server; the launcher has not seen its process end
    yet. Read then as no rank, its pair would be taken as rank 1 alone (gloo's dumps do not name a
    pair's members: they are the ranks whose dumps mention it) and its call shown on group ``(1,)``."""
    live, _ = _closed_after_dump(monkeypatch, tmp_path, {rank: _pair_shapes(rank) for rank in (1, 2, 3)},
                                 {0: _pair_shapes(0)})
    reading = live.reader.read()
    assert reading.answered == [0, 1, 2, 3]
    assert {c.rank: tuple(c.group_ranks) for c in reading.calls if c.op == "all_gather"} == {
        0: (0, 1), 1: (0, 1), 2: (2, 3), 3: (2, 3)}
    assert live.reader.warnings == [
        "group 1: its ranks are not in the dumps' pg_config; taken as the ranks whose dumps mention it: 0, 1",
        "group 2: its ranks are not in the dumps' pg_config; taken as the ranks whose dumps mention it: 2, 3"]


@pytest.mark.parametrize("slow_handler", ["fr_trace_json", "dump_nccl_trace_json"])
def test_a_pair_is_not_guessed_while_a_rank_is_slow_to_answer(slow_handler):
    """Rank 0's server is slow (no whole answer within the deadline) at the first readings, to its
    Flight Recorder or to NCCL's: group 1 would be guessed as rank 1 alone, so neither pair's calls
    are shown (rank 0 may be in either); at the next reading, rank 0 answering, both pairs are read
    whole. Said once however many readings."""
    from collviz.runtime.live.recorder_reader import RECORDERS, RecorderReader

    slow = {0}

    def servers(workers, handler: str, timeout_s: float) -> dict[int, Answer]:
        return {w.rank: Answer(w.rank, None, "slow: no whole answer within 2 s", slow=True)
                if w.rank in slow and handler == slow_handler
                else Answer(w.rank, _pair_shapes(w.rank), status=200) if handler == RECORDERS[0]
                else Answer(w.rank, None, f"{handler} answered 404", status=404) for w in workers}

    reader = RecorderReader([Worker(rank, f"rank{rank}.sock") for rank in range(4)], ask=servers)
    for _ in range(2):
        reading = reader.read()
        assert reading.answered == [1, 2, 3] and reading.ranks[0].slow
        assert sorted((c.op, c.group_seq, c.rank) for c in reading.calls) == [
            ("all_reduce", seq, rank) for seq in (1, 2) for rank in (1, 2, 3)], "the world's calls alone"
    withheld = ("rank 0 not read (slow: no whole answer within 2 s): group {}'s ranks, not in the dumps' pg_config, "
                "are not guessed from the other ranks; its calls are shown once every rank is read")
    assert reader.warnings == [withheld.format(1), withheld.format(2)]
    slow.clear()
    reading = reader.read()
    assert {c.rank: tuple(c.group_ranks) for c in reading.calls if c.op == "all_gather"} == {
        0: (0, 1), 1: (0, 1), 2: (2, 3), 3: (2, 3)}


NOT_READ = {
    "refusing": Answer(0, None, "no worker server there (its rank ended, or has not started)"),
    "reset": Answer(0, None, "ConnectionResetError: [Errno 104] Connection reset by peer"),
    "cut short": Answer(0, _pair_shapes(0)[:60], status=200),
    "server error": Answer(0, None, "fr_trace_json answered 500: handler failed", status=500),
}
"""Rank 0's server's answers that are no reading of it, none of them slow: refusing (not started
yet, or its socket removed), the connection reset as the rank ends, an answer cut short (the
process gone mid-answer), an error of its handler."""

HELD_BACK = ("rank 0 not read ({}): group {}'s ranks, not in the dumps' pg_config, are not guessed from the other "
             "ranks; its calls are shown once every rank is read")


@pytest.mark.parametrize("kind", sorted(NOT_READ))
def test_a_pair_is_not_guessed_while_a_rank_is_not_read_for_any_reason(kind):
    """Not only a slow rank: whatever keeps rank 0 from being read, neither pair's calls are shown
    (group 1 would be guessed as rank 1 alone), said once; read at the next reading, both pairs
    are read whole."""
    from collviz.runtime.live.recorder_reader import RECORDERS, RecorderReader

    unread = {0}

    def servers(workers, handler: str, timeout_s: float) -> dict[int, Answer]:
        return {w.rank: NOT_READ[kind] if w.rank in unread and handler == RECORDERS[0]
                else Answer(w.rank, _pair_shapes(w.rank), status=200) if handler == RECORDERS[0]
                else Answer(w.rank, None, f"{handler} answered 404", status=404) for w in workers}

    reader = RecorderReader([Worker(rank, f"rank{rank}.sock") for rank in range(4)], ask=servers)
    for _ in range(2):
        reading = reader.read()
        assert reading.answered == [1, 2, 3] and not reading.ranks[0].slow
        assert sorted((c.op, c.group_seq, c.rank) for c in reading.calls) == [
            ("all_reduce", seq, rank) for seq in (1, 2) for rank in (1, 2, 3)], "the world's calls alone"
    why = reading.ranks[0].error
    assert why.startswith("its fr_trace_json answer is not JSON") if kind == "cut short" else why == NOT_READ[kind].error
    assert reader.warnings == [HELD_BACK.format(why, 1), HELD_BACK.format(why, 2)]
    unread.clear()
    reading = reader.read()
    assert {c.rank: tuple(c.group_ranks) for c in reading.calls if c.op == "all_gather"} == {
        0: (0, 1), 1: (0, 1), 2: (2, 3), 3: (2, 3)}


def test_a_pair_is_not_guessed_while_a_rank_of_the_job_has_no_server_read():
    """Attach found the sockets of ranks 1–3 alone (rank 0's not made yet); the dumps' world is
    ranks 0–3: rank 0 is not read though never asked, and neither pair's calls are shown."""
    from collviz.runtime.live.recorder_reader import RECORDERS, RecorderReader
    from collviz.runtime.sources.flight_recorder import UNLISTED

    def servers(workers, handler: str, timeout_s: float) -> dict[int, Answer]:
        return {w.rank: Answer(w.rank, _pair_shapes(w.rank), status=200) if handler == RECORDERS[0]
                else Answer(w.rank, None, f"{handler} answered 404", status=404) for w in workers}

    reader = RecorderReader([Worker(rank, f"rank{rank}.sock") for rank in (1, 2, 3)], ask=servers)
    reading = reader.read()
    assert reading.answered == [1, 2, 3] and reading.world_size == 4
    assert sorted((c.op, c.group_seq, c.rank) for c in reading.calls) == [
        ("all_reduce", seq, rank) for seq in (1, 2) for rank in (1, 2, 3)], "the world's calls alone"
    assert reader.warnings == [HELD_BACK.format(UNLISTED, 1), HELD_BACK.format(UNLISTED, 2)]


def test_a_pair_waits_for_a_rank_whose_server_has_not_started_yet(monkeypatch, tmp_path):
    """``collviz run``: rank 0's server refuses (not started yet) and it has written no dump: not a
    rank that ended, so its pair's calls wait for it rather than being shown on rank 1 alone."""
    served = {rank: _pair_shapes(rank) for rank in (1, 2, 3)}
    live, _ = _closed_after_dump(monkeypatch, tmp_path, served, {})
    reading = live.reader.read()
    assert reading.answered == [1, 2, 3]
    assert [c for c in reading.calls if c.op == "all_gather"] == []
    served[0] = _pair_shapes(0)
    reading = live.reader.read()
    assert {c.rank: tuple(c.group_ranks) for c in reading.calls if c.op == "all_gather"} == {
        0: (0, 1), 1: (0, 1), 2: (2, 3), 3: (2, 3)}


def test_a_slow_rank_is_never_read_from_a_dump_it_wrote_on_request(monkeypatch, tmp_path):
    """Rank 0 dumped when the launcher asked (all_reduce #1 alone), then went on to its pair's call;
    its server is slow once. Alive, it is not read from that dump (which would make its pair rank 1
    alone), then or ever after: its pair waits, and is read whole from its server next time."""
    served: dict[int, bytes | Answer] = {rank: _pair_shapes(rank) for rank in (1, 2, 3)}
    served[0] = Answer(0, None, "slow: no whole answer within 2 s", slow=True)
    live, _ = _closed_after_dump(monkeypatch, tmp_path, served, {0: _gloo_dump([(1, "all_reduce", WORLD_GROUP, True)])})
    reading = live.reader.read()
    assert reading.answered == [1, 2, 3] and [c for c in reading.calls if c.op == "all_gather"] == []
    served[0] = _pair_shapes(0)
    reading = live.reader.read()
    assert {c.rank: tuple(c.group_ranks) for c in reading.calls if c.op == "all_gather"} == {
        0: (0, 1), 1: (0, 1), 2: (2, 3), 3: (2, 3)}


def test_a_rank_that_ended_without_a_dump_is_missing_as_in_an_import(monkeypatch, tmp_path):
    """Rank 0 exited without a dump: it is never read, so nothing is held back for it; its pair is
    the ranks whose dumps mention it (rank 1), said as an import of dumps says it."""
    live, _ = _closed_after_dump(monkeypatch, tmp_path, {rank: _pair_shapes(rank) for rank in (1, 2, 3)}, {})
    live.exited(0)
    reading = live.reader.read()
    assert reading.answered == [1, 2, 3] and reading.ranks[0].ended
    assert {c.rank: tuple(c.group_ranks) for c in reading.calls if c.op == "all_gather"} == {
        1: (1,), 2: (2, 3), 3: (2, 3)}
    assert live.reader.warnings == [
        "group 1: its ranks are not in the dumps' pg_config; taken as the ranks whose dumps mention it: 1",
        "group 2: its ranks are not in the dumps' pg_config; taken as the ranks whose dumps mention it: 2, 3"]


def test_the_last_reading_reads_every_rank_from_its_dump(monkeypatch, tmp_path):
    """Every rank has ended, rank 0's exit not reaped yet and a stale answer (all_reduce #1 alone)
    still served for it: the last reading reads rank 0 from its dump, which holds its pair's call."""
    served = {rank: _pair_shapes(rank) for rank in range(4)}
    served[0] = _gloo_dump([(1, "all_reduce", WORLD_GROUP, True)])
    live, _ = _closed_after_dump(monkeypatch, tmp_path, served, {rank: _pair_shapes(rank) for rank in range(4)})
    for rank in (1, 2, 3):
        live.exited(rank)
    events, _ = live.end({})
    begins = [e for e in events if isinstance(e, Collective) and e.edge == "begin" and e.op == "all_gather"]
    assert {e.rank: tuple(e.group_ranks) for e in begins} == {0: (0, 1), 1: (0, 1), 2: (2, 3), 3: (2, 3)}


def test_the_groups_status_is_read_only_once_the_working_ranks_have_paid_for_it(monkeypatch, tmp_path):
    """Due by the clock, the status is still not read while the ranks' own CPU owes for it."""
    from collviz.runtime.sessions import recorder_live
    from collviz.runtime.userjob.recorder import STATUS_HANDLER

    class Owing:
        """A meter that owes what the test sets, counting the requests made."""

        def __init__(self) -> None:
            self.owed, self.requests = 5.0, 0

        def owed_s(self) -> float:
            return self.owed

        def asked(self) -> None:
            self.requests += 1

    owing = Owing()
    monkeypatch.setattr(recorder_live, "OwnCpuPace", lambda pids, cpu_s: owing)
    live, _ = _closed_after_dump(monkeypatch, tmp_path, {rank: _pair_shapes(rank) for rank in range(4)}, {})
    served, handlers = recorder_live.ask_all, []
    monkeypatch.setattr(recorder_live, "ask_all", lambda workers, handler, timeout_s: (
        handlers.append(handler), served(workers, handler, timeout_s))[1])
    assert not live._may_wait() and handlers == [] and owing.requests == 0
    owing.owed = 0.0
    live._may_wait()
    assert handlers == [STATUS_HANDLER] and owing.requests == 1


def test_the_last_look_blames_no_rank_whose_end_is_not_known_yet(monkeypatch, tmp_path):
    """Rank 1 raised after all_reduce #2 and wrote its dump; rank 0's error (its peer gone) ends the
    run before rank 1's is known: ranks 0, 2, 3 inside #3 wait for rank 1, which is no hang."""
    inside = _gloo_dump([(1, "all_reduce", WORLD_GROUP, True), (2, "all_reduce", WORLD_GROUP, True),
                         (3, "all_reduce", WORLD_GROUP, False)])
    raised = _gloo_dump([(1, "all_reduce", WORLD_GROUP, True), (2, "all_reduce", WORLD_GROUP, True)])
    live, intake = _closed_after_dump(monkeypatch, tmp_path, {0: inside, 2: inside, 3: inside}, {1: raised})
    live.last_look(failed=[0])
    assert [e for e in intake.take_pending() if isinstance(e, Stall)] == []


def _exited_unreaped(pids: list[int]) -> bool:
    """Whether every process of ``pids`` has exited, none reaped (``WNOWAIT``: the session reaps them)."""
    return all(os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None for pid in pids)


def test_a_killed_rank_whose_peers_fail_before_the_launcher_looks_is_the_cause(tmp_path):
    """Every rank has exited before the launcher's first poll (it was busy: a reading waits up to
    2 s for a slow server): rank 3 killed by SIGKILL, ranks 0–2 with status 1 from the all_reduce
    it never joined. Each exit is noted before the failure is judged, so rank 3 was not reaped
    "after the teardown began" (a casualty of rank 0's failure) but is the run's cause."""
    script = tmp_path / "killed.py"
    script.write_text(KILLED_SCRIPT)
    session = LocalSession(plan_script(check_script(script), 4, observe=False))
    session.start()
    polled = []
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not _exited_unreaped(list(session.pids.values())):
            assert time.monotonic() < deadline, "the ranks did not all exit"
            time.sleep(0.05)
        while not session.finished and time.monotonic() < deadline:
            polled += session.poll(0.05)
    finally:
        session.stop()
    assert session.outcome is not None and session.outcome.exit_code == 1
    assert session.outcome.detail.startswith("rank 3 was killed by SIGKILL"), session.outcome.detail
    assert {e.target: (e.exit_code, e.signal) for e in polled if isinstance(e, ProcessExit)} == {
        0: (1, None), 1: (1, None), 2: (1, None), 3: (None, "SIGKILL")}
    assert not [e for e in polled if isinstance(e, Stall)], "no rank was waited on: rank 3 died"
