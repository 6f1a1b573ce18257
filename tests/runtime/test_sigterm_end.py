"""A torchrun rank's SIGTERM said as its end (issue 38): while its main thread waits in C code that
never lets Python run a handler, and never for a SIGTERM sent to a process the rank forked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import zmq

from collviz.runtime.wire.frames import decode_frames
from collviz.runtime.wire.protocol import RankEnd

from support.processes import SECRET, alive, free_port

STOPPED = "stopped by SIGTERM (as torchrun's agent ends its ranks)"

SETUP = """\
    import ctypes, os, signal, sys
    from collviz.runtime.userjob.sigterm_end import report_sigterm
    from collviz.runtime.wire.protocol import RankEnd
    from collviz.runtime.wire.transport import EventEmitter
    emitter = EventEmitter(sys.argv[1], "job", 3, secret=sys.argv[2].encode())
    end = report_sigterm(emitter)
"""

# A normal mutex locked twice: the main thread waits in the kernel for good, never back in Python.
BLOCKED_IN_C = textwrap.dedent(SETUP + """\
    mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER
    libc = ctypes.CDLL(None)
    libc.pthread_mutex_lock(mutex)
    print("blocked", flush=True)
    libc.pthread_mutex_lock(mutex)
""")

FORKS = textwrap.dedent(SETUP + """\
    child = os.fork()
    if child == 0:
        print(f"child {os.getpid()} {signal.getsignal(signal.SIGTERM) == signal.SIG_DFL}", flush=True)
        signal.pause()
    os.waitpid(child, 0)
    end.claim()
    emitter.emit(RankEnd, status="ok")
    emitter.close()
    os._exit(0)
""")


def _main_thread_waits_in_the_kernel(pid: int) -> bool:
    return Path(f"/proc/{pid}/wchan").read_text().startswith("futex")


def _run(program: str, tmp_path: Path, act) -> tuple[int, list[RankEnd]]:
    """Run ``program`` (its events to a socket here), call ``act(proc)`` once it printed its first
    line, and return its exit status and the RankEnds it sent."""
    port = free_port()
    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    pull.bind(f"tcp://127.0.0.1:{port}")
    (tmp_path / "rank.py").write_text(program)
    proc = subprocess.Popen([sys.executable, str(tmp_path / "rank.py"), f"tcp://127.0.0.1:{port}", SECRET],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        act(proc, proc.stdout.readline().split())
        status = proc.wait(timeout=120)
    finally:
        proc.kill()
    ends: list[RankEnd] = []
    while not ends and pull.poll(60_000):  # its emitter's close waited for the end to leave
        ends += [e for e, _ in decode_frames(pull.recv_multipart(), SECRET.encode()) if isinstance(e, RankEnd)]
    pull.close(linger=0)
    context.term()
    return status, ends


def test_a_rank_blocked_in_c_code_says_sigterm_stopped_it_and_exits_as_sigterm_would(tmp_path):
    def stop(proc, line):
        assert line == ["blocked"]
        while not _main_thread_waits_in_the_kernel(proc.pid):
            pass
        proc.send_signal(signal.SIGTERM)

    status, ends = _run(BLOCKED_IN_C, tmp_path, stop)
    assert status == 128 + 15
    assert [(e.rank, e.status, e.error) for e in ends] == [(3, "error", STOPPED)]


def test_a_sigterm_to_a_forked_child_is_the_childs_alone(tmp_path):
    children = []

    def stop_child(proc, line):
        assert line[0] == "child" and line[2] == "True", line  # the child has SIGTERM's default back
        children.append(int(line[1]))
        os.kill(children[0], signal.SIGTERM)

    try:
        status, ends = _run(FORKS, tmp_path, stop_child)
    finally:  # where SIGTERM did not end it (a handler of the rank's), it must not outlive the test
        for child in children:
            if alive(child):
                os.kill(child, signal.SIGKILL)
    assert status == 0
    assert [(e.rank, e.status, e.error) for e in ends] == [(3, "ok", "")]
