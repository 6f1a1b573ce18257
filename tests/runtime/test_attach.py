"""``collviz attach TARGET --headless``: a user's own job under plain torchrun, its ranks' worker
servers opened both with torch's ``worker_main`` (Unix sockets) and ``start_debug_server()``
(TCP, addresses in the job's store), read both ways while one rank stalls in its own function and
the other waits in all_reduce; and the snapshot's rules on hand-made answers.

Expected lines are written from the job script below (its calls and its own line numbers).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from collviz.app.cli import main
from collviz.runtime.attach.snapshot import SnapshotOptions, take_snapshot
from collviz.runtime.attach.stacks import user_stack_line
from collviz.runtime.attach.workers import Answer, Worker, ask_all, find_sockets

from support.cli import run_cli


JOB = textwrap.dedent('''
    import os, sys, time, types
    from pathlib import Path
    import torch
    import torch.distributed as dist
    from torch.distributed.elastic.control_plane import worker_main
    try:
        import tabulate
    except ImportError:  # torch's HTML frontend (rank 0) imports it; collviz reads the workers, never the frontend
        sys.modules["tabulate"] = types.SimpleNamespace(tabulate=lambda *args, **kwargs: "")
    from torch.distributed.debug import start_debug_server

    folder = Path(sys.argv[1])
    os.environ["TORCH_WORKER_SERVER_SOCKET"] = str(folder / f"rank{os.environ['RANK']}.sock")

    def slow_data_loader():
        (folder / "stalling").touch()
        while not (folder / "release").exists():
            time.sleep(0.05)  # the stalled line

    def main():
        start_debug_server(port=int(sys.argv[2]))
        (folder / "store").write_text(f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}")
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        for _ in range(5):
            dist.all_reduce(torch.ones(4))
        if rank == 1:
            slow_data_loader()
        else:
            (folder / "waiting").touch()
        dist.all_reduce(torch.ones(4))
        print(f"finished {rank}", flush=True)
        dist.destroy_process_group()

    if __name__ == "__main__":
        with worker_main():
            main()
''')

STALLED_LINE = next(number for number, line in enumerate(JOB.splitlines(), 1) if "the stalled line" in line)
DEADLINE_S = 60


def _wait_for(*paths: Path, job: subprocess.Popen) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not all(path.exists() for path in paths):
        if job.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"the job did not reach its stall: {job.poll()=}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def stalled_job(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The job under ``torchrun --standalone --nproc-per-node 2``, attached once while rank 1 is
    in ``slow_data_loader`` and rank 0 in its sixth all_reduce; then released to its end."""
    folder = tmp_path_factory.mktemp("attach")
    script = folder / "job.py"
    script.write_text(JOB)
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    with socket.socket() as probe:  # a free port for torch's frontend, which collviz does not use
        probe.bind(("127.0.0.1", 0))
        frontend_port = probe.getsockname()[1]
    job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                            str(script), str(folder), str(frontend_port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=environment, stdin=subprocess.DEVNULL)
    try:
        _wait_for(folder / "stalling", folder / "waiting", folder / "rank0.sock", folder / "rank1.sock", job=job)
        time.sleep(0.3)  # rank 0 goes from its marker into the all_reduce
        attached = run_cli("attach", "--headless", str(folder), timeout=DEADLINE_S)
        as_json = run_cli("attach", "--headless", "--json", str(folder), timeout=DEADLINE_S)
        watched = run_cli("attach", "--headless", "--json", "--watch", "--count", "3",
                          str(folder), timeout=DEADLINE_S)
        store = (folder / "store").read_text()
        through_store = run_cli("attach", "--headless", store, timeout=DEADLINE_S)
        (folder / "release").touch()
        out, err = job.communicate(timeout=DEADLINE_S)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    return {"attach": attached, "json": as_json, "watch": watched, "store": (store, through_store), "job": (job.returncode, out, err), "folder": folder}


