"""``collviz attach TARGET --headless``: a user's own job under plain torchrun, its ranks' worker
servers opened both with torch's ``worker_main`` (Unix sockets) and ``start_debug_server()``
(TCP, addresses in the job's store), read both ways while one rank stalls in its own function and
the other waits in all_reduce (the session fixture ``attached_job``, the job of
``support.attach_job``); and the snapshot's rules on hand-made answers.

Expected lines are written from the job script (its calls and its own line numbers).
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from pathlib import Path

import pytest

from collviz.app.cli import main
from collviz.runtime.live.reading import End
from collviz.runtime.live.recorder_reader import RecorderReader
from collviz.runtime.live.snapshot import take_snapshot
from collviz.runtime.live.stacks import user_stack_line
from collviz.runtime.live.workers import Worker, ask_all, find_sockets

from support.attach_job import DEADLINE_S, EMPTY_RECORDER, STACK, STALLED_LINE, WORKERS, asking, fr_answer
from support.cli import run_cli


def test_attach_names_the_stalled_rank_and_its_own_function(attached_job):
    attached = attached_job["attach"]
    assert attached.returncode == 1, attached.stderr
    assert attached.stdout.splitlines() == [
        f"collviz attach: the worker servers of 2 ranks at {attached_job['folder']}",
        "rank 0: last completed all_reduce #5 on group 0 (default_pg); now in all_reduce #6 on group 0 (default_pg)",
        "rank 1: last completed all_reduce #5 on group 0 (default_pg); in no collective",
        "waiting: all_reduce #6 on group 0 (default_pg): rank 0 waits for rank 1",
        f"  rank 1 is missing from the call, at job.py:{STALLED_LINE} in slow_data_loader",
    ]


def test_attach_through_the_debug_servers_store_says_the_same(attached_job):
    store, attached = attached_job["store"]
    assert attached.returncode == 1, attached.stderr
    lines = attached.stdout.splitlines()
    assert lines[0] == f"collviz attach: the worker servers of 2 ranks at {store}"
    host = socket.gethostname()  # each rank registers http://{its hostname}:PORT in the store, as torch does
    by_socket = attached_job["attach"].stdout.splitlines()[1:]
    assert lines[1:] == [re.sub(r"^rank (\d+):", rf"rank \1 on {host}:", line) for line in by_socket]


STALLED_DOCUMENT = {
    "ranks": [
        {"rank": 0, "last_completed": "all_reduce #5 on group 0 (default_pg)",
         "current": "all_reduce #6 on group 0 (default_pg)", "waiting_in": "all_reduce #6 on group 0 (default_pg)",
         "waiting_for": [1], "missing_from": None, "stack": None},
        {"rank": 1, "last_completed": "all_reduce #5 on group 0 (default_pg)", "current": None, "waiting_in": None,
         "waiting_for": [], "missing_from": "all_reduce #6 on group 0 (default_pg)",
         "stack": f"job.py:{STALLED_LINE} in slow_data_loader"}],
    "waits": [{"call": "all_reduce #6 on group 0 (default_pg)", "waiting": [0], "missing": [1],
               "stacks": {"1": f"job.py:{STALLED_LINE} in slow_data_loader"}}],
    "missing": [1], "not_read": [], "in_step": False, "exit_status": 1, "warnings": []}


def test_attach_json_is_one_document_of_the_same_snapshot(attached_job):
    attached = attached_job["json"]
    assert attached.returncode == 1, attached.stderr
    assert json.loads(attached.stdout) == STALLED_DOCUMENT


def test_watch_prints_a_snapshot_only_when_it_changes(attached_job):
    watched = attached_job["watch"]
    assert watched.returncode == 1, watched.stderr
    documents = [json.loads(line) for line in watched.stdout.splitlines()]
    next_s = [document.pop("next_reading_s") for document in documents]
    assert documents == [STALLED_DOCUMENT], \
        "three readings of the same stall: the first two confirm it, the third changes nothing"
    assert 0 < next_s[0] <= 1.0, "both ranks idle (one waits, one sleeps): a stall is read at --interval's pace"


def test_the_job_goes_on_unharmed(attached_job):
    code, out, err = attached_job["job"]
    assert code == 0, err[-2000:]
    assert sorted(line for line in out.splitlines() if line.startswith("finished")) == ["finished 0", "finished 1"]


# ---- the snapshot's rules, on hand-made answers ---------------------------------------------------


def _reader(ask) -> RecorderReader:
    """The two hand-made ranks, read as a snapshot reads them (the tail only)."""
    return RecorderReader(WORKERS, ask=ask, from_first=False)


def test_ranks_in_step_exit_0_after_one_reading():
    ask, asked = asking([{0: fr_answer(3, False), 1: fr_answer(3, False)}])
    snapshot = take_snapshot(_reader(ask), sleep=lambda s: None)
    assert snapshot.exit_status == 0
    assert asked == [("fr_trace_json", [0, 1]), ("dump_nccl_trace_json", [0, 1])]
    assert snapshot.text().splitlines()[-1] == "every rank is in step"


def test_a_wait_seen_once_is_a_call_in_flight_not_a_wait():
    ask, asked = asking([{0: fr_answer(4, True), 1: fr_answer(3, False)}, {0: fr_answer(4, False), 1: fr_answer(4, False)}])
    slept: list[float] = []
    snapshot = take_snapshot(_reader(ask), 1.5, sleep=slept.append)
    assert slept == [1.5] and snapshot.exit_status == 0 and snapshot.waits == []


def test_a_lasting_wait_asks_only_the_missing_rank_for_its_stack():
    reading = {0: fr_answer(4, True), 1: fr_answer(3, False)}
    ask, asked = asking([reading, reading])
    snapshot = take_snapshot(_reader(ask), sleep=lambda s: None)
    assert snapshot.exit_status == 1
    assert asked[-1] == ("dump_traceback", [1])
    assert snapshot.text().splitlines()[-1] == "  rank 1 is missing from the call, at train.py:16 in step, inside " \
                                               "all_reduce (distributed_c10d.py:3252)"


def test_an_nccl_jobs_calls_come_from_nccls_own_recorder():
    reading = {0: fr_answer(4, True, "nccl"), 1: fr_answer(3, False, "nccl")}
    ask, asked = asking([reading, reading], recorder="dump_nccl_trace_json")
    snapshot = take_snapshot(_reader(ask), sleep=lambda s: None)
    assert snapshot.exit_status == 1
    assert snapshot.text().splitlines()[:3] == [
        "rank 0: last completed all_reduce #3 on group 0 (default_pg); now in all_reduce #4 on group 0 (default_pg)",
        "rank 1: last completed all_reduce #3 on group 0 (default_pg); in no collective",
        "waiting: all_reduce #4 on group 0 (default_pg): rank 0 waits for rank 1"]


def _recorder_answer(backend: str, done: int, calls: int, ranks: str = "[0, 1, 2, 3]") -> bytes:
    """One recorder's answer: ``calls`` all_reduces of 4 float32 on the default group, named by
    ``backend``, the first ``done`` retired; call #k made at k µs (NCCL's 0.5 µs later)."""
    later = 500 if backend == "nccl" else 0
    entries = [{"collective_seq_id": seq, "profiling_name": f"{backend}:all_reduce", "process_group": ["0", "default_pg"],
                "input_sizes": [[4]], "output_sizes": [[4]], "input_dtypes": ["Float"], "output_dtypes": ["Float"],
                "time_created_ns": 1000 * seq + later, "retired": seq <= done, "state": "scheduled", "is_p2p": False}
               for seq in range(1, calls + 1)]
    return json.dumps({"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": ranks}},
                       "pg_status": {}, "entries": entries}).encode()


