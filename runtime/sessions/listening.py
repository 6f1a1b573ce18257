"""Workers started by someone else (torchrun, on any number of nodes) streaming to a viewer.

``collviz worker SCENARIO --viewer tcp://HOST:PORT`` runs as torchrun's entry point
(:mod:`.torchrun`); each rank signs its events with the shared secret (:mod:`.access`) and sends
them to ``collviz view --listen HOST:PORT``, whose :class:`RemoteSession` is a session
(:class:`~.contract.Session`) like a local one: the headless summary, the recorder and the viewer
consume it unchanged, and its events pass through the same :class:`~.intake.SocketIntake`. Rank 0 emits
the RunStart, since no collviz launcher exists; the viewer adopts the run id of the first signed
event.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import zmq

from ..errors import STOPPED_BY_SIGTERM, UsageError
from ..observation.watchdog import Stalled
from ..wire.protocol import AnyEvent, RankEnd, RunStart
from ..wire.trace import TraceWriter
from ..wire.transport import Collector, Endpoints
from .access import check_listen_address
from .contract import RunOutcome
from .intake import SocketIntake, TracedSession

__all__ = ["RemoteSession"]


def _ranks(ranks: list[int]) -> str:
    """``rank 2`` or ``ranks 0, 3``."""
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


@dataclass
class RemoteSession(TracedSession):
    """The viewer's end of a run whose workers someone else started."""

    host: str
    port: int
    secret: bytes | None
    record: Path | None = None
    timeout_s: float = 30.0
    step: bool = False
    outcome: RunOutcome | None = None
    log_dir: str | None = None
    _intake: SocketIntake | None = None
    _world_size: int | None = None
    _ended: dict[int, RankEnd] = field(default_factory=dict)
    _first_error_at: float | None = None

    def __post_init__(self) -> None:
        check_listen_address(self.host, self.secret)
        if self.secret is None:
            raise UsageError("a listening viewer needs a shared secret, so that only its workers can claim it")

    @property
    def finished(self) -> bool:
        """True once every rank ended (or the run was given up) and RunEnd was produced."""
        return self.outcome is not None

    @property
    def _started_intake(self) -> SocketIntake:
        """The intake :meth:`start` opened (a RuntimeError before it has run)."""
        if self._intake is None:
            raise RuntimeError("the session has not been started")
        return self._intake

    def start(self) -> None:
        """Bind the listening sockets and open the trace (once: a started session stays as it is)."""
        if self._intake is not None:
            return
        trace = TraceWriter(self.record) if self.record is not None else None
        try:
            collector = Collector(None, Endpoints.tcp(self.host, self.port), None, self.secret, exposed=True)
        except zmq.ZMQError as exc:  # address in use, not ours, …
            raise UsageError(f"cannot listen on {self.host}:{self.port}: {exc}") from None
        self._intake = SocketIntake(collector, trace, self.timeout_s, run=None)

    def poll(self, timeout: float) -> list[AnyEvent]:
        """Events that arrived since the last call (waiting up to ``timeout`` s for some)."""
        intake = self._started_intake
        if not self.finished:
            self._note(intake.receive(timeout))
            intake.check()  # a mismatch or a hang is reported as it is found; the run ends with its ranks
            self._maybe_finish(intake)
            if not self.finished:
                intake.flush()
        return intake.take_pending()

    def release(self, index: int) -> None:
        """Remote runs have no gates (live only)."""

    def stop(self, signum: int = signal.SIGINT) -> None:
        """Stop listening (the workers belong to torchrun, which ends them); idempotent."""
        if not self.finished and self._intake is not None:
            self._finish(self._intake, RunOutcome("interrupted", f"interrupted by {signal.Signals(signum).name}: "
                                                  "stopped listening", 128 + signum))

    @property
    def first_stall(self) -> Stalled | None:
        """The first hang reported (its missing ranks are the run's culprits), or None."""
        return self._intake.first_stall if self._intake is not None else None

    def give_up(self, why: str) -> None:
        """End the run as failed because its ranks' launcher is gone (``why``): the ranks it never
        heard end died first; their peers' errors, and the ranks stopped by SIGTERM (their agent
        ending them), are consequences; idempotent."""
        if self.finished or self._intake is None:
            return
        if self._world_size is None:
            self._finish(self._intake, RunOutcome("failed", f"{why} before any rank reported its start", 1))
            return
        silent = sorted(set(range(self._world_size)) - set(self._ended))
        failure, stopped = self._first_failure(), self._stopped()
        unreported = f"{_ranks(silent)} died without reporting an end (killed? torchrun's summary says how)"
        cause = unreported if silent else failure or stopped
        consequences = "; ".join(text for text in (failure, stopped) if text and text != cause)
        detail = "; ".join(text for text in (cause, why, consequences and f"consequence: {consequences}") if text)
        self.end_failed(detail)

    def _first_failure(self) -> str:
        """The first rank's error to arrive, a SIGTERM's stop aside: ``rank R failed: ERROR``, or ""."""
        failed = [e for e in self._ended.values() if e.status == "error" and e.error != STOPPED_BY_SIGTERM]
        return f"rank {failed[0].rank} failed: {failed[0].error}" if failed else ""

    def _stopped(self) -> str:
        """The ranks that said SIGTERM stopped them: ``ranks R, S stopped by SIGTERM (…)``, or ""."""
        stopped = sorted(rank for rank, end in self._ended.items() if end.error == STOPPED_BY_SIGTERM)
        return f"{_ranks(stopped)} {STOPPED_BY_SIGTERM}" if stopped else ""

    def end_failed(self, detail: str) -> None:
        """End the run now as failed, saying why in ``detail``; idempotent."""
        if not self.finished and self._intake is not None:
            self._finish(self._intake, RunOutcome("failed", detail, 1))

    def _note(self, events: list[AnyEvent]) -> None:
        """Learn the world size from RunStart and each rank's end from its RankEnd."""
        for event in events:
            if isinstance(event, RunStart):
                self._world_size = event.world_size
                self._started_intake.collector.world_size = event.world_size
            elif isinstance(event, RankEnd):
                self._ended[event.rank] = event
                if event.status == "error" and self._first_error_at is None:
                    self._first_error_at = time.monotonic()

    def _maybe_finish(self, intake: SocketIntake) -> None:
        if self._world_size is None:
            return
        cause = self._first_failure() or self._stopped()  # a rank's own error before its peers' stops
        if len(self._ended) == self._world_size:
            if intake.mismatch is not None:  # the workers are torchrun's: the viewer reports, it cannot stop them
                self._finish(intake, RunOutcome("failed", intake.mismatch.text, 1))
            elif cause:  # the first error to arrive: its peers' errors (a connection closed, …) and stops follow it
                self._finish(intake, RunOutcome("failed", cause, 1))
            else:
                self._finish(intake, RunOutcome("ok", "", 0))
        elif cause and self._first_error_at is not None and time.monotonic() - self._first_error_at > self.timeout_s:
            silent = sorted(set(range(self._world_size)) - set(self._ended))
            self._finish(intake, RunOutcome("failed", f"{cause}; ranks {silent} never reported their end", 1))

    def _finish(self, intake: SocketIntake, outcome: RunOutcome) -> None:
        intake.close(outcome)
        self.outcome = outcome

    @property
    def dropped(self) -> dict[str, int]:
        """Frames refused so far, by reason (unauthenticated peers among them)."""
        return dict(self._intake.collector.dropped) if self._intake else {}
