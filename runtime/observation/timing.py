"""How long one collective call took: on the host (CPU), or on the GPU by CUDA events.

On CPU (gloo) a call's time is issue to completion as the calling thread sees it. On CUDA the
host only enqueues work, so host time says nothing about the call: :class:`CallClock` records a
CUDA event on the stream the call is issued from (the current stream) before it, and another
after it, and reads the time between them when the call has completed — the call's own time on
the GPU (DESIGN.md §6). The second event brackets the call either way a call can go: an
asynchronous call's ``Work`` was waited on, which makes the current stream wait for it; a
synchronous NCCL call (``async_op=False``, the default of every ``torch.distributed`` function
and of FSDP2's own calls) returns no ``Work`` at all since torch 2.8 and ran on the current
stream itself. Reading the time waits (host) until the second event has completed, so an
observer that reads at once synchronises the host with the call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch

__all__ = ["CallClock", "CallTime", "GpuEvent", "cuda_event", "wait_for_device"]

Clock = Literal["host", "gpu", ""]


class GpuEvent(Protocol):
    """What :class:`CallClock` uses of a ``torch.cuda.Event`` (a test gives a fake one)."""

    def record(self) -> None:
        """Record the event on the current stream."""

    def query(self) -> bool:
        """Whether the event has completed (never waits)."""

    def synchronize(self) -> None:
        """Wait (host) until the event has completed."""

    def elapsed_time(self, end_event: Any) -> float:
        """Milliseconds from this event to ``end_event`` (another event of the same kind)."""


def cuda_event() -> GpuEvent:
    """A timing CUDA event, recorded by :class:`CallClock` (the seam a test fakes: ``torch.cuda.Event``)."""
    return torch.cuda.Event(enable_timing=True)


def wait_for_device(device: torch.device) -> None:
    """On CUDA, wait (host) until every kernel queued on ``device`` has run, so that a host
    timestamp taken next is the GPU's too; nothing on CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class CallTime:
    """A finished call's time: host timestamps of its issue and of when it was seen complete, and
    its duration as measured by ``clock`` (None and ``""``: the call could not be timed)."""

    started_ns: int
    ended_ns: int
    duration_ns: int | None
    clock: Clock


class CallClock:
    """Times one call on ``device``: create it just before issuing, :meth:`issued` right after,
    :meth:`read` once it has completed. Its CUDA events come from :func:`cuda_event`."""

    def __init__(self, device: torch.device) -> None:
        self.gpu = device.type == "cuda"
        self.started_ns = time.monotonic_ns()
        self._ended_ns: int | None = None
        self._seen_complete = True
        self._events: tuple[GpuEvent, GpuEvent] | None = None
        if self.gpu:
            self._events = (cuda_event(), cuda_event())
            self._events[0].record()

    def issued(self, seen_complete: bool = True) -> None:
        """The call was issued. On CUDA the second event is recorded on the issuing stream, which
        the call is on or waits for (see the module's docstring). On CPU, ``seen_complete`` says
        whether the host saw the call complete (its Work waited on); when not, it has no time."""
        if self._events is not None:
            self._events[1].record()
        else:
            self._ended_ns = time.monotonic_ns()
            self._seen_complete = seen_complete

    def done(self) -> bool:
        """Whether the call has completed, without waiting (CPU: once issued)."""
        return self._events[1].query() if self._events is not None else self._ended_ns is not None

    def read(self) -> CallTime:
        """The call's time; on CUDA this waits (host) until the call has completed on the GPU."""
        if self._events is None:
            ended = self._ended_ns if self._ended_ns is not None else time.monotonic_ns()
            if not self._seen_complete:
                return CallTime(self.started_ns, ended, None, "")
            return CallTime(self.started_ns, ended, ended - self.started_ns, "host")
        start, end = self._events
        end.synchronize()
        return CallTime(self.started_ns, time.monotonic_ns(), int(start.elapsed_time(end) * 1e6), "gpu")
