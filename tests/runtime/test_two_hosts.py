"""Two hosts made as network namespaces joined by a veth pair, 10.77.0.1 (host A) and 10.77.0.2
(host B): addresses that exist only inside them. Each runs one node of a gloo job under plain
``torch.distributed.run`` (``--nnodes 2 --node-rank K --master-addr 10.77.0.1``, two ranks per
node), each rank opening torch's debug server (its worker server's address in the job's store);
rank 3, on host B, stalls in its own function while ranks 0–2 wait in the next all_reduce.
``collviz attach 10.77.0.1:PORT`` from host A, through the store, names rank 3, its host and its
line. Each host has its own hostname (a UTS namespace: ``unshare --uts``), its address, since
``start_debug_server`` registers ``http://{hostname}:PORT`` and no name service resolves names here.

Needs root and ``ip netns`` (CI runs as root); skipped in one line where namespaces cannot be
made (a failure instead with ``COLLVIZ_REQUIRE_NETNS=1``, as ``.ci/run`` sets where root may make one). The namespaces
(and the veth pair with them) are deleted in a ``finally``.

Expected lines are written from the job script below (its calls and its own line numbers)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.attach_job import SLOW_DATA_LOADER, line_of

CALLS_BEFORE = 3
PORT = 29517
HOSTS = ("10.77.0.1", "10.77.0.2")
DEADLINE_S = 90
"""How long each step may take on a loaded machine (a condition is waited for, never a pause)."""

JOB = textwrap.dedent(f'''
    import os, sys, time, types
    from pathlib import Path
    import torch
    import torch.distributed as dist
    sys.modules.setdefault("tabulate", types.SimpleNamespace(tabulate=lambda *a, **k: ""))  # torch's frontend's
    from torch.distributed.debug import start_debug_server

    folder = Path(sys.argv[1])

    {SLOW_DATA_LOADER}
    def main():
        start_debug_server(port=int(sys.argv[2]))
        dist.init_process_group("gloo")
        try:
            for _ in range({CALLS_BEFORE}):
                dist.all_reduce(torch.ones(4))
            if dist.get_rank() == 3:
                slow_data_loader()
            dist.all_reduce(torch.ones(4))
        finally:
            dist.destroy_process_group()

    main()
''')
STALLED_LINE = line_of(JOB, "the stalled line")

INSIDE = textwrap.dedent(f'''
    import json, sys, time
    from collviz.runtime.live.store import debug_server_workers
    from collviz.runtime.live.workers import Worker, ask_all
    deadline = time.monotonic() + {DEADLINE_S}
    while time.monotonic() < deadline:
        try:
            workers = [Worker(r, url) for r, url in debug_server_workers("{HOSTS[0]}", {PORT}, 2.0)]
        except Exception:
            workers = []
        answers = ask_all(workers, "fr_trace_json", 2.0) if len(workers) == 4 else {{}}
        if answers and all(answers[r].body and any(e.get("collective_seq_id") == {CALLS_BEFORE + 1}
                                                   for e in json.loads(answers[r].body).get("entries", [])) for r in (0, 1, 2)):
            sys.exit(0)
        time.sleep(0.2)
    sys.exit("ranks 0-2 never entered all_reduce #{CALLS_BEFORE + 1}")
''')
"""Run on host A: waits until ranks 0–2 are inside the all_reduce rank 3 has not issued."""


def _cannot(reason: str) -> None:
    """Skip (or, where CI requires the two hosts, fail) for ``reason``."""
    if os.environ.get("COLLVIZ_REQUIRE_NETNS"):
        pytest.fail(f"COLLVIZ_REQUIRE_NETNS is set, but {reason}")
    pytest.skip(reason)


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL)


@contextmanager
def _two_hosts() -> Iterator[list[tuple[str, str, str]]]:
    """Host A and B: each one's namespace, its end of the veth pair and its address; skips where
    they cannot be made."""
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        _cannot("no ip or unshare command here (iproute2, util-linux): the two hosts cannot be made")
    tag = f"cvz{os.getpid() % 100000}"
    names, veths = (f"{tag}a", f"{tag}b"), (f"{tag}va", f"{tag}vb")
    made: list[str] = []
    try:
        for name in names:
            added = _ip("netns", "add", name)
            if added.returncode != 0:
                _cannot(f"ip netns add is not permitted here: {added.stderr.strip().splitlines()[0]}")
            made.append(name)
        for command in (["link", "add", veths[0], "type", "veth", "peer", "name", veths[1]],
                        ["link", "set", veths[0], "netns", names[0]], ["link", "set", veths[1], "netns", names[1]]):
            done = _ip(*command)
            assert done.returncode == 0, done.stderr
        for name, veth, address in zip(names, veths, HOSTS):
            for command in (["addr", "add", f"{address}/24", "dev", veth], ["link", "set", veth, "up"],
                            ["link", "set", "lo", "up"]):
                done = _ip("netns", "exec", name, "ip", *command)
                assert done.returncode == 0, done.stderr
        yield list(zip(names, veths, HOSTS))
    finally:
        for name in made:
            _ip("netns", "del", name)  # its end of the veth pair goes with it, and so the pair


def _on(host: str, address: str, *command: str) -> list[str]:
    """``command`` on ``host`` (its namespace), under its own hostname: its address."""
    return ["ip", "netns", "exec", host, "unshare", "--uts", "sh", "-c", f'hostname {address} && exec "$@"', "sh",
            *command]


def test_attach_from_host_a_names_the_rank_stalled_on_host_b(tmp_path: Path):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "TORCH_CPP_LOG_LEVEL": "ERROR"}
    with _two_hosts() as hosts:
        nodes = []
        try:
            for node, (host, veth, address) in enumerate(hosts):
                with socket.socket() as probe:  # a port for torch's frontend (rank 0's), which collviz does not use
                    probe.bind(("127.0.0.1", 0))
                    frontend = probe.getsockname()[1]
                nodes.append(subprocess.Popen(
                    _on(host, address, sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank",
                        str(node), "--nproc-per-node", "2", "--master-addr", HOSTS[0], "--master-port", str(PORT),
                        str(script), str(tmp_path), str(frontend)),
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                    env={**environment, "GLOO_SOCKET_IFNAME": veth}, stdin=subprocess.DEVNULL))
            host_a = hosts[0][0]
            inside = subprocess.run(_on(host_a, HOSTS[0], sys.executable, "-c", INSIDE), capture_output=True,
                                    text=True, timeout=DEADLINE_S + 15, env=environment, stdin=subprocess.DEVNULL)
            assert inside.returncode == 0 and (tmp_path / "stalling").exists(), inside.stderr[-3000:]
            attached = subprocess.run(_on(host_a, HOSTS[0], sys.executable, "-m", "collviz.app.cli", "attach",
                                          "--headless", f"{HOSTS[0]}:{PORT}"),
                                      capture_output=True, text=True, timeout=DEADLINE_S, env=environment,
                                      stdin=subprocess.DEVNULL)
            (tmp_path / "release").touch()
            ends = [node.communicate(timeout=DEADLINE_S) for node in nodes]
        finally:
            (tmp_path / "release").touch()  # a failed check leaves no rank stalled
            for node in nodes:
                if node.poll() is None:
                    node.terminate()  # torchrun's agent ends its ranks on SIGTERM
                    try:
                        node.wait(DEADLINE_S)
                    except subprocess.TimeoutExpired:
                        node.kill()
                        node.wait()
    assert attached.returncode == 1, attached.stderr
    done, waited = "last completed all_reduce #3 on group 0 (default_pg)", "all_reduce #4 on group 0 (default_pg)"
    assert attached.stdout.splitlines() == [
        f"collviz attach: the worker servers of 4 ranks at {HOSTS[0]}:{PORT}",
        f"rank 0 on {HOSTS[0]}: {done}; now in {waited}",
        f"rank 1 on {HOSTS[0]}: {done}; now in {waited}",
        f"rank 2 on {HOSTS[1]}: {done}; now in {waited}",
        f"rank 3 on {HOSTS[1]}: {done}; in no collective",
        f"waiting: {waited}: ranks 0–2 wait for rank 3",
        f"  rank 3 is missing from the call, at job.py:{STALLED_LINE} in slow_data_loader"]
    assert [node.returncode for node in nodes] == [0, 0], [err[-2000:] for _, err in ends]
