"""A running job's NCCL Inspector folder followed as its files grow, as a session (``collviz
replay --follow DIR``).

:class:`FollowedSession` is a :class:`~.contract.Session` like an attached one, with the same
reading loop (:class:`~.readings.Readings`): every ``every_s`` seconds it reads what the folder's
files gained (:class:`~collviz.runtime.sources.growing.GrowingFiles`: whole lines only, a cut
last line kept for the next reading, at most ``budget`` bytes a reading) and turns it into events
(:class:`~collviz.runtime.sources.inspector_follow.InspectorFollower`), passed through an
:class:`~.intake.EventIntake` (counted, recorded). It ends ``ok`` once the folder has not grown
for ``idle_s`` seconds (``failed`` if no record came), or ``interrupted`` on ``stop`` (the trace stays readable). The files are
only read.
"""

from __future__ import annotations

import math
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..sources.growing import GrowingFiles
from ..sources.inspector_follow import InspectorFollower
from ..wire.protocol import IMPORT_RUN_PREFIX, AnyEvent, RunStart
from ..wire.trace import TraceWriter
from .contract import RunOutcome
from .intake import EventIntake, RecordingSession
from .readings import Readings

__all__ = ["FollowedSession"]


@dataclass
class FollowedSession(RecordingSession):
    """The viewer's end of an Inspector ``folder`` being written: ``record`` the trace to write,
    ``idle_s`` how long without growth ends it, ``every_s`` the time between readings, ``budget``
    the most bytes a reading takes, ``announce`` told each new step's one-line summary."""

    folder: Path
    record: Path | None = None
    idle_s: float = 60.0
    every_s: float = 0.5
    budget: int = 4 << 20
    announce: Callable[[str], None] | None = None
    step: bool = False
    log_dir: str | None = None
    run_id: str = field(default_factory=lambda: f"{IMPORT_RUN_PREFIX}nccl-inspector-follow-{uuid.uuid4().hex[:12]}")
    """An import's run id: the summary says the run was imported, the viewer that the artifact holds no memory."""
    _files: GrowingFiles | None = None
    _follower: InspectorFollower | None = None
    _intake: EventIntake | None = None
    _loop: Readings | None = None
    _grew_at: float = 0.0

    def __post_init__(self) -> None:
        if not self.folder.is_dir():
            raise UsageError(f"{self.folder}: --follow reads a folder of NCCL Inspector files (NCCL_INSPECTOR_DUMP_DIR)")

    @property
    def outcome(self) -> RunOutcome | None:
        """How the session ended (None until it has)."""
        return self._loop.outcome if self._loop is not None else None

    @property
    def finished(self) -> bool:
        """True once the folder stopped growing (or the session was stopped) and RunEnd was produced."""
        return self.outcome is not None

    def start(self) -> None:
        """Open the trace; the first poll reads at once (once: a started session stays as it is)."""
        if self._intake is not None:
            return
        self._files = GrowingFiles(self.folder, budget=self.budget)
        self._follower = InspectorFollower(self.run_id, self.announce)
        self._intake = EventIntake(TraceWriter(self.record) if self.record is not None else None, math.inf, self.run_id)
        self._loop = Readings(self._intake, self._read, self._last)
        self._grew_at = time.monotonic()

    def poll(self, timeout: float) -> list[AnyEvent]:
        """The events of the readings taken since the last call, waiting up to ``timeout`` seconds."""
        if self._loop is None:
            raise RuntimeError("the session has not been started")
        return self._loop.poll(timeout)

    def _read(self) -> float | RunOutcome:
        """One reading of the folder and its events: the seconds to the next, or the end once idle."""
        assert self._files is not None and self._follower is not None and self._intake is not None  # started
        try:
            batch = self._files.read()
        except OSError as exc:
            return RunOutcome("failed", f"{self.folder}: cannot be read ({exc.strerror or exc})", 1)
        now = time.monotonic()
        if batch:
            self._grew_at = now
        self._pass(self._follower.take(batch))
        if now - self._grew_at >= self.idle_s and self._follower.world is None:
            return RunOutcome("failed", f"{self.folder}: no NCCL Inspector record in {self.idle_s:g} s (is it the job's "
                              "NCCL_INSPECTOR_DUMP_DIR, with NCCL_INSPECTOR_ENABLE=1?)" + self._left_out(), 1)
        if now - self._grew_at >= self.idle_s:
            return RunOutcome("ok", f"{self.folder} has not grown for {self.idle_s:g} s: followed to its end"
                              + self._left_out(), 0)
        return self.every_s

    def _pass(self, events: list[AnyEvent]) -> None:
        """Into the intake, after the RunStart (made once the job's size is known)."""
        assert self._intake is not None and self._follower is not None
        if events and self._intake.events_seen == 0 and self._follower.world is not None:
            self._intake.emit(RunStart, **self._follower.run_start())
        for event in events:
            self._intake.take(event)

    def _last(self) -> None:
        """Each rank's RankEnd before the RunEnd (nothing where no record ever came)."""
        if self._follower is not None and self._follower.world is not None:
            self._pass(self._follower.finish())

    def _left_out(self) -> str:
        """What the run's end says of lines not shown."""
        assert self._follower is not None and self._files is not None
        parts = [f"{n} line{'s' if n > 1 else ''} {why}" for why, n in sorted(self._follower.damaged.items())]
        if self._follower.held:
            parts.append(f"{self._follower.held} records of communicators whose ranks' processes were never placed")
        if self._files.cut_lines:
            parts.append(f"a cut last line in {len(self._files.cut_lines)} files")
        return f" (left out: {'; '.join(parts)})" if parts else ""

    def release(self, index: int) -> None:
        """A followed folder has no gates (live only)."""

    def stop(self, signum: int = signal.SIGINT) -> None:
        """Stop reading (the job goes on) and close the trace; idempotent."""
        if self._loop is not None:
            self._loop.stop(RunOutcome("interrupted", f"interrupted by {signal.Signals(signum).name}: "
                                       f"stopped following {self.folder}", 128 + signum))
