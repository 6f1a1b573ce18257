"""Launching a planned run (:mod:`~collviz.runtime.plan`): fork the workers, collect their events,
tear down.

:class:`LocalSession` is the session (:class:`~.contract.Session`) of a run on this machine: the
headless summary, the recorder and the Textual viewer drive it as they drive any other; its events
pass through the shared :class:`~.intake.SocketIntake`. Workers are forked from this process after its
single ``import torch`` (faster than fresh interpreters); this process therefore never touches
CUDA — GPUs are counted through NVML.

A user's script run without ``--observe`` (:attr:`~..plan.RunPlan.reads_recorder`) sends no
calls while it runs: its ranks' RankEnd events are messages to the session, which reads each
rank's Flight Recorder live from its worker server (:mod:`.recorder_live`) and takes in the calls
as the ranks issue and complete them; a wait that outlasts the plan's timeout ends the run as
failed. A failing or interrupted run reads the ranks once more, then asks those still alive to
dump (:mod:`.recorded`); once every rank has exited, their dumps are read as a last reading.
"""

from __future__ import annotations

import math
import os
import platform
import shutil
import signal
import socket
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..live.recorder_reader import Launched
from ..live.pace import Pace
from ..plan import RunPlan, run_start_fields, worker_config
from ..wire.protocol import AnyEvent, Go, Phase, ProcessExit, RankEnd, RunStart
from ..wire.trace import TraceWriter
from ..wire.transport import Collector, Endpoints
from ..worker import worker_main
from .contract import RunOutcome
from .intake import SocketIntake
from .rank_output import Echo, RankOutput
from .recorded import DUMP_GRACE_S, RecorderDumps
from .recorder_live import UNWATCHED, LiveRecorder

__all__ = ["remove_stale_run_folders", "LocalSession", "worker_log_lines"]

ENDING_POLL_S = 0.005
"""How long a poll waits for events once every rank has said its last word (RankEnd): the
processes are about to exit, and their exits, not events, are what the session waits for."""

FLUSH_GRACE_S = 0.25
"""When a run fails, how long survivors get to deliver events already sent before SIGTERM."""

TEARDOWN_GRACE_S = 2.0
"""How long survivors get after SIGTERM before SIGKILL."""

OUTPUT_GRACE_S = 1.0
"""Once every rank has exited, how long the ranks' output pipes may stay open (held by a process
a script started) before the session stops reading them."""


def worker_log_lines(run_dir: str, marker: str) -> list[str]:
    """The lines of the workers' logs in ``run_dir`` (``rank*.log``) that contain ``marker``."""
    lines: list[str] = []
    for log in sorted(Path(run_dir).glob("rank*.log")):
        with log.open(errors="replace") as text:
            lines.extend(line.rstrip("\n") for line in text if marker in line)
    return lines


RUN_FOLDER_PREFIX = "collviz-"
"""Prefix of each run's temporary folder (sockets, worker logs)."""

LAUNCHER_PID_FILE = "launcher.pid"
"""In a run folder while its launcher runs; a folder whose launcher is gone was left by a killed
collviz (SIGKILL cannot be caught), and :func:`remove_stale_run_folders` removes it."""


def remove_stale_run_folders(parent: Path | None = None) -> list[str]:
    """Remove the run folders in ``parent`` (the temporary folder by default) whose launcher was
    killed (its pid file names a dead process); their paths. Folders kept on purpose (a failed
    run's logs) have no pid file and stay."""
    removed = []
    for folder in Path(parent or tempfile.gettempdir()).glob(f"{RUN_FOLDER_PREFIX}*"):
        try:
            pid = int((folder / LAUNCHER_PID_FILE).read_text())
        except (OSError, ValueError):
            continue
        if not _process_exists(pid):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(str(folder))
    return removed


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass
class _RankState:
    pid: int
    exited: bool = False
    exit_code: int | None = None
    phase: tuple[int, str] | None = None
    error: str = ""
    error_t_ns: int | None = None
    ended: bool = False
    """The rank's RankEnd arrived: every event it sent before it has arrived too (one ordered stream)."""
    killed_externally: bool = False
    reaped_order: int = 0
    reaped_ns: int = 0
    """When the launcher reaped it (``time.monotonic_ns``, the clock of the ranks' ``t_ns``)."""
    reaped_in_teardown: bool = False
    """It was reaped after the run's teardown began (after another rank's failure)."""
    waiting_in_stall: bool = False
    """It died inside a collective already reported hung (NCCL's watchdog aborts such waiters)."""


