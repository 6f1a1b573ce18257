"""Workers started by someone else (torchrun, on any number of nodes) streaming to a viewer.

``collviz worker SCENARIO --viewer tcp://HOST:PORT`` runs as torchrun's entry point; each rank
signs its events with the shared secret and sends them to ``collviz view --listen HOST:PORT``,
whose :class:`RemoteSession` offers the same interface as a local :class:`Session`: the headless
summary, the recorder and the viewer consume it unchanged. Rank 0 emits the RunStart, since no
collviz launcher exists; the viewer adopts the run id of the first signed event.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import zmq

from .errors import UsageError
from .observation.fingerprints import Disagreement, FingerprintCheck
from .observation.watchdog import CollectiveWatch
from .plan import MemoryNeed, plan_run, run_start_fields, worker_config
from .scenario_files.loading import Scenario
from .programs.program import RunOptions
from .wire.files import read_regular_file
from .wire.protocol import AnyEvent, Dropped, Mismatch, RankEnd, RunEnd, RunStart, Stall
from .wire.trace import TraceWriter
from .wire.transport import Collector, Endpoints, LauncherEmitter
from .worker import worker_main

__all__ = ["SECRET_ENV", "load_secret", "generated_secret", "check_listen_address", "parse_listen", "RemoteOutcome",
           "RemoteSession", "TorchrunRank", "torchrun_rank", "run_torchrun_worker"]

SECRET_ENV = "COLLVIZ_SECRET"
"""Environment variable holding the shared secret (or use --secret-file)."""

MIN_SECRET_LENGTH = 16

MAX_SECRET_BYTES = 4096
"""A secret file larger than this is refused unread (it cannot be a secret; /dev/zero is not one)."""


def load_secret(secret_file: Path | None) -> bytes | None:
    """The shared secret from ``secret_file`` or $COLLVIZ_SECRET (None if neither is given)."""
    if secret_file is not None:
        try:
            text = read_regular_file(secret_file, MAX_SECRET_BYTES, "--secret-file").decode("utf-8", "replace").strip()
        except OSError as exc:
            raise UsageError(f"--secret-file {secret_file}: {exc.strerror}") from None
    else:
        text = os.environ.get(SECRET_ENV, "").strip()
        if not text:
            return None
    if len(text) < MIN_SECRET_LENGTH:
        raise UsageError(f"the shared secret must be at least {MIN_SECRET_LENGTH} characters (e.g. from: openssl rand -hex 16)")
    return text.encode()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` → (host, port), with a one-line error for anything else."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65535:
        raise UsageError(f"--listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:5555 (PORT+1 is used too)")
    return host.strip("[]"), int(port)


def generated_secret() -> bytes:
    """A fresh random secret (32 hex digits) for a loopback viewer started without one."""
    return secrets.token_hex(16).encode()


def check_listen_address(host: str, secret: bytes | None) -> None:
    """Refuse to expose the event socket beyond loopback without a shared secret."""
    if secret is None and not _is_loopback(host):
        raise UsageError(
            f"listening on {host} exposes the event socket to the network: give a shared secret "
            f"(${SECRET_ENV} or --secret-file) that the workers present too, or listen on 127.0.0.1"
        )


@dataclass(frozen=True)
class RemoteOutcome:
    """How a remote run ended (same shape as launch.RunOutcome)."""

    status: str
    detail: str
    exit_code: int


@dataclass
class RemoteSession:
    """The viewer's end of a run whose workers someone else started."""

    host: str
    port: int
    secret: bytes | None
    record: Path | None = None
    timeout_s: float = 30.0
    step: bool = False
    outcome: RemoteOutcome | None = None
    log_dir: str | None = None
    _collector: Collector | None = None
    _trace: TraceWriter | None = None
    _launcher: LauncherEmitter | None = None
    _watch: CollectiveWatch = field(init=False)
    _world_size: int | None = None
    _ended: dict[int, RankEnd] = field(default_factory=dict)
    _pending: list[AnyEvent] = field(default_factory=list)
    _events_seen: int = 0
    _first_error_at: float | None = None
    _fingerprints: FingerprintCheck = field(default_factory=FingerprintCheck)
    _mismatch: Disagreement | None = None

    def __post_init__(self) -> None:
        check_listen_address(self.host, self.secret)
        if self.secret is None:
            raise UsageError("a listening viewer needs a shared secret, so that only its workers can claim it")
        self._watch = CollectiveWatch(self.timeout_s)

    @property
    def finished(self) -> bool:
        """True once every rank ended (or the run was given up) and RunEnd was produced."""
        return self.outcome is not None

    @property
    def _started_collector(self) -> Collector:
        """The collector :meth:`start` opened (a RuntimeError before it has run)."""
        if self._collector is None:
            raise RuntimeError("the session has not been started")
        return self._collector

    @property
    def record_path(self) -> Path | None:
        """The trace being written, if any."""
        return self.record

    @property
    def recording_error(self) -> str | None:
        """Why the trace stopped before the run's end (a write error), or None."""
        return self._trace.error if self._trace is not None else None

    def start(self) -> None:
        """Bind the listening sockets and open the trace (once: a started session stays as it is)."""
        if self._collector is not None:
            return
        if self.record is not None:
            self._trace = TraceWriter(self.record)
        try:
            self._collector = Collector(None, Endpoints.tcp(self.host, self.port), None, self.secret, exposed=True)
        except zmq.ZMQError as exc:  # address in use, not ours, …
            raise UsageError(f"cannot listen on {self.host}:{self.port}: {exc}") from None

    def poll(self, timeout: float) -> list[AnyEvent]:
        """Events that arrived since the last call (waiting up to ``timeout`` s for some)."""
        if not self.finished:
            for event, payload in self._started_collector.receive(timeout):
                self._absorb(event, payload)
            if self._launcher is not None:
                for found in self._fingerprints.check(time.monotonic_ns()):
                    self._emit(Mismatch, group=found.group, group_ranks=list(found.group_ranks),
                               group_seq=found.group_seq, calls=found.calls, odd_ranks=found.odd_ranks, text=found.text)
                    self._mismatch = self._mismatch or found
                for stall in self._watch.check(time.monotonic_ns()):
                    self._emit(Stall, group=stall.group, group_seq=stall.group_seq, op=stall.op,
                               waiting=stall.waiting, elsewhere=list(stall.elsewhere.values()),
                               waited_s=stall.waited_s, text=stall.text)
            self._maybe_finish()
            if not self.finished and self._trace is not None:
                self._trace.flush()  # one write per batch: a trace being written stays readable
        pending, self._pending = self._pending, []
        return pending

    def release(self, index: int) -> None:
        """Remote runs have no gates (live only)."""

    def stop(self, signum: int = signal.SIGINT) -> None:
        """Stop listening (the workers belong to torchrun, which ends them); idempotent."""
        if not self.finished and self._collector is not None:
            self._finish(RemoteOutcome("interrupted", f"interrupted by {signal.Signals(signum).name}: stopped listening",
                                       128 + signum))

    def _absorb(self, event: AnyEvent, payload: bytes) -> None:
        if self._launcher is None:
            self._launcher = LauncherEmitter(event.run)
        self._events_seen += 1
        self._watch.observe(event)
        self._fingerprints.observe(event, time.monotonic_ns())
        if self._trace is not None:
            self._trace.append(payload)
        if isinstance(event, RunStart):
            self._world_size = event.world_size
            self._started_collector.world_size = event.world_size
        elif isinstance(event, RankEnd):
            self._ended[event.rank] = event
            if event.status == "error" and self._first_error_at is None:
                self._first_error_at = time.monotonic()
        self._pending.append(event)

    def _emit(self, event_type, **fields) -> None:
        if self._launcher is None:
            raise RuntimeError("no event has arrived yet: the run to speak for is not known")
        event, payload = self._launcher.make(event_type, **fields)
        self._absorb(event, payload)

    def _maybe_finish(self) -> None:
        if self._world_size is None:
            return
        errors = [e for e in self._ended.values() if e.status == "error"]
        if len(self._ended) == self._world_size:
            if self._mismatch is not None:  # the workers are torchrun's: the viewer reports, it cannot stop them
                self._finish(RemoteOutcome("failed", self._mismatch.text, 1))
            elif errors:
                first = min(errors, key=lambda e: e.rank)
                self._finish(RemoteOutcome("failed", f"rank {first.rank} failed: {first.error}", 1))
            else:
                self._finish(RemoteOutcome("ok", "", 0))
        elif errors and self._first_error_at is not None and time.monotonic() - self._first_error_at > self.timeout_s:
            silent = sorted(set(range(self._world_size)) - set(self._ended))
            self._finish(RemoteOutcome("failed", f"rank {errors[0].rank} failed: {errors[0].error}; "
                                                 f"ranks {silent} never reported their end", 1))

    def _finish(self, outcome: RemoteOutcome) -> None:
        collector = self._started_collector
        dropped = sum(collector.dropped.values())
        if self._launcher is not None:
            if dropped:
                self._emit(Dropped, counts=dict(collector.dropped))
            self._emit(RunEnd, status=outcome.status, detail=outcome.detail, events=self._events_seen + 1,
                       dropped=dropped)
        if self._trace is not None:
            self._trace.close()
        collector.close()
        self.outcome = outcome

    @property
    def dropped(self) -> dict[str, int]:
        """Frames refused so far, by reason (unauthenticated peers among them)."""
        return dict(self._collector.dropped) if self._collector else {}