def test_attach_names_the_stalled_rank_and_its_own_function(stalled_job):
    attached = stalled_job["attach"]
    assert attached.returncode == 1, attached.stderr
    assert attached.stdout.splitlines() == [
        f"collviz attach: the worker servers of 2 ranks at {stalled_job['folder']}",
        "rank 0: last completed all_reduce #5 on group 0 (default_pg); now in all_reduce #6 on group 0 (default_pg)",
        "rank 1: last completed all_reduce #5 on group 0 (default_pg); in no collective",
        "waiting: all_reduce #6 on group 0 (default_pg): rank 0 waits for rank 1",
        f"  rank 1 is missing from the call, at job.py:{STALLED_LINE} in slow_data_loader",
    ]


def test_attach_through_the_debug_servers_store_says_the_same(stalled_job):
    store, attached = stalled_job["store"]
    assert attached.returncode == 1, attached.stderr
    lines = attached.stdout.splitlines()
    assert lines[0] == f"collviz attach: the worker servers of 2 ranks at {store}"
    assert lines[1:] == stalled_job["attach"].stdout.splitlines()[1:]


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
    "missing": [1], "not_read": [], "in_step": False, "exit_status": 1}


def test_attach_json_is_one_document_of_the_same_snapshot(stalled_job):
    attached = stalled_job["json"]
    assert attached.returncode == 1, attached.stderr
    assert json.loads(attached.stdout) == STALLED_DOCUMENT


def test_watch_prints_a_snapshot_only_when_it_changes(stalled_job):
    watched = stalled_job["watch"]
    assert watched.returncode == 1, watched.stderr
    assert [json.loads(line) for line in watched.stdout.splitlines()] == [STALLED_DOCUMENT], \
        "three readings of the same stall: the first two confirm it, the third changes nothing"


def test_the_job_goes_on_unharmed(stalled_job):
    code, out, err = stalled_job["job"]
    assert code == 0, err[-2000:]
    assert sorted(line for line in out.splitlines() if line.startswith("finished")) == ["finished 0", "finished 1"]


# ---- the snapshot's rules, on hand-made answers ---------------------------------------------------


def _dump(calls: int, inside: bool, backend: str = "gloo") -> bytes:
    """A Flight Recorder answer of ``calls`` all_reduces on the default group, the last one not
    completed when ``inside``."""
    entries = [{"collective_seq_id": seq, "profiling_name": f"{backend}:all_reduce", "process_group": ["0", "default_pg"],
                "input_sizes": [[4]], "output_sizes": [[4]], "input_dtypes": ["Float"], "output_dtypes": ["Float"],
                "time_created_ns": 1000 * seq, "retired": not (inside and seq == calls), "state": "scheduled",
                "is_p2p": False} for seq in range(1, calls + 1)]
    return json.dumps({"version": "2.10", "pg_config": {"": {"name": "", "desc": "", "ranks": "[0, 1]"}},
                       "pg_status": {}, "entries": entries}).encode()


WORKERS = [Worker(0, "rank0.sock"), Worker(1, "rank1.sock")]
STACK = '''Current thread 0x00007f74a613b6c0 (most recent call first):
  <no Python frame>

Thread 0x00007f74c71eab80 (most recent call first):
  File "/usr/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252 in all_reduce
  File "/home/me/train.py", line 16 in step
  File "/home/me/train.py", line 30 in <module>
'''


