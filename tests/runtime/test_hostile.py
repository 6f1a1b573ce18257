"""Hang/desync reports, and hostile input on the event socket: dropped, counted, harmless."""

from __future__ import annotations

import faulthandler
import os
import re
import signal
import time
from pathlib import Path

import msgspec
import zmq
from collviz.runtime.observation.watchdog import Stalled
from collviz.runtime.plan import plan_run
from collviz.runtime.scenario_files.loading import find_scenario
from collviz.runtime.sessions.intake import SocketIntake
from collviz.runtime.sessions.local import LocalSession, _RankState
from collviz.runtime.wire.protocol import (
    WIRE_HEADER,
    Buffer,
    Collective,
    Dropped,
    Mismatch,
    Phase,
    RankStart,
    RunEnd,
    Stall,
    encode,
)
from collviz.runtime.wire.trace import read_trace
from collviz.runtime.wire.transport import Collector, Endpoints

from support.cli import run_cli
from support.paths import SCENARIOS
from support.processes import alive
from support.traces import FutureEvent


def _session(name: str, world: int = 4, timeout_s: float = 30.0) -> LocalSession:
    return LocalSession(plan_run(find_scenario(name), world, backend="gloo", timeout_s=timeout_s))


def test_hostile_frames_are_dropped_and_counted_and_the_run_is_unaffected():
    session = _session("all-reduce")
    session.start()
    client_context = zmq.Context()
    client = client_context.socket(zmq.PUSH)
    client.setsockopt(zmq.LINGER, 2000)
    client.connect(session.endpoints.events)
    foreign = Phase(run="not-this-run", rank=0, seq=0, t_ns=0, index=0, name="x", edge="begin")
    ours_bad_rank = Phase(run=session.run_id, rank=99, seq=0, t_ns=0, index=0, name="x", edge="begin")
    hostile = [
        [os.urandom(64)],                                  # one random frame
        [os.urandom(32), os.urandom(32)],                  # two random frames
        [b"collviz/9.0", encode(foreign)],                 # a future protocol version
        [WIRE_HEADER, encode(foreign)],                    # a run that is not ours
        [WIRE_HEADER, encode(ours_bad_rank)],              # a rank that does not exist
        [WIRE_HEADER, b"\x81\xa4type\xa5Bogus"],           # an unknown event type
        [WIRE_HEADER, b"\x00" * (17 * 1024 * 1024)],       # an oversized frame
        [WIRE_HEADER, encode(foreign), b"extra"],          # wrong part count
    ]
    for frames in hostile:
        client.send_multipart(frames)
    client.close()
    client_context.term()
    events = []
    deadline = time.monotonic() + 120
    while not session.finished and time.monotonic() < deadline:
        events.extend(session.poll(0.1))
    assert session.outcome.status == "ok"
    [dropped] = [e for e in events if isinstance(e, Dropped)]
    assert sum(dropped.counts.values()) == len(hostile)
    assert dropped.counts["foreign run"] == 1 and dropped.counts["version"] == 1 and dropped.counts["unknown rank"] == 1
    assert events[-1].dropped == len(hostile)
    after = [e for e in events if isinstance(e, Buffer) and e.moment == "after"]
    expected = (0.1 + -0.2 + 0.4 + -0.1) / 4  # all-reduce.md's four gradients, averaged
    assert len(after) == 4 and all(abs(b.values[0] - expected) < 1e-6 for b in after)


def test_a_swapped_collective_is_a_mismatch_that_ends_the_run_at_once(tmp_path):
    """desync (rank 2 calls all_gather where the others call all_reduce) is caught by the calls'
    fingerprints as soon as they are seen, long before the hang timeout."""
    trace = tmp_path / "desync.cvz"
    started = time.monotonic()
    result = run_cli("desync", "--gpus", "4", "--backend", "gloo", "--headless", "--timeout", "30",
                     "--record", str(trace), timeout=60)
    assert time.monotonic() - started < 20  # not the 30 s hang timeout
    assert result.returncode == 1
    line = ("collective mismatch at call #2 on group world: rank 2 called all_gather(float32 ×8), "
            "where ranks 0, 1, 3 called all_reduce(float32 ×8, sum)")
    assert f"collviz: {line}" in result.stderr, result.stderr
    events = read_trace(trace).events
    assert not [e.pid for e in events if isinstance(e, RankStart) and alive(e.pid)]
    [mismatch] = [e for e in events if isinstance(e, Mismatch)]
    assert mismatch.odd_ranks == [2] and mismatch.text == line
    assert mismatch.calls[2] == "all_gather(float32 ×8)" and mismatch.calls[0] == "all_reduce(float32 ×8, sum)"
    assert isinstance(events[-1], RunEnd) and events[-1].status == "failed" and events[-1].detail == line