def test_a_group_of_two_backends_is_read_as_two_numberings():
    # a group made with "cpu:gloo,cuda:nccl": on every rank gloo's recorder holds all_reduce #1-#5 (made at
    # 1-5 µs), all done; NCCL's holds #1-#3 (made at 1.5-3.5 µs), where ranks 0, 2 and 3 wait in #3 for
    # rank 1, which made #1-#2 only; each rank's last call completed is gloo's #5, the latest made
    from collviz.runtime.live.workers import Answer

    workers = [Worker(rank, f"rank{rank}.sock") for rank in range(4)]
    bodies = {"fr_trace_json": {rank: _recorder_answer("gloo", 5, 5) for rank in range(4)},
              "dump_nccl_trace_json": {rank: _recorder_answer("nccl", 2, 2 if rank == 1 else 3) for rank in range(4)}}

    def ask(asked, handler, timeout_s):
        if handler == "dump_traceback":
            return {w.rank: Answer(w.rank, STACK.encode(), status=200) for w in asked}
        return {w.rank: Answer(w.rank, bodies[handler][w.rank], status=200) for w in asked}

    snapshot = take_snapshot(RecorderReader(workers, ask=ask, from_first=False), sleep=lambda s: None)
    gloo, nccl = "group 0 (default_pg) on gloo", "group 0 (default_pg) on nccl"
    assert snapshot.text().splitlines()[:6] == [
        f"rank 0: last completed all_reduce #5 on {gloo}; now in all_reduce #3 on {nccl}",
        f"rank 1: last completed all_reduce #5 on {gloo}; in no collective",
        f"rank 2: last completed all_reduce #5 on {gloo}; now in all_reduce #3 on {nccl}",
        f"rank 3: last completed all_reduce #5 on {gloo}; now in all_reduce #3 on {nccl}",
        f"waiting: all_reduce #3 on {nccl}: ranks 0, 2, 3 wait for rank 1",
        "  rank 1 is missing from the call, at train.py:16 in step, inside all_reduce (distributed_c10d.py:3252)"]