def _asking(readings: list[dict[int, bytes | None]], recorder: str = "fr_trace_json"):
    """An ``ask`` that gives each reading's Flight Recorder answers in turn from ``recorder``
    (the other recorder answers empty for gloo's, 404 for NCCL's: a torch without NCCL), and
    STACK for stacks."""
    asked: list[tuple[str, list[int]]] = []

    def ask(workers, handler, timeout_s):
        asked.append((handler, [w.rank for w in workers]))
        if handler == "dump_traceback":
            return {w.rank: Answer(w.rank, STACK.encode(), status=200) for w in workers}
        if handler != recorder:
            if handler == "dump_nccl_trace_json":
                return {w.rank: Answer(w.rank, None, "dump_nccl_trace_json answered 404", status=404) for w in workers}
            return {w.rank: Answer(w.rank, _dump(0, False), status=200) for w in workers}
        bodies = readings[min(len([h for h, _ in asked if h == recorder]), len(readings)) - 1]
        return {w.rank: Answer(w.rank, bodies[w.rank], "" if bodies[w.rank] else "no answer within 2 s",
                               status=200 if bodies[w.rank] else None) for w in workers}

    return ask, asked


def test_ranks_in_step_exit_0_after_one_reading():
    ask, asked = _asking([{0: _dump(3, False), 1: _dump(3, False)}])
    snapshot = take_snapshot(WORKERS, ask=ask, sleep=lambda s: None)
    assert snapshot.exit_status == 0
    assert asked == [("fr_trace_json", [0, 1]), ("dump_nccl_trace_json", [0, 1])]
    assert snapshot.text().splitlines()[-1] == "every rank is in step"


def test_a_wait_seen_once_is_a_call_in_flight_not_a_wait():
    ask, asked = _asking([{0: _dump(4, True), 1: _dump(3, False)}, {0: _dump(4, False), 1: _dump(4, False)}])
    slept: list[float] = []
    snapshot = take_snapshot(WORKERS, SnapshotOptions(interval_s=1.5), ask=ask, sleep=slept.append)
    assert slept == [1.5] and snapshot.exit_status == 0 and snapshot.waits == []


def test_a_lasting_wait_asks_only_the_missing_rank_for_its_stack():
    reading = {0: _dump(4, True), 1: _dump(3, False)}
    ask, asked = _asking([reading, reading])
    snapshot = take_snapshot(WORKERS, ask=ask, sleep=lambda s: None)
    assert snapshot.exit_status == 1
    assert asked[-1] == ("dump_traceback", [1])
    assert snapshot.text().splitlines()[-1] == "  rank 1 is missing from the call, at train.py:16 in step, inside " \
                                               "all_reduce (distributed_c10d.py:3252)"


def test_an_nccl_jobs_calls_come_from_nccls_own_recorder():
    reading = {0: _dump(4, True, "nccl"), 1: _dump(3, False, "nccl")}
    ask, asked = _asking([reading, reading], recorder="dump_nccl_trace_json")
    snapshot = take_snapshot(WORKERS, ask=ask, sleep=lambda s: None)
    assert snapshot.exit_status == 1
    assert snapshot.text().splitlines()[:3] == [
        "rank 0: last completed all_reduce #3 on group 0 (default_pg); now in all_reduce #4 on group 0 (default_pg)",
        "rank 1: last completed all_reduce #3 on group 0 (default_pg); in no collective",
        "waiting: all_reduce #4 on group 0 (default_pg): rank 0 waits for rank 1"]


def test_a_rank_that_does_not_answer_is_named_and_the_status_is_1():
    ask, _ = _asking([{0: _dump(3, False), 1: None}])
    snapshot = take_snapshot(WORKERS, ask=ask, sleep=lambda s: None)
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
    assert answers[0].body is None and answers[0].error == "no answer within 1 s"
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


def test_on_a_terminal_without_headless_attach_says_the_viewer_is_not_built_yet(tmp_path, capsys, monkeypatch):
    import collviz.app.commands.attach as attach_command

    monkeypatch.setattr(attach_command, "no_terminal", lambda: None)
    assert main(["attach", str(tmp_path)]) == 2
    assert "its live viewer is not built yet" in capsys.readouterr().err
    monkeypatch.setattr(attach_command, "no_terminal", lambda: "stdout is not a terminal")
    assert main(["attach", str(tmp_path)]) == 2, "without a terminal it reads (and finds no socket in the folder)"
    assert "no Unix socket there" in capsys.readouterr().err


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
    assert attached.stdout.splitlines()[1] == "rank 0: not read: ConnectionRefusedError: [Errno 111] Connection refused"