@dataclass
class LocalSession:
    """One run of workers forked on this machine: start it, poll its events until finished, or stop it."""

    plan: RunPlan
    outcome: RunOutcome | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    _ranks: dict[int, _RankState] = field(default_factory=dict)
    _intake: SocketIntake | None = None
    _run_dir: str = ""
    nccl_lines: list[str] = field(default_factory=list)
    """With ``plan.nccl_tuning``: the NCCL INFO lines of every worker's log, read as the run ended."""
    _failed: bool = False
    _interrupted: int = 0
    """The signal that interrupted the run (0: none)."""
    _sent: set[int] = field(default_factory=set)
    _reaped: int = 0
    _signals_due: list[tuple[float, int]] = field(default_factory=list)
    _teardown_started: bool = False
    endpoints: Endpoints | None = None
    echo: Echo | None = None
    """Where each line of the ranks' output goes besides ``rank<r>.log`` (:mod:`.rank_output`):
    the terminal, prefixed with the rank, or kept for after the viewer; None: the logs only."""
    _output: RankOutput | None = None
    _recorder: RecorderDumps | None = None
    _ends: dict[int, RankEnd] = field(default_factory=dict)
    _dumps_due: float | None = None
    """A failing or interrupted run read from Flight Recorder: when the ranks asked to dump are
    ended anyway (they are ended as soon as each has dumped)."""
    pace: Pace | None = None
    """How often a run read from Flight Recorder reads its ranks while they run (the viewer's:
    :data:`~.recorder_live.WATCHED`); None: :data:`~.recorder_live.UNWATCHED`."""
    _live: LiveRecorder | None = None
    warnings: list[str] = field(default_factory=list)
    """What reading the ranks' Flight Recorder dumps could not show (a rank without a dump, …)."""

    @property
    def step(self) -> bool:
        """Whether ranks wait at a gate before each phase."""
        return self.plan.step

    @property
    def _started_intake(self) -> SocketIntake:
        """The intake :meth:`start` opened (a RuntimeError before it has run)."""
        if self._intake is None:
            raise RuntimeError("the session has not been started")
        return self._intake

    @property
    def finished(self) -> bool:
        """True once the run ended and its last event (RunEnd) was produced."""
        return self.outcome is not None

    def start(self) -> None:
        """Fork the workers, then open the collector and the trace; emits RunStart."""
        plan = self.plan
        if plan.nccl_tuning:  # inherited by the forked workers, read by NCCL when it initialises
            os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="TUNING")
        self._run_dir = tempfile.mkdtemp(prefix=RUN_FOLDER_PREFIX)
        Path(self._run_dir, LAUNCHER_PID_FILE).write_text(str(os.getpid()))
        endpoints = self.endpoints = Endpoints.in_directory(self._run_dir)
        recorder = self._recorder = RecorderDumps(self._run_dir, plan.world_size) if plan.reads_recorder else None
        config = worker_config(plan, run=self.run_id, init_method=f"tcp://127.0.0.1:{_free_port()}",
                               endpoints=endpoints, recorder=recorder.place if recorder is not None else None)
        output = self._output = RankOutput(self.log_dir, self.echo)
        trace = TraceWriter(plan.record) if plan.record is not None else None
        sys.stdout.flush()
        sys.stderr.flush()
        forked_ns = time.time_ns()
        for rank in range(plan.world_size):
            output.open_pipes(rank)
            pid = os.fork()
            if pid == 0:
                try:
                    output.become_rank(rank)
                    if recorder is not None:
                        recorder.in_rank()
                    worker_main(config, rank)
                finally:
                    os._exit(70)
            output.parent_after_fork(rank)
            self._ranks[rank] = _RankState(pid=pid)
        if recorder is not None:
            recorder.after_forks()
        output.start()
        collector = Collector(self.run_id, endpoints, plan.world_size)
        # read from Flight Recorder, the live readings report hangs (with stacks): the watchdog is off
        intake = self._intake = SocketIntake(collector, trace, plan.timeout_s if recorder is None else math.inf, self.run_id)
        collector.on_release = lambda index: intake.emit(Go, index=index)
        intake.emit(RunStart, **run_start_fields(plan, os.getpid()))
        if recorder is not None:
            device = "cpu" if plan.backend.device_kind == "cpu" else ""  # no GPU visible: the script's only device
            self._live = LiveRecorder(intake, self.run_id, recorder, Launched(self.pids, platform.node(), device),
                                      self.pace or UNWATCHED, plan.timeout_s, forked_ns)

    @property
    def pids(self) -> dict[int, int]:
        """rank → worker process id."""
        return {rank: state.pid for rank, state in self._ranks.items()}

    @property
    def waiting_ranks(self) -> dict[int, int]:
        """rank → gate index for the ranks now held at a gate (step mode)."""
        return self._intake.collector.waiting_ranks if self._intake else {}

    def poll(self, timeout: float) -> list[AnyEvent]:
        """Events that arrived since the last call (waiting up to ``timeout`` s for some)."""
        intake = self._started_intake
        if not self.finished:
            self._advance(intake, timeout)
        return intake.take_pending()

    def _advance(self, intake: SocketIntake, timeout: float) -> None:
        """Take in what arrived (waiting up to ``timeout`` s), reap, check, signal, and finish
        once every process is gone; the events stay queued for the next :meth:`poll`."""
        if all(state.ended for state in self._ranks.values()):
            timeout = min(timeout, ENDING_POLL_S)
        arrived = self._receive(intake, timeout)
        self._reap()  # before noting: a rank dead before a peer's error arrived died first
        self._note(arrived)
        if self._live is not None and not self._failed and not self._teardown_started:
            self._note(self._live.read_if_due())
            if self._live.hang:
                self._fail()
        if intake.check():
            self._fail()
        if self._failed:  # judged once every exit and event seen so far is noted (see _fail)
            self._begin_teardown(intake)
        if self._dumps_due is not None and (time.monotonic() >= self._dumps_due or self._recorder is None or
                                            self._recorder.dumped([r for r, s in self._ranks.items() if not s.exited])):
            self._dumps_due = None
            self._schedule_signals(FLUSH_GRACE_S)
        while self._signals_due and time.monotonic() >= self._signals_due[0][0]:
            self._kill_all(self._signals_due.pop(0)[1])
        if all(state.exited for state in self._ranks.values()):
            self._finish(intake)
        else:
            intake.flush()

    def _receive(self, intake: SocketIntake, timeout: float) -> list[AnyEvent]:
        """What the ranks sent (waiting up to ``timeout`` s for some): taken into the run's stream,
        but where the run is read from Flight Recorder (its ranks' RankEnd events are messages to
        the session; their calls come from their recorders, read live, and those RankEnds follow
        them: :mod:`.recorder_live`)."""
        return intake.receive(timeout, take=self._recorder is None)

    def release(self, index: int) -> None:
        """Step mode: release every rank waiting at a gate ≤ ``index`` (thread-safe)."""
        if self._intake is not None:
            self._intake.collector.request_release(index)

    def stop(self, signum: int = signal.SIGINT) -> None:
        """Interrupt (by ``signum``: Ctrl-C unless told): end every worker within seconds, flush
        the trace; idempotent."""
        intake = self._intake
        if self.finished or intake is None:
            return
        self._interrupted = signum
        self._begin_teardown(intake)
        deadline = time.monotonic() + TEARDOWN_GRACE_S + 3.0 + (DUMP_GRACE_S if self._recorder is not None else 0.0)
        while not self.finished and time.monotonic() < deadline:
            self._advance(intake, 0.05)
        if not self.finished:  # a worker survived SIGKILL: give up on it rather than hang
            self._finish(intake)

    def _note(self, events: list[AnyEvent]) -> None:
        """Follow each rank through the events it sent: its phase, its end, its error."""
        for event in events:
            state = self._ranks.get(event.rank)
            if state is None:
                continue
            if isinstance(event, Phase) and event.edge == "begin":
                state.phase = (event.index, event.name)
            elif isinstance(event, RankEnd):
                state.ended = True
                self._ends[event.rank] = event
                if event.status == "error":
                    state.error, state.error_t_ns = event.error, event.t_ns
                    self._fail()

    def _reap(self) -> None:
        intake = self._started_intake
        for rank, state in self._ranks.items():
            if state.exited:
                continue
            try:
                pid, status = os.waitpid(state.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = state.pid, 0
            if pid == 0:
                continue
            state.exited = True
            if self._live is not None:
                self._live.exited(rank)
            state.exit_code = os.waitstatus_to_exitcode(status)
            self._reaped += 1
            state.reaped_order, state.reaped_ns = self._reaped, time.monotonic_ns()
            state.reaped_in_teardown = self._teardown_started
            signal_name = _signal_name(-state.exit_code) if state.exit_code < 0 else None
            state.killed_externally = state.exit_code < 0 and -state.exit_code not in self._sent
            state.waiting_in_stall = intake.first_stall is not None and rank in intake.first_stall.waiting
            intake.emit(ProcessExit, target=rank, exit_code=None if signal_name else state.exit_code, signal=signal_name)
            if state.exit_code != 0:
                self._fail()

    def _fail(self) -> None:
        """A rank died or raised: the run ends (its cause is decided at the end, see _cause). Its
        teardown begins in :meth:`_advance` once every exit and event already seen is noted: the
        last look before it (:meth:`_begin_teardown`) excuses the ranks known to have failed, and
        a rank reaped or heard from later in the same poll is one of them."""
        if not self._interrupted:
            self._failed = True

    def _cause(self) -> str:
        """Which rank made the run fail, from everything known once every process is reaped.

        A collective mismatch comes first (whatever happened after it is its consequence); then
        a rank that died of its own (see :meth:`_died_of_its_own`: its peers' errors are
        consequences of its death); then, after a reported hang, the ranks that
        were not where the others waited (the waiters' timeouts are its consequences, named as
        such); then the earliest error a rank reported; then any bad exit.
        """
        intake = self._started_intake
        if intake.mismatch is not None:
            return intake.mismatch.text
        ranks = self._ranks.items()
        killed = sorted((s.reaped_order, r) for r, s in ranks if self._died_of_its_own(s))
        if killed:
            rank = killed[0][1]
        elif self._live is not None and self._live.hang:
            return (f"hang: {self._live.hang} (over --timeout {self.plan.timeout_s:g} s: every rank was asked to dump "
                    "its Flight Recorder, then stopped)")
        else:
            errors = sorted((s.error_t_ns, r) for r, s in ranks if s.error_t_ns is not None)
            bad_exits = sorted((s.exit_code < 0, s.reaped_order, r) for r, s in ranks if s.exit_code)  # a status first, then signals
            rank = errors[0][1] if errors else bad_exits[0][2]
            if intake.first_stall is not None:
                stall = intake.first_stall
                culprits = ", ".join(str(r) for r in sorted(stall.elsewhere))
                return (f"hang caused by rank{'s' if len(stall.elsewhere) > 1 else ''} {culprits}: {stall.text}; "
                        f"consequence: {self._describe_failure(rank, self._ranks[rank])}")
        return self._describe_failure(rank, self._ranks[rank])

    def _failed_ranks(self) -> set[int]:
        """The ranks that raised, or exited with a bad status or by a signal collviz did not send."""
        return {rank for rank, state in self._ranks.items()
                if state.error or state.killed_externally or (state.exit_code or 0) > 0}

    def _died_of_its_own(self, state: _RankState) -> bool:
        """Whether a rank killed by a signal collviz did not send died for its own reason.

        Not when it died waiting in a hang already reported, nor when the signal is a SIGABRT that
        came after another rank's failure: NCCL's watchdog aborts the ranks left waiting on a peer
        that raised or died (reaped once the teardown began, or after a peer's error). Such a rank
        is named only when no rank failed otherwise. A SIGKILL collviz did not send is the rank's
        own death, however late it is reaped: the kernel closes a dying process's sockets before
        its exit can be waited for, so a peer's "Connection closed by peer" can arrive, and the
        teardown begin, before the rank killed first can be reaped.
        """
        if not state.killed_externally or state.waiting_in_stall:
            return False
        if state.exit_code != -signal.SIGABRT:
            return True
        return not state.reaped_in_teardown and not any(
            other.error_t_ns is not None and other.error_t_ns < state.reaped_ns for other in self._ranks.values())

    def _describe_failure(self, rank: int, state: _RankState) -> str:
        where = f" during phase {state.phase[0]} '{state.phase[1]}'" if state.phase else " before its first phase"
        if state.error:
            text = f"rank {rank} failed{where}: {state.error}"
        elif state.exit_code is not None and state.exit_code < 0:
            text = f"rank {rank} was killed by {_signal_name(-state.exit_code)}{where}"
        else:
            text = f"rank {rank} exited with status {state.exit_code}{where}"
        last_words = self._output.last_words(rank) if self._output is not None else None
        return f"{text}; its stderr ended: {last_words}" if last_words else text

    def _begin_teardown(self, intake: SocketIntake) -> None:
        """Abort the gates, then SIGTERM every survivor after FLUSH_GRACE_S (their queued events
        keep arriving meanwhile) and SIGKILL whoever is left TEARDOWN_GRACE_S later. A run read
        from Flight Recorder first asks its survivors to dump, and waits for their dumps (at most
        DUMP_GRACE_S)."""
        if self._teardown_started:
            return
        self._teardown_started = True
        intake.collector.abort_gates()
        if self._recorder is not None:
            if self._live is not None:
                self._note(self._live.last_look(self._failed_ranks()))
            self._recorder.request()
            self._dumps_due = time.monotonic() + DUMP_GRACE_S
        else:
            self._schedule_signals(FLUSH_GRACE_S)

    def _schedule_signals(self, flush_grace_s: float) -> None:
        """SIGTERM every survivor after ``flush_grace_s``, SIGKILL whoever is left TEARDOWN_GRACE_S later."""
        now = time.monotonic()
        self._signals_due = [(now + flush_grace_s, signal.SIGTERM),
                             (now + flush_grace_s + TEARDOWN_GRACE_S, signal.SIGKILL)]

    def _kill_all(self, signum: int) -> None:
        self._sent.add(signum)
        for state in self._ranks.values():
            if not state.exited:
                try:
                    os.kill(state.pid, signum)
                except ProcessLookupError:
                    pass

    def _finish(self, intake: SocketIntake) -> None:
        if self._output is not None:  # every line the ranks wrote is out before the run's end is told
            self._output.close(OUTPUT_GRACE_S)
        self._note(self._receive(intake, 0))
        if not all(state.ended for state in self._ranks.values()):  # a rank died mid-stream: stragglers
            self._note(self._receive(intake, 0.05))
        if self._recorder is not None and self._live is not None:
            self._recorder.close()
            events, self.warnings = self._live.end(self._ends, self._failed_ranks())
            self._note([event for event in events if isinstance(event, Phase)])
            if intake.check() and not self._interrupted:  # ranks that called different things, in the last calls
                self._failed = True
        if self._interrupted:
            outcome = RunOutcome("interrupted", f"interrupted by {_signal_name(self._interrupted)}: every worker was "
                                 "stopped", 128 + self._interrupted)
        elif self._failed:
            outcome = RunOutcome("failed", self._cause(), 1)
        else:
            outcome = RunOutcome("ok", "", 0)
        intake.close(outcome)
        if self.plan.nccl_tuning:
            self.nccl_lines = worker_log_lines(self.log_dir, "NCCL INFO")
        if outcome.status != "failed" or self.plan.logs is not None:  # a failed run keeps its worker logs, and says where
            shutil.rmtree(self._run_dir, ignore_errors=True)
        else:  # kept for its worker logs, on purpose: not a leftover of a killed launcher
            Path(self._run_dir, LAUNCHER_PID_FILE).unlink(missing_ok=True)
        self.outcome = outcome

    @property
    def log_dir(self) -> str:
        """Where the workers' stdout/stderr logs (``rank<r>.log``) are: the plan's ``logs`` folder
        (kept), else the run's own folder (kept when a run fails)."""
        return str(self.plan.logs) if self.plan.logs is not None else self._run_dir

    @property
    def record_path(self) -> Path | None:
        """The trace being written, if any."""
        return self.plan.record

    @property
    def recording_error(self) -> str | None:
        """Why the trace stopped before the run's end (a write error), or None."""
        return self._intake.recording_error if self._intake is not None else None