def test_a_rank_that_does_not_answer_is_named_and_the_status_is_1():
    ask, _ = asking([{0: fr_answer(3, False), 1: None}])
    snapshot = take_snapshot(_reader(ask), sleep=lambda s: None)
    assert snapshot.exit_status == 1
    assert "rank 1: not read: no answer within 2 s" in snapshot.text().splitlines()


def test_the_stack_line_is_the_scripts_own_frame_in_the_thread_running_it():
    other_thread = 'Thread 0x1 (most recent call first):\n  File "/home/me/loader.py", line 5 in fetch\n\n'
    assert user_stack_line(other_thread + STACK) == "train.py:16 in step, inside all_reduce (distributed_c10d.py:3252)"
    assert user_stack_line('Thread 0x2 (most recent call first):\n  File "/home/me/a.py", line 3 in <module>\n') == \
        "a.py:3 in <module>"
    assert user_stack_line("Current thread 0x3 (most recent call first):\n  <no Python frame>\n") == ""


# ---- finding the servers, and bounds ---------------------------------------------------------------


def _listening(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    return server


def test_a_server_that_never_answers_is_given_up_after_the_timeout(tmp_path):
    server = _listening(tmp_path / "rank0.sock")
    try:
        start = time.monotonic()
        answers = ask_all(find_sockets(str(tmp_path)), "fr_trace_json", timeout_s=1.0)
        took = time.monotonic() - start
    finally:
        server.close()
    assert answers[0].body is None and answers[0].slow and answers[0].error == "slow: no whole answer within 1 s"
    assert took < 3.0


def test_sockets_are_found_by_folder_glob_or_path_and_ranked_by_name(tmp_path):
    servers = [_listening(tmp_path / name) for name in ("rank1.sock", "rank0.sock")]
    (tmp_path / "rank2.sock.txt").write_text("not a socket")
    try:
        assert [(w.rank, w.path.name) for w in find_sockets(str(tmp_path))] == [(0, "rank0.sock"), (1, "rank1.sock")]
        assert [w.rank for w in find_sockets(str(tmp_path / "rank*.sock"))] == [0, 1]
        assert [w.rank for w in find_sockets(str(tmp_path / "rank1.sock"))] == [1]
    finally:
        for server in servers:
            server.close()


@pytest.mark.parametrize("names, expected", [
    ((), "no Unix socket there"),
    (("server.sock",), "its name does not end with its rank"),
    (("a1.sock", "b1.sock"), "both name rank 1"),
])
def test_bad_targets_are_one_line_and_exit_2(tmp_path, capsys, names, expected):
    servers = [_listening(tmp_path / name) for name in names]
    try:
        assert main(["attach", "--headless", str(tmp_path)]) == 2
    finally:
        for server in servers:
            server.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("collviz: error: ") and expected in err


@pytest.mark.parametrize("options, expected", [
    (["--count", "3"], "--count counts the readings of --watch"),
    (["--watch", "--count", "0"], "--count 0: must be between 1 and"),
    (["--watch", "--slowest", "nan"], "--slowest nan: must be a number of seconds"),
])
def test_watch_options_out_of_range_are_one_line_and_exit_2(tmp_path, capsys, options, expected):
    assert main(["attach", "--headless", *options, str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("collviz: error: ") and expected in err


def test_on_a_terminal_attach_opens_the_viewer_on_an_attached_session(tmp_path, capsys, monkeypatch):
    import collviz.app.app as viewer
    import collviz.app.commands.attach as attach_command
    from collviz.runtime.live.recorder_reader import RecorderReader
    from collviz.runtime.sessions.live import LiveSession
    from collviz.runtime.wire.protocol import RunEnd, RunStart
    from collviz.runtime.wire.trace import read_trace

    opened: list = []

    def run_viewer(*, session):
        opened.append(session)
        session.stop()  # the user quits at once
        return 0

    monkeypatch.setattr(attach_command, "no_terminal", lambda: None)
    monkeypatch.setattr(viewer, "run_viewer", run_viewer)
    server = _listening(tmp_path / "rank0.sock")  # it never answers: the session is stopped before it reads
    try:
        assert main(["attach", str(tmp_path), "--record", str(tmp_path / "t.cvz")]) == 0
    finally:
        server.close()
    [session] = opened
    assert isinstance(session, LiveSession) and isinstance(session.reader, RecorderReader)
    assert session.reader.workers == [Worker(0, str(tmp_path / "rank0.sock"))]
    assert capsys.readouterr().err.splitlines() == [
        "collviz: interrupted by SIGINT: stopped reading the job, which goes on",
        f"collviz: trace written to {tmp_path / 't.cvz'}"]
    events = read_trace(tmp_path / "t.cvz").events
    assert [type(e) for e in events] == [RunStart, RunEnd] and events[-1].status == "interrupted"


def test_attach_is_headless_without_a_terminal_and_records_only_in_the_viewer(tmp_path, capsys, monkeypatch):
    import collviz.app.commands.attach as attach_command

    monkeypatch.setattr(attach_command, "no_terminal", lambda: "stdout is not a terminal")
    assert main(["attach", str(tmp_path)]) == 2, "without a terminal it reads (and finds no socket in the folder)"
    assert "no Unix socket there" in capsys.readouterr().err
    assert main(["attach", "--headless", "--record", str(tmp_path / "t.cvz"), str(tmp_path)]) == 2
    assert capsys.readouterr().err == ("collviz: error: --record keeps what the viewer shows; drop --headless "
                                       "(or run on a terminal)\n")


def test_a_store_that_does_not_answer_is_one_line_and_exit_2():
    result = run_cli("attach", "--headless", "127.0.0.1:1", "--timeout", "1", timeout=DEADLINE_S)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("collviz: error: 127.0.0.1:1: no job's store answered within 1 s (")


def test_a_store_without_addresses_is_refused_and_a_dead_rank_is_named():
    import datetime

    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=datetime.timedelta(seconds=5), wait_for_workers=False)
    address = f"127.0.0.1:{store.port}"
    empty = run_cli("attach", "--headless", address, timeout=DEADLINE_S)
    assert empty.returncode == 2 and empty.stderr.splitlines() == [
        f"collviz: error: {address}: the job's store holds no worker-server address (the job calls "
        "torch.distributed.debug.start_debug_server() on every rank)"]
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = closed.getsockname()[1]
    store.set("debug_server/rank0", f"http://127.0.0.1:{dead}")
    attached = run_cli("attach", "--headless", address, timeout=DEADLINE_S)
    assert attached.returncode == 1
    assert attached.stdout.splitlines()[1] == ("rank 0 on 127.0.0.1: not read: no worker server there (its rank ended, "
                                               "or has not started)")  # the host its address in the store names


# ---- reading little: the tail of each rank's recorder, and the pace of --watch ---------------------


def test_only_the_calls_from_the_last_one_every_rank_completed_are_decoded():
    from collviz.runtime.live.tail import decode_trace, tail_content

    traces = {0: [decode_trace(fr_answer(9, True))], 1: [decode_trace(fr_answer(6, False))], 2: [decode_trace(fr_answer(7, False))]}
    kept = {rank: [e["collective_seq_id"] for e in content["entries"]] for rank, content in tail_content(traces).items()}
    assert kept == {0: [6, 7, 8, 9], 1: [6], 2: [6, 7]}, "rank 1 completed up to #6: every rank keeps #6 onwards"


def test_an_entry_nested_too_deeply_is_kept_as_no_call_and_the_entries_beside_it_are_decoded():
    import msgspec

    from collviz.runtime.live.tail import Trace, decode_trace, tail_content

    trace = decode_trace(fr_answer(2, False))
    assert isinstance(trace, Trace)
    deep = msgspec.Raw(b"[" * 100_000 + b"]" * 100_000)  # a rank's entries are decoded in one call: this one fails it
    mixed = Trace(trace.version, trace.pg_config, trace.pg_status, [trace.entries[0], deep, trace.entries[1]],
                  [trace.places[0], None, trace.places[1]], [trace.keys[0], None, trace.keys[1]])
    entries = tail_content({0: [mixed]}, {})[0]["entries"]
    assert [entry if isinstance(entry, str) else entry["collective_seq_id"] for entry in entries] == \
        [1, "an entry nested too deeply", 2]


def test_a_recorder_with_no_call_yet_is_a_trace_with_no_entries_not_a_failure():
    from collviz.runtime.live.tail import Trace, decode_trace

    found = decode_trace(EMPTY_RECORDER)
    assert isinstance(found, Trace) and found.entries == [] and found.pg_config == {}, \
        "an NCCL job's fr_trace_json has no entries key until a gloo call is made (seen on an H200)"


@pytest.mark.parametrize("body, expected", [
    (b"{not json", "not JSON"),
    (b'{"entries": 3, "version": "2.10", "pg_config": {}}', "not a Flight Recorder trace"),
    (b'{"entries": [], "version": "2.10"}', "not a Flight Recorder trace (no pg_config or pg_status)"),
])
def test_an_answer_that_is_no_trace_is_said_in_one_line(body, expected):
    from collviz.runtime.live.tail import decode_trace

    found = decode_trace(body)
    assert isinstance(found, str) and found.startswith(expected) and "\n" not in found


def test_the_pace_is_the_slowest_while_no_rank_waits_however_calls_move_and_the_fastest_while_ranks_wait():
    from collviz.runtime.live.pace import Pace
    from collviz.runtime.live.snapshot import watch

    steady = {0: fr_answer(3, False), 1: fr_answer(3, False)}
    moved = {0: fr_answer(4, False), 1: fr_answer(4, False)}
    waiting = {0: fr_answer(5, True), 1: fr_answer(4, False)}
    ask, asked = asking([steady] * 5 + [moved] + [waiting] * 3 + [moved])
    slept: list[float] = []
    shown = []
    last, _, end = watch(_reader(ask), lambda snapshot, _: shown.append(snapshot), Pace(0.5, 3.0), readings=10, sleep=slept.append)
    assert slept == [3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 0.5, 0.5, 0.5], \
        "no wait: the slowest, a new call included; a wait: the fastest"
    assert [s.ranks[0].inside for s in shown] == ["", "", "all_reduce #5 on group 0 (default_pg)",
                                                  "all_reduce #5 on group 0 (default_pg)", ""]
    assert [s.exit_status for s in shown] == [0, 0, 0, 1, 0] and last == shown[-1], \
        "rank 0 enters #5 (seen once: in flight), then its wait is confirmed, then the call completes"
    assert [ranks for handler, ranks in asked if handler == "dump_traceback"] == [[1]], \
        "a stack only for a confirmed wait, of the rank missing, once per wait"
    assert end is None, "the job has not ended"


def test_watch_ends_when_no_rank_answers_on_the_last_snapshot_of_the_job():
    from collviz.runtime.live.snapshot import watch

    ask, _ = asking([{0: fr_answer(3, False), 1: fr_answer(3, False)}, {0: None, 1: None}])
    shown = []
    last, reading, end = watch(_reader(ask), lambda snapshot, _: shown.append(snapshot), sleep=lambda s: None)
    assert reading.gone and shown == [last] and last.exit_status == 0, "no snapshot of ranks gone: the job ended"
    assert end == End("ok", "the job ended: no rank's worker server answers any more (its exit status is its launcher's)")


def test_watch_of_a_job_that_ends_while_ranks_wait_says_it_ended_stalled():
    from collviz.runtime.live.snapshot import watch

    waiting = {0: fr_answer(5, True), 1: fr_answer(4, False)}  # rank 0 in all_reduce #5, rank 1 not yet
    ask, asked = asking([waiting, waiting, {0: None, 1: None}])
    shown = []
    last, reading, end = watch(_reader(ask), lambda snapshot, _: shown.append(snapshot), sleep=lambda s: None)
    assert reading.gone and last is not None and last.exit_status == 1
    assert end == End("failed", "the job ended while rank 0 waited in all_reduce #5 on group 0 (default_pg) for rank 1")
    assert [ranks for handler, ranks in asked if handler == "dump_traceback"] == [[1]], \
        "the stack asked while the job ran, never at its end"


def test_json_says_a_rank_not_read():
    ask, _ = asking([{0: fr_answer(3, False), 1: None}])
    document = take_snapshot(_reader(ask), sleep=lambda s: None).document()
    assert document["ranks"][1] == {"rank": 1, "error": "no answer within 2 s"}
    assert (document["not_read"], document["missing"], document["exit_status"]) == ([1], [], 1)


def test_calls_made_before_the_job_began_are_not_read():
    """A launcher's ranks forked from a process that had made calls inherit its recorder's entries:
    those created before ``since_ns`` are dropped (the answer's calls are made at 1,000 ns × their
    number)."""
    from collviz.runtime.live.tail import decode_trace

    trace = decode_trace(fr_answer(4, False), since_ns=2_500)
    assert [place.collective_seq_id for place in trace.places] == [3, 4]
    assert len(trace.entries) == 2
    assert [place.collective_seq_id for place in decode_trace(fr_answer(4, False)).places] == [1, 2, 3, 4]


def test_a_recorder_a_rank_lacks_is_asked_once_and_its_absence_is_no_error():
    ask, asked = asking([{0: fr_answer(3, False), 1: fr_answer(3, False)}])
    reader = _reader(ask)
    readings = [reader.read() for _ in range(3)]
    assert asked == [("fr_trace_json", [0, 1]), ("dump_nccl_trace_json", [0, 1]), ("fr_trace_json", [0, 1]),
                     ("fr_trace_json", [0, 1])], "NCCL's recorder answered 404 (a torch without NCCL): not asked again"
    assert all(not read.error for reading in readings for read in reading.ranks.values())
    assert [len(reading.calls) for reading in readings] == [len(readings[0].calls)] * 3 and readings[0].calls


@pytest.mark.parametrize("measured, line", [
    (False, "next reading in ~10 s"),
    (True, "next reading in ~18 s (each reading costs every rank its whole Flight Recorder answer: held until the "
           "ranks' own CPU has paid for it at 0.4%)"),
])
def test_watch_says_when_the_next_reading_comes_and_why_where_the_ranks_cpu_holds_it(monkeypatch, capsys, measured,
                                                                                      line):
    from collviz.app.commands import attach
    from collviz.runtime.live.pace import Pace
    from collviz.runtime.live.reading_cost import ReadingCost, ThreadCpu

    # both ranks: 1 s of their own CPU in 2 s of life; the reading costs each 20 ms: each owes (20 + 20) ms /
    # 0.004 = 10 s, 9 s short at half a core: 18 s, past --slowest's 10
    pids = {0: os.getpid(), 1: os.getppid()}  # processes alive: none is taken for a rank that ended
    cpu = {pid: ThreadCpu(0, 10**9, 2.0) for pid in pids.values()}
    meter = ReadingCost(pids, cpu=lambda pid: cpu[pid], clock=lambda: 0.0)
    monkeypatch.setattr(ReadingCost, "of", classmethod(lambda cls, workers: meter if measured else None))
    ask, _ = asking([{0: fr_answer(3, False), 1: fr_answer(3, False)}])

    def asked(workers, handler, timeout_s):
        cpu.update({pid: ThreadCpu(20_000_000, 10**9, 2.0) for pid in cpu})
        return ask(workers, handler, timeout_s)

    assert attach._watch(_reader(asked), Pace(1.0, 10.0), 1, as_json=False) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [line, ""]