def test_a_mismatch_gloo_completes_silently_still_fails_the_run(tmp_path):
    """rank 2's reduce_scatter beside the others' all_reduce completes on gloo; it used to print
    "result: ok" and exit 0."""
    desync = (SCENARIOS / "desync.toml").read_text()
    silent = tmp_path / "silent.toml"
    silent.write_text(desync.replace('name = "desync"', 'name = "silent"')
                      .replace('swap_with = "all_gather"', 'swap_with = "reduce_scatter"'))
    result = run_cli(str(silent), "--gpus", "4", "--backend", "gloo", "--headless", timeout=60)
    assert result.returncode == 1
    assert ("rank 2 called reduce_scatter(float32 ×8, sum), where ranks 0, 1, 3 called "
            "all_reduce(float32 ×8, sum)") in result.stderr


def test_a_rank_that_never_arrives_is_a_hang_blaming_it(tmp_path):
    desync = (SCENARIOS / "desync.toml").read_text()
    skip = tmp_path / "skip.toml"
    skip.write_text(desync.replace('name = "desync"', 'name = "skip"').replace('fault = "swap"', 'fault = "skip"')
                    .replace('swap_with = "all_gather"\n', ""))
    trace = tmp_path / "skip.cvz"
    result = run_cli(str(skip), "--gpus", "4", "--backend", "gloo", "--headless", "--timeout", "5",
                     "--record", str(trace), timeout=60)
    assert result.returncode == 1
    assert re.search(r"collviz: hang: all_reduce #2 on group world: ranks 0, 1, 3 waiting \d+ s; rank 2 ", result.stderr)
    [final] = [line for line in result.stderr.splitlines() if line.startswith("collviz: hang caused by")]
    assert final.startswith("collviz: hang caused by rank 2: all_reduce #2 on group world: ranks 0, 1, 3 waiting ")
    assert "; consequence: rank " in final
    # the stall is reported once the configured 5 s have passed (the launcher checks every 50 ms; a
    # loaded machine may delay it: 1.5 s allowed), well before gloo's own timeout (5 + 3 s); how long
    # the 4 ranks took to start is the machine's, not collviz's (no bound on the whole run)
    events = read_trace(trace).events
    [stall] = [e for e in events if isinstance(e, Stall)]
    entered = min(e.t_ns for e in events if isinstance(e, Collective) and e.edge == "begin" and e.group_seq == 2)
    assert stall.waiting == [0, 1, 3]
    assert 5.0 <= (stall.t_ns - entered) / 1e9 < 6.5
    assert 5.0 <= stall.waited_s < 6.5


def _aborted_child() -> int:
    """A child process that dies of SIGABRT at once, as NCCL's watchdog ends a rank stuck waiting."""
    pid = os.fork()
    if pid == 0:
        faulthandler.disable()
        os.kill(os.getpid(), signal.SIGABRT)
        os._exit(70)
    return pid


def _unstarted_session(tmp_path: Path) -> LocalSession:
    """A 4-rank session with its intake open but no workers started (nothing to tear down): its
    reaping and its cause are tried on the test's own child processes."""
    session = _session("all-reduce")
    session._teardown_started = True
    collector = Collector(session.run_id, Endpoints.in_directory(str(tmp_path)), world_size=4)
    session._intake = SocketIntake(collector, None, 30.0, session.run_id)
    return session


def test_waiters_aborted_after_a_reported_hang_are_its_consequence_not_its_cause(tmp_path):
    session = _unstarted_session(tmp_path)
    stall = Stalled("world", 1, "all_reduce", waiting=[0, 1, 3],
                    elsewhere={2: "rank 2 never arrived (last seen in phase 2 'skip')"}, waited_s=6.0,
                    text="all_reduce #1 on group world: ranks 0, 1, 3 waiting 6 s; rank 2 never arrived")
    session._started_intake.first_stall = stall
    session._ranks = {rank: _RankState(pid=_aborted_child()) for rank in (0, 1, 3)}
    session._ranks[2] = _RankState(pid=0, exited=True, exit_code=-signal.SIGTERM, reaped_order=99)  # ended by collviz
    session._sent.add(signal.SIGTERM)
    deadline = time.monotonic() + 10
    while not all(state.exited for state in session._ranks.values()) and time.monotonic() < deadline:
        session._reap()
        time.sleep(0.01)
    assert {r: s.exit_code for r, s in session._ranks.items()} == {0: -6, 1: -6, 2: -15, 3: -6}
    cause = session._cause()
    assert cause.startswith("hang caused by rank 2: all_reduce #1 on group world: ranks 0, 1, 3 waiting 6 s")
    assert cause.endswith("consequence: rank 0 was killed by SIGABRT before its first phase")
    session._started_intake.collector.close()


def _reap_until_exited(session: LocalSession, rank: int) -> None:
    deadline = time.monotonic() + 10
    while not session._ranks[rank].exited and time.monotonic() < deadline:
        session._reap()
        time.sleep(0.01)