# ---- reading little: the tail of each rank's recorder, and the pace of --watch ---------------------


def test_only_the_calls_from_the_last_one_every_rank_completed_are_decoded():
    from collviz.runtime.attach.tail import decode_trace, tail_content

    traces = {0: [decode_trace(_dump(9, True))], 1: [decode_trace(_dump(6, False))], 2: [decode_trace(_dump(7, False))]}
    kept = {rank: [e["collective_seq_id"] for e in content["entries"]] for rank, content in tail_content(traces).items()}
    assert kept == {0: [6, 7, 8, 9], 1: [6], 2: [6, 7]}, "rank 1 completed up to #6: every rank keeps #6 onwards"


@pytest.mark.parametrize("body, expected", [
    (b"{not json", "not JSON"),
    (b'{"entries": 3, "version": "2.10", "pg_config": {}}', "not a Flight Recorder trace"),
    (b'{"entries": [], "version": "2.10"}', "not a Flight Recorder trace (no pg_config or pg_status)"),
])
def test_an_answer_that_is_no_trace_is_said_in_one_line(body, expected):
    from collviz.runtime.attach.tail import decode_trace

    found = decode_trace(body)
    assert isinstance(found, str) and found.startswith(expected) and "\n" not in found


def test_the_pace_doubles_while_steady_and_is_fastest_while_calls_move_or_ranks_wait():
    from collviz.runtime.attach.watch import Pace, watch

    steady = {0: _dump(3, False), 1: _dump(3, False)}
    moved = {0: _dump(4, False), 1: _dump(4, False)}
    waiting = {0: _dump(5, True), 1: _dump(4, False)}
    ask, asked = _asking([steady] * 5 + [moved] + [waiting] * 3 + [moved])
    slept: list[float] = []
    shown = []
    last = watch(WORKERS, shown.append, Pace(0.5, 3.0), readings=10, ask=ask, sleep=slept.append)
    assert slept == [0.5, 1.0, 2.0, 3.0, 3.0, 0.5, 0.5, 0.5, 0.5], \
        "new readings: fast; steady: 1, 2, 3 (the slowest); a new call and a wait: fastest again"
    assert [s.ranks[0].inside for s in shown] == ["", "", "all_reduce #5 on group 0 (default_pg)",
                                                  "all_reduce #5 on group 0 (default_pg)", ""]
    assert [s.exit_status for s in shown] == [0, 0, 0, 1, 0] and last == shown[-1], \
        "rank 0 enters #5 (seen once: in flight), then its wait is confirmed, then the call completes"
    assert [ranks for handler, ranks in asked if handler == "dump_traceback"] == [[1], [1]], \
        "stacks only for confirmed waits, of the rank missing"


def test_watch_ends_when_no_rank_answers():
    from collviz.runtime.attach.watch import watch

    ask, _ = _asking([{0: _dump(3, False), 1: _dump(3, False)}, {0: None, 1: None}])
    shown = []
    last = watch(WORKERS, shown.append, ask=ask, sleep=lambda s: None)
    assert len(shown) == 2 and last.exit_status == 1
    assert last.text().splitlines() == ["rank 0: not read: no answer within 2 s", "rank 1: not read: no answer within 2 s"]


def test_json_says_a_rank_not_read():
    ask, _ = _asking([{0: _dump(3, False), 1: None}])
    document = take_snapshot(WORKERS, ask=ask, sleep=lambda s: None).document()
    assert document["ranks"][1] == {"rank": 1, "error": "no answer within 2 s"}
    assert (document["not_read"], document["missing"], document["exit_status"]) == ([1], [], 1)
