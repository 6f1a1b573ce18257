"""Peers that cannot hurt a listening viewer: bounded frames, replayed signatures refused, a
secret even on loopback, no control socket in remote mode, IPv6."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from unittest import mock

import pytest
import zmq

from collviz.runtime.sessions.listening import RemoteSession
from collviz.runtime.wire.frames import SIGNATURE_WINDOW_S, encode_frames
from collviz.runtime.wire.protocol import WIRE_HEADER, Phase

from support.processes import SECRET, free_port


def _send(url: str, messages: list[list[bytes]], ipv6: bool = False) -> None:
    context = zmq.Context()
    client = context.socket(zmq.PUSH)
    client.setsockopt(zmq.LINGER, 5000)
    client.setsockopt(zmq.IPV6, int(ipv6))
    client.connect(url)
    for frames in messages:
        client.send_multipart(frames)
    client.close()
    context.term()


def _poll_until(session: RemoteSession, condition, seconds: float = 10) -> list:
    received, deadline = [], time.monotonic() + seconds
    while not condition(received) and time.monotonic() < deadline:
        received += session.poll(0.1)
    return received


def _phase(seq: int = 0) -> Phase:
    return Phase(run="r1", rank=0, seq=seq, t_ns=0, index=0, name="x", edge="begin")


def test_a_frame_signed_for_an_earlier_session_is_refused():
    port = free_port()
    session = RemoteSession(host="127.0.0.1", port=port, secret=SECRET.encode(), timeout_s=5)
    session.start()
    earlier = time.time_ns() - int((SIGNATURE_WINDOW_S + 60) * 1e9)
    with mock.patch("collviz.runtime.wire.frames.time.time_ns", return_value=earlier):
        replayed = encode_frames(_phase(0), SECRET.encode())
    fresh = encode_frames(_phase(1), SECRET.encode())
    _send(f"tcp://127.0.0.1:{port}", [replayed, fresh])
    received = _poll_until(session, lambda got: got)
    assert [e.seq for e in received] == [1]
    assert session.dropped["signed for another session"] == 1
    session.stop()


def test_remote_mode_opens_no_control_socket():
    port = free_port()
    session = RemoteSession(host="127.0.0.1", port=port, secret=SECRET.encode(), timeout_s=5)
    session.start()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port + 1))  # free: nothing listens on PORT+1
    session.stop()


def test_ipv6_loopback_can_be_listened_on():
    if not socket.has_ipv6:
        pytest.skip("this Python has no IPv6")
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here ({exc.strerror})")
    port = free_port()
    session = RemoteSession(host="::1", port=port, secret=SECRET.encode(), timeout_s=5)
    session.start()
    _send(f"tcp://[::1]:{port}", [encode_frames(_phase(0), SECRET.encode())], ipv6=True)
    assert [e.seq for e in _poll_until(session, lambda got: got)] == [0]
    session.stop()


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def _settled_rss_kib(pid: int) -> int:
    """The RSS once start-up is over: two equal readings half a second apart (at most 15 s)."""
    previous, deadline = -1, time.monotonic() + 15
    while time.monotonic() < deadline:
        current = _rss_kib(pid)
        if current == previous:
            return current
        previous = current
        time.sleep(0.5)
    return previous


def test_loopback_viewer_generates_a_secret_and_an_oversize_frame_does_not_grow_it():
    port = free_port()
    viewer = subprocess.Popen([sys.executable, "-m", "collviz", "view", "--listen", f"127.0.0.1:{port}", "--headless"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        line = viewer.stderr.readline() + viewer.stderr.readline()
        match = re.search(r"export COLLVIZ_SECRET=([0-9a-f]{32})\n", line)
        assert match, line
        before = _settled_rss_kib(viewer.pid)
        _send(f"tcp://127.0.0.1:{port}", [[WIRE_HEADER, b"\x00" * (256 * 1024 * 1024)]])  # unsigned and huge
        time.sleep(2.0)
        assert _rss_kib(viewer.pid) - before < 20 * 1024
    finally:
        viewer.send_signal(signal.SIGINT)
        out, err = viewer.communicate(timeout=20)
    assert viewer.returncode == 130, err