def test_a_rank_aborted_after_a_peer_exited_badly_is_its_consequence(tmp_path):
    session = _unstarted_session(tmp_path)
    session._ranks = {0: _RankState(pid=_aborted_child()), 1: _RankState(pid=0, exited=True, exit_code=1)}
    _reap_until_exited(session, 0)
    assert session._cause() == "rank 1 exited with status 1 before its first phase"
    session._started_intake.collector.close()


def test_a_rank_aborted_before_a_peer_error_was_noted_is_still_its_consequence(tmp_path):
    # NCCL's watchdog aborted rank 0 after rank 1 raised, but the launcher reaped rank 0 first
    # (before rank 1's error was noted, so before any teardown)
    session = _unstarted_session(tmp_path)
    session._teardown_started = False
    session._ranks = {0: _RankState(pid=0, exited=True, exit_code=1), 1: _RankState(pid=0, exited=True, exit_code=1),
                      2: _RankState(pid=_aborted_child())}
    session._ranks[1].error, session._ranks[1].error_t_ns = "ValueError: boom", time.monotonic_ns()
    _reap_until_exited(session, 2)
    assert session._ranks[2].reaped_order == 1 and not session._ranks[2].reaped_in_teardown
    assert session._cause() == "rank 1 failed before its first phase: ValueError: boom"
    session._started_intake.collector.close()


def test_a_rank_aborted_with_no_other_failure_is_the_cause(tmp_path):
    session = _unstarted_session(tmp_path)
    session._teardown_started = False
    session._ranks = {0: _RankState(pid=0, exited=True, exit_code=0), 1: _RankState(pid=_aborted_child()),
                      2: _RankState(pid=0, exited=True, exit_code=0), 3: _RankState(pid=0, exited=True, exit_code=0)}
    _reap_until_exited(session, 1)
    assert session._cause() == "rank 1 was killed by SIGABRT before its first phase"
    session._started_intake.collector.close()


def test_a_rank_dead_of_another_signal_is_the_cause_over_its_peers_errors(tmp_path):
    session = _unstarted_session(tmp_path)
    session._teardown_started = False
    pid = os.fork()
    if pid == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    session._ranks = {0: _RankState(pid=0, exited=True, exit_code=1, error="RuntimeError: Connection closed by peer",
                                    error_t_ns=1), 1: _RankState(pid=pid)}
    _reap_until_exited(session, 1)
    assert session._cause() == "rank 1 was killed by SIGKILL before its first phase"
    session._started_intake.collector.close()


def test_a_rank_killed_first_but_reaped_after_the_teardown_began_is_still_the_cause(tmp_path):
    """The kernel closes a dying rank's sockets before its exit can be waited for: its peers'
    "Connection closed by peer" can arrive, and the teardown begin, before it is reaped (seen
    under load: the run blamed rank 0's error). A SIGKILL collviz did not send is still the cause."""
    session = _unstarted_session(tmp_path)  # the teardown has begun
    pid = os.fork()
    if pid == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    closed = "RuntimeError: Connection closed by peer"
    session._ranks = {rank: _RankState(pid=0, exited=True, exit_code=1, error=closed, error_t_ns=rank + 1)
                      for rank in (0, 2, 3)}
    session._ranks[1] = _RankState(pid=pid)
    _reap_until_exited(session, 1)
    assert session._ranks[1].reaped_in_teardown
    assert session._cause() == "rank 1 was killed by SIGKILL before its first phase"
    session._started_intake.collector.close()


def test_a_newer_minor_workers_unknown_events_are_skipped_without_a_false_gap(tmp_path):
    collector = Collector("r", Endpoints.in_directory(str(tmp_path)), world_size=2)
    context = zmq.Context()
    worker = context.socket(zmq.PUSH)
    worker.setsockopt(zmq.LINGER, 2000)
    worker.connect(f"ipc://{tmp_path}/events")
    phase = Phase(run="r", rank=1, seq=0, t_ns=0, index=0, name="x", edge="begin")
    sent = [
        [WIRE_HEADER, encode(phase)],
        [b"collviz/1.4", msgspec.msgpack.encode(FutureEvent(run="r", rank=1, seq=1, t_ns=0))],
        [b"collviz/1.4", encode(msgspec.structs.replace(phase, seq=2))],
        [WIRE_HEADER, encode(msgspec.structs.replace(phase, seq=4))],  # seq 3 really was lost
    ]
    for frames in sent:
        worker.send_multipart(frames)
    received = []
    deadline = time.monotonic() + 30
    while len(received) < 3 and time.monotonic() < deadline:
        received += [event.seq for event, _ in collector.receive(0.1)]
    worker.close()
    context.term()
    collector.close()
    assert received == [0, 2, 4]
    assert collector.dropped == {"newer event type": 1, "lost (sequence gap)": 1}
