"""Workers under torchrun on two "nodes", streaming signed events to one headless viewer."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import zmq

from collviz.runtime.wire.frames import encode_frames
from collviz.runtime.wire.protocol import Buffer, Phase, RankStart, RunEnd, RunStart
from collviz.runtime.sessions.listening import RemoteSession
from collviz.runtime.wire.trace import read_trace

from support.cli import run_main
from support.processes import SECRET, free_port


def test_two_torchrun_nodes_stream_to_one_recording_viewer(tmp_path):
    env = {**os.environ, "COLLVIZ_SECRET": SECRET}
    view_port, master_port = free_port(), free_port()
    trace = tmp_path / "remote.cvz"
    viewer = subprocess.Popen(
        [sys.executable, "-m", "collviz.app.cli", "view", "--listen", f"127.0.0.1:{view_port}", "--headless",
         "--record", str(trace)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    nodes = [
        subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2",
             "--node-rank", str(node), "--master-addr", "127.0.0.1", "--master-port", str(master_port),
             "-m", "collviz.app.cli", "worker", "all-reduce", "--backend", "gloo",
             "--viewer", f"tcp://127.0.0.1:{view_port}"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for node in (0, 1)
    ]
    try:
        for node in nodes:
            output, _ = node.communicate(timeout=180)
            assert node.returncode == 0, output
        out, err = viewer.communicate(timeout=60)
    finally:
        for proc in (*nodes, viewer):
            proc.kill()
    assert viewer.returncode == 0, err
    events = read_trace(trace).events
    assert sorted(e.rank for e in events if isinstance(e, RankStart)) == [0, 1, 2, 3]
    start = next(e for e in events if isinstance(e, RunStart))
    assert start.world_size == 4 and start.scenario == "all-reduce"
    after = [e for e in events if isinstance(e, Buffer) and e.moment == "after"]
    expected = (0.1 - 0.2 + 0.4 - 0.1) / 4  # all-reduce.md's four gradients, averaged
    assert sorted(b.rank for b in after) == [0, 1, 2, 3]
    assert all(abs(b.values[0] - expected) < 1e-6 for b in after)
    assert isinstance(events[-1], RunEnd) and events[-1].status == "ok"
    assert "result: ok" in out


def test_listening_beyond_loopback_without_a_secret_is_refused(capsys, monkeypatch):
    monkeypatch.delenv("COLLVIZ_SECRET", raising=False)
    status, err = run_main(capsys, "view", "--listen", "0.0.0.0:5555", "--headless")
    assert status == 2
    assert "exposes the event socket" in err and len(err.strip().splitlines()) == 1


def test_workers_without_the_right_secret_are_rejected_and_counted():
    port = free_port()
    session = RemoteSession(host="127.0.0.1", port=port, secret=SECRET.encode(), timeout_s=5)
    session.start()
    context = zmq.Context()
    client = context.socket(zmq.PUSH)
    client.setsockopt(zmq.LINGER, 2000)
    client.connect(f"tcp://127.0.0.1:{port}")
    event = Phase(run="intruder", rank=0, seq=0, t_ns=0, index=0, name="x", edge="begin")
    client.send_multipart(encode_frames(event, b"wrong-secret-wrong-secret"))
    client.send_multipart(encode_frames(event))  # unsigned
    client.close()
    context.term()
    deadline = time.monotonic() + 10
    received = []
    while session.dropped.get("unauthenticated", 0) < 2 and time.monotonic() < deadline:
        received += session.poll(0.1)
    assert session.dropped == {"unauthenticated": 2}
    assert received == []
    session.stop()
    assert session.outcome.status == "interrupted"


def test_a_second_viewer_on_a_port_in_use_says_so_at_once():
    """The port is bound before anything waits: a second ``collviz view --listen`` on a taken
    port is one line and exit 2, not a viewer waiting for workers that reach the first one."""
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "collviz.app.cli", "view", "--listen", f"127.0.0.1:{port}",
                                 "--headless"], capture_output=True, text=True, timeout=60,
                                env={**os.environ, "COLLVIZ_SECRET": SECRET}, stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"collviz: error: cannot listen on 127.0.0.1:{port}: ")
    assert "Address already in use" in result.stderr and "Traceback" not in result.stderr
    assert time.monotonic() - started < 30
