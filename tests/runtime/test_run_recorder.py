"""``collviz run --nproc 2 --headless SCRIPT.py`` by default: each rank runs the script as it is,
with torch's Flight Recorder on and its worker server on ``rank<r>.sock``, dumps its recorder as it
ends, and the launcher reads the dumps. Real 2-rank gloo runs, each once for the session.

The expected calls are the ones the script below makes, written out by hand: their ops, sizes
(elements × 4 bytes for float32, × 8 for float64) and sequence numbers (the world group's calls
numbered from 1 in issue order).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from collviz.runtime.sessions.rank_output import line_prefix
from collviz.runtime.wire.protocol import Collective, ProcessExit, RankEnd, RunEnd, Stall
from collviz.runtime.wire.trace import read_trace

from support.paths import ROOT

SCRIPT = textwrap.dedent('''
    import glob, os, socket, sys, tempfile, time
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    print(f"hello from {rank}")
    for count in (3, 50, 700):
        dist.all_reduce(torch.ones(count))
    gathered = [torch.zeros(4) for _ in range(2)]
    dist.all_gather(gathered, torch.ones(4))
    dist.broadcast(torch.zeros(9, dtype=torch.float64), src=0)
    for path in glob.glob(os.path.join(tempfile.gettempdir(), "collviz-*", f"rank{rank}.sock")):
        with socket.socket(socket.AF_UNIX) as server:  # the rank's own worker server answers while it runs
            server.connect(path)
            server.sendall(b"POST /handler/ping HTTP/1.0\\r\\nContent-Length: 0\\r\\n\\r\\n")
            print("worker server:", server.recv(64).split(b"\\r\\n")[0].decode())
    if sys.argv[1:] == ["fail"] and rank == 1:
        raise RuntimeError("rank one gives up")
    if sys.argv[1:] == ["kill"] and rank == 1:
        os.kill(os.getpid(), 9)
    if sys.argv[1:] == ["stall"] and rank == 1:
        print("stalling", flush=True)
        time.sleep(120)
    if sys.argv[1:] == ["stall"]:
        print("into the barrier", flush=True)
    dist.barrier()
''')

RAISING_SCRIPT = textwrap.dedent('''
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    for _ in range(2):
        dist.all_reduce(torch.ones(8))
    if dist.get_rank() == 1:
        raise RuntimeError("rank one gives up")
    dist.all_reduce(torch.ones(8))
''')
"""Two calls on every rank, then rank 1 raises while the others make a third."""

CALLS = [("all_reduce", 1, 12, 12), ("all_reduce", 2, 200, 200), ("all_reduce", 3, 2800, 2800),
         ("all_gather", 4, 16, 32), ("broadcast", 5, 72, 72), ("barrier", 6, 0, 0)]
"""(op, sequence number, bytes in, bytes out) of every call the script makes on each rank."""

DDP_ARGS = {"steps": 2, "dim": 16, "layers": 2}

DEADLINE_S = 120


def _run(folder: Path, name: str, *args: str, options: tuple[str, ...] = (), script: Path | None = None) -> dict:
    """``collviz run --nproc 2 --headless --record`` of ``script`` (the one above unless given) with
    ``args``, its temporary folder a private one (to see what the run leaves there)."""
    tmp = folder / f"{name}-tmp"
    tmp.mkdir()
    trace = folder / f"{name}.cvz"
    result = subprocess.run([sys.executable, "-m", "collviz.app.cli", "run", "--nproc", "2", "--headless", "--record",
                             str(trace), *options, str(script or folder / "calls.py"), *args], capture_output=True,
                            text=True,
                            timeout=DEADLINE_S, stdin=subprocess.DEVNULL, env={**os.environ, "TMPDIR": str(tmp)})
    return {"result": result, "events": read_trace(trace).events if trace.exists() else [], "tmp": tmp}


def _interrupted(folder: Path) -> dict:
    """The script with rank 1 stalling while rank 0 waits in the barrier: Ctrl-C (SIGINT) once
    both ranks are there."""
    trace = folder / "stall.cvz"
    process = subprocess.Popen([sys.executable, "-m", "collviz.app.cli", "run", "--nproc", "2", "--headless",
                                "--record", str(trace), str(folder / "calls.py"), "stall"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    try:
        seen = ""
        deadline = time.monotonic() + DEADLINE_S
        while not ("stalling" in seen and "into the barrier" in seen) and time.monotonic() < deadline:
            seen += process.stdout.readline()
        time.sleep(0.5)  # rank 0 said it goes into the barrier: it is in it by now, however loaded the machine
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=DEADLINE_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return {"code": process.returncode, "stdout": seen + out, "stderr": err,
            "events": read_trace(trace).events if trace.exists() else []}


@pytest.fixture(scope="session")
def recorded_runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The script run to its end, with rank 1 raising, killed (SIGKILL: no dump) and stalling
    until Ctrl-C, and observed (``--observe``); a script of no calls; the DDP example read from
    Flight Recorder."""
    folder = tmp_path_factory.mktemp("run_recorder")
    (folder / "calls.py").write_text(SCRIPT)
    (folder / "quiet.py").write_text('print("no collectives here")\n')
    (folder / "raising.py").write_text(RAISING_SCRIPT)
    return {
        "quiet": _run(folder, "quiet", script=folder / "quiet.py"),
        "ok": _run(folder, "ok"),
        "fail": _run(folder, "fail", "fail"),
        "fail4": _run(folder, "fail4", options=("--nproc", "4"), script=folder / "raising.py"),
        "stall": _interrupted(folder),
        "kill": _run(folder, "kill", "kill"),
        "observed": _run(folder, "observed", options=("--observe",)),
        "ddp": _run(folder, "ddp", *(f"--{key}={value}" for key, value in DDP_ARGS.items()),
                    script=ROOT / "examples" / "ddp_train.py"),
    }


