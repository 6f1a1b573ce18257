"""Processes and ports: whether a pid still lives, a run's workers under way, a free port pair."""

from __future__ import annotations

import socket
import time

import pytest

from collviz.runtime.wire.protocol import Collective, RankStart
from collviz.runtime.wire.trace import TraceError, read_trace

SECRET = "collviz-test-secret-0123456789"
"""The shared secret the remote tests' viewers and workers sign events with."""


def wait_for_collectives(trace_path, proc, timeout_s: float = 90) -> dict[int, int]:
    """Read the trace while it is being written until every rank has entered the timed loop."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            events = read_trace(trace_path).events
        except TraceError:
            events = []
        pids = {e.rank: e.pid for e in events if isinstance(e, RankStart)}
        timed = {e.rank for e in events if isinstance(e, Collective) and e.edge == "begin"}
        if len(pids) == 4 and len(timed) == 4:
            return pids
        time.sleep(0.2)
    proc.kill()
    pytest.fail("workers never got going")


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def free_port() -> int:
    """A free port whose successor is free too (the viewer binds PORT and PORT+1)."""
    while True:
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            try:
                b.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port

