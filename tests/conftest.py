"""Shared fixtures: real multi-rank runs happen once per session and are asserted on many times.
(And one line that is no fixture: Hypothesis's profile is loaded here, before any test module.)"""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pytest
import torch.distributed as dist

from collviz.runtime.wire.trace import TraceContents, read_trace

from support import artifact_jobs
from support.cli import run_cli
from support.hypothesis_profiles import load_profile
from support.nodes import identity
from support.recordings import ScenarioRuns
from support.scenarios import COLLECTIVE_SCENARIOS, DDP_REFUSAL
from support.training import N, single_process_step

pytest_plugins = ["support.run_order"]
"""--reverse-order and --shuffle-seed N (tests/support/run_order.py): the suite runs in any order."""
load_profile()  # Hypothesis's profile (repeatable unless asked to explore), loaded before any test is collected


class Runs(dict):
    """Recorded runs by key; a key a torch could not record (the ddp runs, where collviz refuses
    ddp on it) skips the test that asks for it, saying why."""

    def __missing__(self, key: str):
        pytest.skip(f"no {key!r} run on this torch: {DDP_REFUSAL}")


MACHINE_NODES = {name: identity(Path(name)) for name in ("/dev/full", "/dev/null", "/dev/zero")}
"""The machine's own device nodes as the session found them: no test may change them (tests run as
root; an output path given the machine's /dev/full once left it a regular file)."""
_damaged: set[str] = set()


@pytest.fixture(autouse=True)
def machine_nodes_untouched(request: pytest.FixtureRequest):
    """Fail the test after which a machine device node is no longer what the session found (once
    per node: later tests are not blamed). Outputs in tests go to private nodes (support.nodes)."""
    yield
    for name, before in MACHINE_NODES.items():
        if name not in _damaged and identity(Path(name)) != before:
            _damaged.add(name)
            pytest.fail(f"{request.node.nodeid} changed the machine's {name} (was {before}, now "
                        f"{identity(Path(name))}): this machine needs it restored", pytrace=False)


@pytest.fixture(scope="session")
def traces_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for the traces recorded during this test session."""
    return tmp_path_factory.mktemp("traces")


@pytest.fixture(scope="session")
def scenario_runs(tmp_path_factory: pytest.TempPathFactory) -> ScenarioRuns:
    """Scenario runs on 4 gloo ranks (or the ``--gpus`` asked for), recorded once per session and
    shared by every module that reads the same command line's run (:mod:`support.recordings`)."""
    return ScenarioRuns(tmp_path_factory.mktemp("scenario-runs"))


@pytest.fixture(scope="session")
def collective_traces(scenario_runs: ScenarioRuns) -> dict[str, TraceContents]:
    """Each of the eight collective scenarios run once on 4 gloo ranks, recorded, read back."""
    return {name: read_trace(scenario_runs(name).path) for name in COLLECTIVE_SCENARIOS}


@pytest.fixture(scope="session")
def training_runs(scenario_runs: ScenarioRuns, tmp_path_factory: pytest.TempPathFactory) -> dict[str, TraceContents | str]:
    """The training scenarios on 4 gloo ranks, recorded and read back, once each: ring, tp,
    fsdp --prefetch, fsdp --no-reshard-after-forward, hsdp, moe (4 and 2 ranks), fsdp-tp, and
    compare ddp fsdp (which records ddp and fsdp)."""
    folder = tmp_path_factory.mktemp("training")
    traces: dict = Runs()
    paths: dict[str, Path] = {}
    for key, args in {
        "ring": ["ring-all-reduce"],
        "tp": ["tp"],
        "fsdp-prefetch": ["fsdp", "--prefetch"],
        "fsdp-keep": ["fsdp", "--no-reshard-after-forward"],
        "hsdp": ["hsdp"],
        "moe": ["moe"],
        "moe-2": ["moe", "--gpus", "2"],
        "fsdp-tp": ["fsdp-tp"],
    }.items():
        run = scenario_runs(*args)
        traces[key] = read_trace(run.path)
        traces[f"{key}:stdout"] = run.stdout
        paths[key] = run.path
    if DDP_REFUSAL is None:
        result = run_cli("compare", "ddp", "fsdp", "--gpus", str(N), "--backend", "gloo", "--record", str(folder),
                         timeout=300)
        assert result.returncode == 0, f"compare failed:\n{result.stdout}\n{result.stderr}"
        traces["compare:stdout"] = result.stdout
    else:  # fsdp alone, as compare records it
        result = run_cli("fsdp", "--gpus", str(N), "--backend", "gloo", "--headless", "--record",
                         str(folder / "fsdp.cvz"), timeout=300)
        assert result.returncode == 0, f"fsdp failed:\n{result.stdout[-3000:]}\n{result.stderr}"
    for name in ("ddp", "fsdp"):
        if (folder / f"{name}.cvz").exists():
            traces[name] = read_trace(folder / f"{name}.cvz")
            paths[name] = folder / f"{name}.cvz"
    traces["paths"] = Runs({key: paths[key] for key in ("ring", "tp", "ddp", "fsdp") if key in paths})
    return traces


