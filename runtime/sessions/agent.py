"""``collviz run [torchrun options] SCRIPT.py|-m MODULE``: this node's ranks started by torch's own
launcher, ``python -m torch.distributed.run`` (torchrun) in a child process.

The user's torchrun options (:mod:`.torchrun_line`) are passed on as written, so rendezvous,
restarts and signals are torchrun's own; only the target changes: every rank runs
``python -m collviz.runtime.torchrun_rank [--module] TARGET ARGS``, which runs the script (or
module) as ``__main__`` under the light observer and sends its signed events to node 0
(:data:`~..userjob.launch_env.VIEWER_ENV`). Each rank's lines reach its node's terminal through
torchrun's ``--tee 3`` (unless the user chose ``--tee``/``--redirects``), prefixed ``[rank<r>]:``
by torchrun's own line prefix (``TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE``, unless the user set it);
beside the viewer, the agent's output goes to a file instead (``output``), shown once the viewer closes.

Node 0's :class:`AgentSession` is a session (:class:`~.contract.Session`) like any other: it
listens for the whole job's events (:class:`~.listening.RemoteSession`) and watches its own agent.
Another node runs its agent to its end (:func:`run_agent`). The shared secret reaches the other
nodes' ranks through the job's store (:data:`~..userjob.launch_env.SHARE_SECRET_ENV`) unless the user
gave every node one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..userjob.launch_env import JOB_SECRET_ENV, SHARE_SECRET_ENV, TIMEOUT_ENV, VIEWER_ENV
from ..userjob.script import UserScript
from ..wire.protocol import AnyEvent
from .contract import RunOutcome
from .listening import RemoteSession
from .torchrun_line import TorchrunLine

__all__ = ["AGENT_GRACE_S", "PREFIX_TEMPLATE", "AgentSession", "agent_command", "agent_environment", "run_agent"]

PREFIX_TEMPLATE_ENV = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"

PREFIX_TEMPLATE = "[rank${rank}]: "
"""torchrun's line prefix for ``collviz run``: the global rank, as collviz's own launcher prints it."""

AGENT_GRACE_S = 3.0
"""Once the agent has exited, how long its ranks' last events may take to reach node 0."""

STOP_GRACE_S = 10.0
"""After asking the agent to stop (SIGTERM: it ends its ranks as torchrun does), how long it gets before SIGKILL."""


def agent_command(line: TorchrunLine, script: UserScript) -> list[str]:
    """torchrun's command line for ``line``, its target collviz's rank entry running ``script``;
    unless the user chose, every rank's output is teed to the agent's own (``--tee 3``)."""
    tee = () if line.tee_given else ("--tee", "3")
    target = ("--module", script.module) if script.module else (str(script.path),)
    return [sys.executable, "-m", "torch.distributed.run", *line.options, *tee,
            "-m", "collviz.runtime.torchrun_rank", *target, *script.args]


def agent_environment(viewer: str, timeout_s: float, secret: bytes | None, *, share: bool) -> dict[str, str]:
    """The agent's environment (its ranks inherit it): node 0's address, the hang timeout, the
    secret where this node knows it (``share``: node 0 of several puts it in the job's store)."""
    env = {**os.environ, VIEWER_ENV: viewer, TIMEOUT_ENV: repr(timeout_s)}
    env.setdefault(PREFIX_TEMPLATE_ENV, PREFIX_TEMPLATE)
    env.pop(JOB_SECRET_ENV, None)
    env.pop(SHARE_SECRET_ENV, None)
    if secret is not None:
        env[JOB_SECRET_ENV] = secret.decode()
    if share:
        env[SHARE_SECRET_ENV] = "1"
    return env


def run_agent(command: list[str], env: dict[str, str]) -> int:
    """Run torch's agent to its end (a node other than 0); its exit status. Ctrl-C reaches the
    agent from the terminal, which ends its ranks as torchrun does: this waits for it."""
    agent = subprocess.Popen(command, env=env)
    while True:
        try:
            return agent.wait()
        except KeyboardInterrupt:
            continue


