"""Every live read is bounded: hostile fake worker servers on Unix sockets (deeply nested JSON, a
byte a second, no answer at all, a size of 10⁶ dimensions) each end in one line within the
request's deadline, never a traceback nor a wait; a job whose servers all go away ends a
``--watch`` with "the job ended"; SIGTERM ends a watch stuck on a slow server at once.

Deadlines are asserted with generous slack (a loaded machine), never tight: each test bounds what
would otherwise run for minutes (a byte a second) by a few seconds.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from collviz.runtime.live.recorder_reader import RecorderReader
from collviz.runtime.live.snapshot import take_snapshot
from collviz.runtime.live.workers import ask_all, find_sockets

from support.attach_job import fr_answer

DEADLINE_S = 1.0
"""Each request's deadline in these tests."""

SLACK_S = 15.0
"""How much longer than the deadline a loaded machine may take (the hostile cases would take minutes)."""


def _http(body: bytes) -> bytes:
    return b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body


@contextmanager
def serving(path: Path, answer: Callable[[socket.socket], None]) -> Iterator[None]:
    """A fake worker server on the Unix socket ``path``: each connection is read once, then
    ``answer`` writes to it (in a thread of its own), until the block ends."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(16)
    stop = threading.Event()

    def one(conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(4096)
                answer(conn)
            except OSError:
                pass

    def accept() -> None:
        server.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        server.close()


def _body(body: bytes) -> Callable[[socket.socket], None]:
    return lambda conn: conn.sendall(_http(body))


def _byte_a_second(conn: socket.socket) -> None:
    for byte in _http(fr_answer(3, False)):
        conn.sendall(bytes([byte]))
        time.sleep(1.0)


def _silent(conn: socket.socket) -> None:
    time.sleep(60)


DEEP = b'{"version": "2.10", "pg_config": ' + b'{"a": ' * 200_000 + b"1" + b"}" * 200_000 + b', "entries": []}'
"""A trace whose ``pg_config`` nests 200,000 levels deep."""

HUGE_ENTRY = {"collective_seq_id": 1, "profiling_name": "gloo:all_reduce", "process_group": ["0", "default_pg"],
              "input_sizes": [[2] * 10**6], "output_sizes": [[2] * 10**6], "input_dtypes": ["Float"], "retired": True,
              "time_created_ns": 1, "is_p2p": False}
HUGE_SIZES = json.dumps({"version": "2.10", "pg_config": {"": {"name": "", "desc": "", "ranks": "[0]"}}, "pg_status": {},
                         "entries": [HUGE_ENTRY]}).encode()
"""A trace whose one call has a tensor of 10⁶ dimensions (multiplied out: a number of 10⁶ bits)."""


@pytest.mark.parametrize("answer, expected", [
    (_body(DEEP), "rank 0: not read: its fr_trace_json answer is nested deeper than any Flight Recorder trace: not read"),
    (_body(HUGE_SIZES), "rank 0: not read: its fr_trace_json answer is not a Flight Recorder trace (an entry of "
                        f"{len(json.dumps(HUGE_ENTRY)):,} bytes, over 65,536)"),
    (_byte_a_second, f"rank 0: not read: slow: no whole answer within {DEADLINE_S:g} s"),
    (_silent, f"rank 0: not read: slow: no whole answer within {DEADLINE_S:g} s"),
], ids=["deep JSON", "10^6 dimensions", "a byte a second", "no answer"])
def test_a_hostile_server_is_one_line_within_the_deadline(tmp_path, answer, expected):
    with serving(tmp_path / "rank0.sock", answer):
        reader = RecorderReader(find_sockets(str(tmp_path)), DEADLINE_S, from_first=False)
        start = time.monotonic()
        snapshot = take_snapshot(reader, 0.0, sleep=lambda s: None)
        took = time.monotonic() - start
    [line, *_] = snapshot.text().splitlines()
    assert line == expected and snapshot.exit_status == 1
    assert took < 2 * DEADLINE_S + SLACK_S


def test_a_slow_server_is_named_slow_and_its_answer_never_waited_for(tmp_path):
    with serving(tmp_path / "rank0.sock", _byte_a_second), serving(tmp_path / "rank1.sock", _body(fr_answer(3, False))):
        answers = ask_all(find_sockets(str(tmp_path)), "fr_trace_json", DEADLINE_S)
    assert answers[0].slow and answers[0].body is None and answers[0].took_s < DEADLINE_S + SLACK_S
    assert not answers[1].slow and answers[1].body == fr_answer(3, False)


def test_an_answer_over_the_byte_cap_is_refused_in_one_line(tmp_path):
    with serving(tmp_path / "rank0.sock", _body(b"x" * 5000)):
        [answer] = ask_all(find_sockets(str(tmp_path)), "fr_trace_json", DEADLINE_S, limit=1000).values()
    assert answer.body is None and answer.error == "fr_trace_json: its answer is over 1,000 bytes: not read"


def _collviz(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "collviz.app.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def test_watch_past_the_jobs_end_says_the_job_ended_and_exits_0(tmp_path):
    with serving(tmp_path / "rank0.sock", _body(fr_answer(3, False))):
        watch = _collviz("attach", "--headless", "--watch", "--slowest", "1", str(tmp_path))
        time.sleep(3.0)  # a reading or more while the job runs (or none: its end is said either way)
    out, err = watch.communicate(timeout=60)
    assert watch.returncode == 0, err
    assert out.splitlines()[-1] == ("collviz attach: the job ended: no rank's worker server answers any more "
                                    "(its exit status is its launcher's)")
    assert "Error" not in out + err


def test_sigterm_ends_a_watch_held_by_a_slow_server_at_once(tmp_path):
    with serving(tmp_path / "rank0.sock", _byte_a_second):
        watch = _collviz("attach", "--headless", "--watch", "--timeout", "120", str(tmp_path))
        time.sleep(3.0)  # started, and inside a request that would take 120 s
        sent = time.monotonic()
        watch.send_signal(signal.SIGTERM)
        watch.communicate(timeout=60)
        took = time.monotonic() - sent
    assert took < SLACK_S, "not held by the request under way (its deadline is 120 s)"