def _calls(events: list, rank: int, edge: str) -> list[tuple[str, int, int, int]]:
    """``rank``'s calls as (op, sequence number, bytes in, bytes out): those it issued (``begin``),
    or those its recorder shows completed (``end``)."""
    return [(e.op, e.group_seq, e.bytes_in, e.bytes_out) for e in events
            if isinstance(e, Collective) and e.rank == rank and e.edge == edge]


def test_the_scripts_own_lines_reach_the_terminal_rank_prefixed(recorded_runs):
    result = recorded_runs["ok"]["result"]
    assert result.returncode == 0, result.stderr
    for rank in (0, 1):
        lines = [line.removeprefix(line_prefix(rank)) for line in result.stdout.splitlines()
                 if line.startswith(line_prefix(rank))]
        assert lines == [f"hello from {rank}", "worker server: HTTP/1.1 200 OK"]
    assert "WorkerServer" not in result.stderr, "torch's server messages are not the script's lines"


def test_the_summary_lists_every_call_the_script_made_by_value(recorded_runs):
    run = recorded_runs["ok"]
    for rank in (0, 1):  # issued: gloo's recorder may leave a call it completed unretired (a race in torch)
        assert _calls(run["events"], rank, "begin") == CALLS
    assert all(e.duration_ns is None for e in run["events"] if isinstance(e, Collective)), \
        "gloo's Flight Recorder does not time calls: none is shown timed"
    summary = run["result"].stdout
    for op, seq, _, _ in CALLS:
        assert f"{op} #{seq} on group 0 (default_pg)" in summary
    assert "all_reduce 2.7 KiB → 2.7 KiB" in summary  # 700 float32 elements: 2,800 bytes
    assert summary.rstrip().splitlines()[-1].startswith("result: ok")


@pytest.mark.parametrize("name", ["ok", "fail", "stall", "kill"])
def test_each_ranks_events_are_numbered_once_and_without_gaps(recorded_runs, name):
    """The ranks' own RankEnd events are messages to the launcher, not part of the stream: the
    events of each rank, from its dump, are numbered 0, 1, 2, … once."""
    events = recorded_runs[name]["events"]
    for rank in {e.rank for e in events}:
        seqs = [e.seq for e in events if e.rank == rank]
        assert seqs == list(range(len(seqs))), (rank, seqs)
    assert sum(isinstance(e, RankEnd) and e.rank == 1 for e in events) <= 1


@pytest.mark.parametrize("name", ["ok", "quiet"])
def test_a_successful_run_leaves_no_socket_dump_or_folder(recorded_runs, name):
    assert recorded_runs[name]["result"].returncode == 0, recorded_runs[name]["result"].stderr
    assert list(recorded_runs[name]["tmp"].iterdir()) == []