@dataclass
class AgentSession:
    """Node 0's session: the whole job's events (``listening``), and this node's agent."""

    listening: RemoteSession
    command: list[str]
    env: dict[str, str]
    output: IO[bytes] | int | None = None
    """Where the agent's stdout and stderr go (its ranks' lines among them): a file, a descriptor
    (``--json``: stderr, as stdout holds the document), or this terminal's streams when None."""
    _agent: subprocess.Popen[bytes] | None = None
    _agent_ended_at: float | None = None
    _kill_at: float | None = None

    step = False
    log_dir = None

    @property
    def finished(self) -> bool:
        """True once the job's events ended (RunEnd produced) and the agent has exited."""
        return self.listening.finished and self._agent is not None and self._agent.poll() is not None

    @property
    def outcome(self) -> RunOutcome | None:
        """How the job ended (as its ranks said; where the agent ended before they all said, it failed)."""
        return self.listening.outcome

    @property
    def record_path(self) -> Path | None:
        """The trace being written, if any."""
        return self.listening.record_path

    @property
    def recording_error(self) -> str | None:
        """Why the trace stopped before the run's end (a write error), or None."""
        return self.listening.recording_error

    def start(self) -> None:
        """Listen (a port in use is one line, before any rank starts), then start the agent."""
        if self._agent is not None:
            return
        self.listening.start()
        self._agent = subprocess.Popen(self.command, env=self.env, stdout=self.output,
                                       stderr=None if self.output is None else subprocess.STDOUT)

    def poll(self, timeout: float) -> list[AnyEvent]:
        """The job's events that arrived (waiting up to ``timeout`` s). A hang (a call some ranks
        waited in for the timeout) ends the run, naming the ranks the others waited for, and asks
        the agent to stop its ranks; once the agent has exited and its ranks' events stopped
        coming, the run ends, naming the ranks never heard from."""
        agent = self._agent
        if agent is None:
            raise RuntimeError("the session has not been started")
        if self.listening.finished:
            self._wait_for_agent(agent, timeout)
            return self.listening.poll(0)
        events = self.listening.poll(timeout)
        stall = self.listening.first_stall
        if stall is not None:
            culprits = ", ".join(str(rank) for rank in sorted(stall.elsewhere))
            self.listening.end_failed(f"hang caused by rank{'s' if len(stall.elsewhere) > 1 else ''} {culprits}: "
                                      f"{stall.text} (over --timeout {self.listening.timeout_s:g} s: torchrun was "
                                      "asked to stop the ranks)")
            self._ask_agent_to_stop(agent)
        status = agent.poll()
        if status is not None and not self.listening.finished:
            now = time.monotonic()
            self._agent_ended_at = self._agent_ended_at or now
            if now - self._agent_ended_at >= AGENT_GRACE_S:
                self.listening.give_up(f"torchrun's agent exited with status {status}")
        return events + self.listening.poll(0) if self.listening.finished else events

    def _ask_agent_to_stop(self, agent: subprocess.Popen[bytes]) -> None:
        """SIGTERM the agent (it ends its ranks as torchrun does), once; SIGKILL follows
        :data:`STOP_GRACE_S` later (:meth:`_wait_for_agent`)."""
        if self._kill_at is None and agent.poll() is None:
            agent.send_signal(signal.SIGTERM)
            self._kill_at = time.monotonic() + STOP_GRACE_S

    def _wait_for_agent(self, agent: subprocess.Popen[bytes], timeout: float) -> None:
        """Wait up to ``timeout`` s for the agent's exit, killing it past its stop's grace."""
        try:
            agent.wait(timeout)
        except subprocess.TimeoutExpired:
            if self._kill_at is not None and time.monotonic() >= self._kill_at:
                agent.kill()

    def release(self, index: int) -> None:
        """Ranks under torchrun have no gates (live only)."""

    def stop(self, signum: int = signal.SIGINT) -> None:
        """Interrupt: stop listening, and ask the agent to end its ranks (as torchrun does on
        SIGTERM), killing it if it has not within :data:`STOP_GRACE_S`. Idempotent."""
        self.listening.stop(signum)
        agent = self._agent
        if agent is None:
            return
        self._ask_agent_to_stop(agent)
        while agent.poll() is None:
            self._wait_for_agent(agent, 0.1)
