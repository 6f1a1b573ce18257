"""How long one collective call took: on the host (CPU), or on the GPU by CUDA events.

On CPU (gloo) a call's time is issue to completion as the calling thread sees it. On CUDA the
host only enqueues work, so host time says nothing about the call: :class:`CallClock` records a
CUDA event on the stream the call is issued from before it, and another once that stream has
been made to wait for the call, and reads the time between them when the call has completed —
the call's own time on the GPU, whether or not the host waited for it (DESIGN.md §6).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

import torch

__all__ = ["CallClock", "CallTime"]

Clock = Literal["host", "gpu"]


@dataclass(frozen=True)
class CallTime:
    """A finished call's time: host timestamps of its issue and of when it was seen complete, and
    its duration as measured by ``clock``."""

    started_ns: int
    ended_ns: int
    duration_ns: int
    clock: Clock


class CallClock:
    """Times one call on ``device``: create it just before issuing, :meth:`issued` right after
    (on CUDA, once the issuing stream waits for the call), :meth:`read` once it has completed."""

    def __init__(self, device: torch.device) -> None:
        self.gpu = device.type == "cuda"
        self.started_ns = time.monotonic_ns()
        self._ended_ns: int | None = None
        self._events: tuple[torch.cuda.Event, torch.cuda.Event] | None = None
        if self.gpu:
            self._events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            self._events[0].record()

    def issued(self) -> None:
        """The call is enqueued (GPU: the issuing stream waits for it) or, on CPU, complete."""
        if self._events is not None:
            self._events[1].record()
        else:
            self._ended_ns = time.monotonic_ns()

    def read(self) -> CallTime:
        """The call's time; on CUDA this waits (host) until the call has completed on the GPU."""
        if self._events is None:
            ended = self._ended_ns if self._ended_ns is not None else time.monotonic_ns()
            return CallTime(self.started_ns, ended, ended - self.started_ns, "host")
        start, end = self._events
        end.synchronize()
        return CallTime(self.started_ns, time.monotonic_ns(), int(start.elapsed_time(end) * 1e6), "gpu")