def test_a_script_of_no_calls_ends_and_says_so(recorded_runs):
    """Its ranks' worker servers open and shut at once (torch's server, shut before its accept loop
    ran, never ended: each rank waits for its first answer)."""
    result = recorded_runs["quiet"]["result"]
    assert sorted(line for line in result.stdout.splitlines() if line.startswith("[rank")) == \
        ["[rank0]: no collectives here", "[rank1]: no collectives here"]
    assert "collviz: warning: no rank's Flight Recorder holds a collective call" in result.stderr
    assert not [e for e in recorded_runs["quiet"]["events"] if isinstance(e, Collective)]


def test_a_rank_that_raises_is_named_with_its_error_and_its_peers_dump_is_read(recorded_runs):
    run = recorded_runs["fail"]
    result = run["result"]
    assert result.returncode == 1
    cause = next(line for line in result.stderr.splitlines() if line.startswith("collviz: rank "))
    assert cause.startswith("collviz: rank 1 failed") and "RuntimeError: rank one gives up" in cause
    assert _calls(run["events"], 1, "begin") == CALLS[:5]
    assert _calls(run["events"], 0, "begin")[:5] == CALLS[:5], "rank 0's dump was read"
    ends = {e.rank: e for e in run["events"] if isinstance(e, RankEnd)}
    assert ends[1].status == "error" and "rank one gives up" in ends[1].error
    assert next(e for e in run["events"] if isinstance(e, RunEnd)).status == "failed"
    kept = [path for path in run["tmp"].iterdir()]
    assert len(kept) == 1 and not list(kept[0].glob("*.sock")), "a failed run keeps its logs and dumps, no socket"
    assert sorted(p.name for p in kept[0].glob("fr_rank*.json")) == ["fr_rank0.json", "fr_rank1.json"]


def test_a_rank_that_raises_while_its_peers_wait_for_it_is_no_hang(recorded_runs):
    # ranks 0, 2 and 3 wait in their third all_reduce for rank 1, which raised: its error is the story
    run = recorded_runs["fail4"]
    result = run["result"]
    assert result.returncode == 1
    [cause] = [line for line in result.stderr.splitlines() if line.startswith("collviz: rank ")]
    assert cause.startswith("collviz: rank 1 failed") and "RuntimeError: rank one gives up" in cause
    assert not [line for line in (result.stdout + result.stderr).splitlines() if "hang" in line or "missing" in line]
    assert not [e for e in run["events"] if isinstance(e, Stall)]
    assert _calls(run["events"], 1, "begin") == [("all_reduce", 1, 32, 32), ("all_reduce", 2, 32, 32)]


def test_a_rank_killed_before_it_could_dump_is_unknown_and_its_peer_still_read(recorded_runs):
    run = recorded_runs["kill"]
    result = run["result"]
    assert result.returncode == 1
    assert "collviz: rank 1 was killed by SIGKILL" in result.stderr
    assert "collviz: warning: no dump of rank 1" in result.stderr
    assert _calls(run["events"], 0, "begin")[:5] == CALLS[:5]
    # what a live reading showed of rank 1 before it died (if one came in time) is its first calls, in order
    shown = _calls(run["events"], 1, "begin")
    assert shown == CALLS[:len(shown)]


def test_ctrl_c_on_a_stalled_run_reads_where_each_rank_waits(recorded_runs):
    run = recorded_runs["stall"]
    assert run["code"] == 128 + signal.SIGINT, run["stderr"]
    # rank 0 waits in the barrier (its 6th call); rank 1, asleep in its own code, dumped from its dump thread
    assert _calls(run["events"], 1, "begin") == CALLS[:5]
    assert _calls(run["events"], 0, "begin") == CALLS
    stall = next(e for e in run["events"] if isinstance(e, Stall))
    assert stall.op == "barrier" and stall.waiting == [0] and "rank 1" in stall.elsewhere[0]
    assert {e.target for e in run["events"] if isinstance(e, ProcessExit)} == {0, 1}


def test_observe_still_times_every_call(recorded_runs):
    run = recorded_runs["observed"]
    assert run["result"].returncode == 0, run["result"].stderr
    calls = [e for e in run["events"] if isinstance(e, Collective) and e.edge == "end"]
    assert sorted((e.op, e.group_seq) for e in calls if e.rank == 0) == sorted((op, seq) for op, seq, _, _ in CALLS)
    assert all(e.duration_ns and e.clock == "host" for e in calls)