@dataclass(frozen=True)
class TorchrunRank:
    """This process's place in a torchrun job, from the environment torchrun sets."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    run: str
    """The run id every rank shares: torchrun's run id and rendezvous address."""


def _env_int(name: str) -> int:
    value = os.environ.get(name)
    if value is None or not value.isdigit():
        raise UsageError(f"${name} is not set: collviz worker runs under torchrun (see: collviz worker SCENARIO --help)")
    return int(value)


def torchrun_rank() -> TorchrunRank:
    """This process's rank, world and run id from torchrun's variables (a UsageError without them)."""
    rank, world_size, local_rank = _env_int("RANK"), _env_int("WORLD_SIZE"), _env_int("LOCAL_RANK")
    run = os.environ.get("TORCHELASTIC_RUN_ID", "")
    run = f"{run}-{os.environ.get('MASTER_ADDR', '')}-{os.environ.get('MASTER_PORT', '')}".strip("-")
    return TorchrunRank(rank, world_size, local_rank, int(os.environ.get("LOCAL_WORLD_SIZE", world_size)), run)


def run_torchrun_worker(scenario: Scenario, options: RunOptions, *, backend: str, timeout_s: float, viewer: str,
                        secret: bytes | None, memory: MemoryNeed | None = None,
                        memory_viz: Path | None = None) -> NoReturn:
    """Run this torchrun process's rank of ``scenario``, streaming signed events to ``viewer``
    (and, with ``memory_viz``, its CUDA memory snapshot to that folder on this machine).

    The run is planned as a local one is (:func:`~.plan.plan_run`), for the ranks on this machine:
    NCCL whenever this node has a GPU (its ranks sharing GPUs when there are fewer), gloo on CPU
    otherwise. Rank 0 emits the RunStart, since no collviz launcher exists.
    """
    me = torchrun_rank()
    ranks_here = None if me.local_world_size == me.world_size else me.local_world_size
    plan = plan_run(scenario, me.world_size, backend=backend, options=options, timeout_s=timeout_s, memory=memory,
                    ranks_here=ranks_here, memory_viz=memory_viz)
    config = worker_config(plan, run=me.run, init_method="env://", endpoints=Endpoints(events=viewer, control=""),
                           secret=secret, run_start=run_start_fields(plan, os.getpid()))
    worker_main(config, me.rank, me.local_rank)
