"""The viewer under Pilot: its terminal size, a fake session from prepared events, a real one, and a
wait for a condition."""

from __future__ import annotations

import threading
from pathlib import Path

from collviz.runtime.wire.protocol import Go


SIZE = (120, 36)
"""The terminal the viewer tests run in (columns, rows)."""


class FakeSession:
    """Stands in for a session (the viewer's part of ``collviz.runtime.sessions.contract.Session``),
    from a prepared event list.

    Live: hands out every event at once. Step: hands out events up to each gate's ``Go`` only
    once ``release`` has been called for that gate (as the real workers would wait). ``batch``:
    at most that many events a poll (ranks arriving one event at a time).
    """

    def __init__(self, events, *, step: bool = False, batch: int | None = None) -> None:
        self.events = list(events)
        self.step = step
        self.batch = batch
        self.finished = False
        self.stopped = 0
        self.released: list[int] = []
        self._sent = 0
        self._lock = threading.Lock()

    def start(self) -> None:
        """The app never starts it: the test (or nobody) does."""
        raise AssertionError("the caller starts the session, not the app")

    def _limit(self) -> int:
        if not self.step:
            return len(self.events)
        for i, event in enumerate(self.events):
            if isinstance(event, Go) and event.index not in self.released:
                return i
        return len(self.events)

    def poll(self, timeout: float) -> list:
        """The events released since the last poll; waits ``timeout`` when there are none."""
        with self._lock:
            limit = self._limit() if self.batch is None else min(self._limit(), self._sent + self.batch)
            batch = self.events[self._sent : limit]
            self._sent = limit
            if self._sent == len(self.events):
                self.finished = True
        if not batch:
            threading.Event().wait(timeout)
        return batch

    def release(self, index: int) -> None:
        """Let gate ``index``'s ``Go`` out, and the events after it up to the next gate not released (step mode)."""
        with self._lock:
            self.released.append(index)

    def stop(self) -> None:
        """Count a stop (the tests check the viewer stops its session)."""
        self.stopped += 1


async def until(pilot, predicate, tries: int = 500) -> None:
    """Pause ``pilot`` until ``predicate()`` holds; fail after ``tries`` pauses of 20 ms."""
    for _ in range(tries):
        if predicate():
            return
        await pilot.pause(0.02)
    raise AssertionError("condition never became true")


def real_session(name: str, *, step: bool = False, record: Path | None = None):
    """A started session of the real runtime: ``name`` on 4 gloo ranks, built as ``collviz NAME`` does."""
    from collviz.runtime.sessions.local import LocalSession
    from collviz.runtime.plan import plan_run
    from collviz.runtime.scenario_files.loading import find_scenario

    session = LocalSession(plan_run(find_scenario(name), 4, backend="gloo", step=step, record=record))
    session.start()
    return session