def test_the_ddp_example_runs_headless_read_from_flight_recorder(recorded_runs):
    run = recorded_runs["ddp"]
    assert run["result"].returncode == 0, run["result"].stderr
    spec = importlib.util.spec_from_file_location("example_ddp_train", ROOT / "examples" / "ddp_train.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    model = example.build_model(DDP_ARGS["dim"], DDP_ARGS["layers"])
    gradient_bytes = 4 * sum(p.numel() for p in model.parameters())  # float32, under DDP's first bucket
    for rank in (0, 1):
        reduced = [call for call in _calls(run["events"], rank, "begin") if call[0] == "all_reduce"]
        assert [call[2] for call in reduced] == [gradient_bytes] * DDP_ARGS["steps"], "one all-reduce a training step"


def test_a_ranks_recorders_are_joined_into_one_dump():
    """torch built with NCCL keeps NCCL's calls in a recorder of their own: the rank's dump holds both."""
    from collviz.runtime.userjob.recorder import merged_dump

    gloo = {"version": "2.10", "entries": [{"collective_seq_id": 1}], "pg_config": {"1": {"desc": "cpu"}},
            "pg_status": {"1": {"last_completed_collective": "1"}}}
    nccl = {"version": "2.10", "entries": [{"collective_seq_id": 7}], "pg_config": {"0": {"desc": "default_pg"}},
            "pg_status": {"0": {"last_completed_collective": "7"}}}
    empty = {"version": "2.10", "pg_config": {}, "pg_status": {}}
    assert merged_dump([gloo, empty]) == gloo
    assert merged_dump([empty, empty]) == empty
    joined = merged_dump([gloo, nccl])
    assert joined["entries"] == [{"collective_seq_id": 1}, {"collective_seq_id": 7}]
    assert joined["pg_config"] == {"0": {"desc": "default_pg"}, "1": {"desc": "cpu"}}
    assert set(joined["pg_status"]) == {"0", "1"}
    # one group made with "cpu:gloo,cuda:nccl": each recorder's calls, joined in the order they were made
    gloo_calls = {**gloo, "entries": [{"collective_seq_id": 1, "profiling_name": "gloo:all_reduce", "time_created_ns": 10},
                                      {"collective_seq_id": 2, "profiling_name": "gloo:all_reduce", "time_created_ns": 30}]}
    nccl_calls = {**nccl, "entries": [{"collective_seq_id": 1, "profiling_name": "nccl:all_reduce", "time_created_ns": 20}]}
    assert [e["time_created_ns"] for e in merged_dump([gloo_calls, nccl_calls])["entries"]] == [10, 20, 30]


class _FakeCuda:
    """torch.cuda on a machine whose script uses GPU ``current``: what collviz asks of it, in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, current: int, initialized: bool = True) -> None:
        import torch

        self.calls: list[tuple[str, object]] = []
        monkeypatch.setattr(torch.cuda, "is_initialized", lambda: initialized)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: current)
        monkeypatch.setattr(torch.cuda, "set_device", lambda device: self.calls.append(("set_device", device)))
        monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: self.calls.append(("synchronize", device)))


def _closed_pipe() -> int:
    read, write = os.pipe()
    os.close(write)
    return read


def test_the_dump_thread_reads_the_recorder_on_the_ranks_own_gpu(monkeypatch, tmp_path):
    import torch

    from collviz.runtime.userjob import recorder

    cuda = _FakeCuda(monkeypatch, current=0)
    monkeypatch.setattr(recorder, "recorder_json", lambda: cuda.calls.append(("dump", None)) or b'{"entries": []}')
    dumper = recorder._Dumper(tmp_path / "fr_rank3.json", torch.device("cuda", 3))
    dumper.on_request(_closed_pipe())
    assert cuda.calls == [("set_device", torch.device("cuda", 3)), ("dump", None)]
    assert (tmp_path / "fr_rank3.json").read_bytes() == b'{"entries": []}'


def test_the_dump_thread_creates_no_cuda_context_where_the_rank_uses_none(monkeypatch, tmp_path):
    import torch

    from collviz.runtime.userjob import recorder

    cuda = _FakeCuda(monkeypatch, current=0, initialized=False)
    monkeypatch.setattr(recorder, "recorder_json", lambda: None)
    recorder._Dumper(tmp_path / "fr_rank1.json", torch.device("cuda", 1)).on_request(_closed_pipe())
    recorder._Dumper(tmp_path / "fr_rank0.json", torch.device("cpu")).on_request(_closed_pipe())
    assert cuda.calls == []


def test_the_last_dump_waits_for_the_scripts_device_to_finish_its_queued_calls(monkeypatch, tmp_path):
    import contextlib
    import threading

    import torch

    from collviz.runtime.userjob import recorder

    cuda = _FakeCuda(monkeypatch, current=2)
    for name in (recorder.FR_BUFFER_ENV, *recorder.WATCHDOG_DUMP_ENVS):  # set by the rank: gone after the test
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(recorder, "_worker_server", lambda path: contextlib.nullcontext())
    monkeypatch.setattr(recorder, "recorder_json", lambda: cuda.calls.append(("dump", None)) or b"{}")
    read, write = os.pipe()
    with recorder.recorded_rank(recorder.RecorderPlace(str(tmp_path), read), 2, torch.device("cuda", 2)):
        cuda.calls.append(("script", None))
    assert cuda.calls == [("script", None), ("synchronize", torch.device("cuda", 2)), ("dump", None)]
    [thread] = [t for t in threading.enumerate() if t.name == "collviz-fr-dump"]
    os.close(write)  # the launcher's request, never made: the rank's dump thread ends
    thread.join(DEADLINE_S)


def test_a_device_that_never_finishes_costs_the_last_dump_a_bounded_wait(monkeypatch):
    import threading

    import torch

    from collviz.runtime.userjob import recorder

    _FakeCuda(monkeypatch, current=1)
    never = threading.Event()
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: never.wait())
    recorder._finish_device_work(0.01)  # returns although the device never finishes
    never.set()


class _RetiredLate:
    """torch's gloo recorder as a script's last call (the world's all_reduce #2) ends: its group's
    status says the call completed from the first look (gloo's thread sets it before it retires the
    entry), the entry itself is retired from look ``retired_at`` on (never, for None) — the thread
    waited its turn on a loaded machine."""

    def __init__(self, retired_at: int | None) -> None:
        self.retired_at = retired_at
        self.looks = 0

    def __call__(self, include_collectives: bool, only_active: bool) -> bytes:
        self.looks += 1
        done = self.retired_at is not None and self.looks >= self.retired_at
        status = {"last_enqueued_collective": "2", "last_started_collective": "2", "last_completed_collective": "2"}
        dump: dict = {"version": "2.10", "pg_config": {"": {"name": "", "desc": "default_pg", "ranks": "[0, 1]"}},
                      "pg_status": {"0": status}}
        if include_collectives:
            dump["entries"] = [{"collective_seq_id": seq, "profiling_name": "gloo:all_reduce", "retired": retired,
                                "state": "completed" if retired else "started"}
                               for seq, retired in ((1, True), (2, done))]
        return json.dumps(dump).encode()


def _last_dump(monkeypatch: pytest.MonkeyPatch, path: Path, gloo: _RetiredLate, settle_s: float) -> list[tuple]:
    """(sequence number, retired, state) of each call of the dump a rank whose recorder is ``gloo``
    writes to ``path`` as its script ends, its last calls given ``settle_s``."""
    import torch

    from collviz.runtime.userjob import recorder

    monkeypatch.setattr(recorder, "_recorders", lambda: [gloo])
    recorder._Dumper(path, torch.device("cpu")).dump(settle_s)
    return [(e["collective_seq_id"], e["retired"], e["state"]) for e in json.loads(path.read_text())["entries"]]


def test_the_last_dump_holds_the_last_call_retired_though_gloo_retires_it_after_its_status(monkeypatch, tmp_path):
    """The status said "completed" while the entry still read "started": the dump taken then showed
    the script's last call never left (rank 3's second all_reduce without an end, under load)."""
    gloo = _RetiredLate(retired_at=3)
    assert _last_dump(monkeypatch, tmp_path / "fr_rank3.json", gloo, DEADLINE_S) == [
        (1, True, "completed"), (2, True, "completed")]
    assert gloo.looks == 3


def test_a_last_call_that_never_completes_is_dumped_as_it_is_after_a_bounded_wait(monkeypatch, tmp_path):
    gloo = _RetiredLate(retired_at=None)
    assert _last_dump(monkeypatch, tmp_path / "fr_rank1.json", gloo, 0.05) == [
        (1, True, "completed"), (2, False, "started")]
    assert gloo.looks >= 2  # looked again before giving up


def test_a_process_that_registered_the_status_handler_ends_normally():
    """torch's handler registry, a C++ global, is destroyed after the interpreter has ended; the
    interpreter clears the names of the modules still alive as it ends (the recorder's is kept
    alive here from ``sys``, as a test module holding it keeps it under pytest), leaving the
    registry's reference to the handler the last: freed then, it aborted the process (status 134,
    "PyThreadState_Get … finalizing")."""
    program = ("import sys\n"
               "from collviz.runtime.userjob import recorder\n"
               "recorder._register_status_handler()\n"
               "recorder._register_status_handler()  # once a process: the second does nothing\n"
               "sys.kept_to_the_end = recorder\n")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=DEADLINE_S)
    assert (result.returncode, result.stderr) == (0, "")


ANSWERING_AT_EXIT_SCRIPT = textwrap.dedent('''
    import glob, os, socket, tempfile, threading
    import torch._C._distributed_c10d as c10d

    entered_read, entered_write = os.pipe()

    def answer_never(request, response):  # a handler the server is still running as the script ends
        os.write(entered_write, b"in")
        threading.Event().wait()

    c10d._register_handler("answer_never", answer_never)
    [path] = glob.glob(os.path.join(tempfile.gettempdir(), "collviz-*", f"rank{os.environ['RANK']}.sock"))
    client = socket.socket(socket.AF_UNIX)
    client.connect(path)
    client.sendall(b"POST /handler/answer_never HTTP/1.0\\r\\nContent-Length: 0\\r\\n\\r\\n")
    assert os.read(entered_read, 2) == b"in"
    print("ending while the server answers", flush=True)
''')
"""Each rank's script ends while a thread of its worker server runs a Python handler that never
returns: the handler has started (it said so on a pipe) before the script ends."""


def test_a_rank_ends_while_its_worker_server_still_runs_a_python_handler(tmp_path):
    """torch's ``_WorkerServer.shutdown`` joins the server's threads holding the interpreter lock:
    a handler thread waiting for that lock, or one that does not return, hung the rank at its exit
    (``benchmarks/run_overhead.py``, under load). The rank leaves its server to its process's end."""
    (tmp_path / "answering.py").write_text(ANSWERING_AT_EXIT_SCRIPT)
    result = _run(tmp_path, "answering", script=tmp_path / "answering.py")["result"]
    assert result.returncode == 0, result.stderr
    assert sorted(line for line in result.stdout.splitlines() if line.startswith("[rank")) == \
        ["[rank0]: ending while the server answers", "[rank1]: ending while the server answers"]