@pytest.fixture(scope="session")
def job_artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The jobs of :mod:`support.artifact_jobs` (healthy, hang, mismatch), each run once on 4 gloo
    ranks: name → the folder of its Flight Recorder dumps and profiler traces. Only read, never written."""
    root = tmp_path_factory.mktemp("artifacts")
    return {name: artifact_jobs.run_job(getattr(artifact_jobs, name), root / name)
            for name in ("healthy", "hang", "mismatch")}


@pytest.fixture(scope="session")
def trained_reference() -> dict:
    """The tiny GPT after one AdamW step on every rank's batch at once, on one process."""
    return single_process_step()


@pytest.fixture
def one_rank_group(tmp_path: Path):
    """A gloo process group of one rank in this process, destroyed afterwards."""
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))
    yield
    dist.destroy_process_group()


@pytest.fixture(scope="session")
def attached_job(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The job of :mod:`support.attach_job`, attached once while rank 1 stalls in its own function:
    ``collviz attach --headless`` (text, ``--json``, ``--watch``, and through the job's store), then
    an attached :class:`~collviz.runtime.sessions.live.LiveSession` recording a trace, polled until
    it reports the stall (``stalled``: its events so far), while the job is released and both ranks
    complete the call, and until it finishes once the job has ended (``events``: all of them)."""
    from collviz.runtime.live.pace import Pace
    from collviz.runtime.live.workers import find_sockets
    from collviz.runtime.sessions.live import attached_session
    from collviz.runtime.wire.protocol import Collective, Stall

    from support.attach_job import CALLS_BEFORE, DEADLINE_S, stalled_job

    folder = tmp_path_factory.mktemp("attach")
    found: dict = {"folder": folder, "trace": folder / "attached.cvz"}
    with stalled_job(folder) as job:
        found["attach"] = run_cli("attach", "--headless", str(folder), timeout=DEADLINE_S)
        found["json"] = run_cli("attach", "--headless", "--json", str(folder), timeout=DEADLINE_S)
        found["watch"] = run_cli("attach", "--headless", "--json", "--watch", "--count", "3", str(folder),
                                 timeout=DEADLINE_S)
        store = (folder / "store").read_text()
        found["store"] = (store, run_cli("attach", "--headless", store, timeout=DEADLINE_S))
        session = attached_session(find_sockets(str(folder)), record=found["trace"], target=str(folder),
                                   pace=Pace(0.2, 0.4))
        session.start()
        events: list = []

        def poll_until(done) -> None:
            deadline = time.monotonic() + DEADLINE_S
            while not done():
                assert time.monotonic() < deadline and not session.finished, f"the session never got there: {events[-3:]}"
                events.extend(session.poll(0.1))

        try:
            poll_until(lambda: any(isinstance(e, Stall) for e in events))
            found["stalled"] = list(events)
            job.release()
            poll_until(lambda: sum(isinstance(e, Collective) and e.edge == "end" for e in events) == 2 * (CALLS_BEFORE + 1))
            found["job"] = job.finish()
            deadline = time.monotonic() + DEADLINE_S
            while not session.finished and time.monotonic() < deadline:
                events.extend(session.poll(0.1))
            events.extend(session.poll(0))
        finally:
            session.stop()
    found["events"], found["outcome"] = events, session.outcome
    return found