def _environment_in_the_script(monkeypatch: pytest.MonkeyPatch, folder: Path) -> dict[str, str | None]:
    """The watchdog's dump variables as a script run by :func:`recorded_rank` in ``folder`` sees them."""
    import contextlib

    import torch

    from collviz.runtime.userjob import recorder

    monkeypatch.setattr(recorder, "_worker_server", lambda path: contextlib.nullcontext())
    monkeypatch.setattr(recorder, "_Dumper", lambda path, device: _NoDumps())
    monkeypatch.delenv(recorder.FR_BUFFER_ENV, raising=False)  # set by the rank: gone after the test
    seen: dict[str, str | None] = {}
    with recorder.recorded_rank(recorder.RecorderPlace(str(folder), _closed_pipe()), 3, torch.device("cpu")):
        seen = {name: os.environ.get(name) for name in ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")}
    return seen


class _NoDumps:
    def on_request(self, fd: int) -> None:
        pass

    def dump(self, settle_s: float = 0.0) -> None:
        pass


def test_the_watchdogs_dumps_go_to_the_runs_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCH_FR_DUMP_TEMP_FILE", raising=False)
    monkeypatch.delenv("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", raising=False)
    prefix = f"{tmp_path}/nccl_trace_rank_"  # torch adds the rank: nccl_trace_rank_3
    assert _environment_in_the_script(monkeypatch, tmp_path) == {
        "TORCH_FR_DUMP_TEMP_FILE": prefix, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": prefix}


@pytest.mark.parametrize("name", ["TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"])
def test_the_users_own_watchdog_dump_file_is_kept(monkeypatch, tmp_path, name):
    monkeypatch.delenv("TORCH_FR_DUMP_TEMP_FILE", raising=False)
    monkeypatch.delenv("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", raising=False)
    monkeypatch.setenv(name, "/scratch/mine/trace_")
    other = "TORCH_NCCL_DEBUG_INFO_TEMP_FILE" if name == "TORCH_FR_DUMP_TEMP_FILE" else "TORCH_FR_DUMP_TEMP_FILE"
    assert _environment_in_the_script(monkeypatch, tmp_path) == {name: "/scratch/mine/trace_", other: None}
