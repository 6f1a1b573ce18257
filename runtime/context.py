"""What a scenario running on one rank uses to report itself: phases, gates, buffers, memory."""

from __future__ import annotations

import collections
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from .observation.memory import StorageTracker, memory_figures
from .observation.tensors import tensor_contents
from .wire.protocol import Buffer, Freed, Gate, Memory, Phase, ProvenanceRun
from .wire.transport import EventEmitter, GateClient

__all__ = ["RankContext"]


@dataclass
class RankContext:
    """One rank's view of the run: identity, device, and the means to emit what it does.

    Phases are numbered from 0 in the order the scenario opens them; every rank opens the same
    phases, so index k means the same step everywhere. In step mode each phase starts behind gate k,
    except an ungated one (a setup, which the class should see done before the first gate: the
    first gate then shows what every rank holds, not four empty panels).
    """

    rank: int
    world_size: int
    backend: str
    device: torch.device
    emitter: EventEmitter
    tracker: StorageTracker
    gates: GateClient | None = None
    narration: Mapping[str, str] = field(default_factory=dict)
    narration_values: Mapping[str, object] = field(default_factory=dict)
    phase_index: int = -1
    _next_phase: int = 0
    _group_seq: collections.Counter[str] = field(default_factory=collections.Counter)

    @contextmanager
    def phase(self, key: str, name: str, narration: str | None = None, unit: str | None = None,
              gated: bool = True) -> Iterator[int]:
        """Open phase ``name``: gate (unless not ``gated``), begin, body, end. Its narration is the
        scenario's text for ``key`` (with the teacher's notes; for a phase of one ``unit`` of the
        model, the text for ``UNIT.KEY`` where notes were given for that unit), or ``narration``
        when the program words it itself."""
        index = self._next_phase
        self._next_phase += 1
        if self.gates is not None and gated:
            self.emitter.emit(Gate, index=index, edge="wait")
            self.emitter.flush()
            self.gates.wait(index)
            self.emitter.emit(Gate, index=index, edge="pass")
        if narration is None:
            template = self.narration.get(f"{unit}.{key}") if unit else None
            narration = (template if template is not None else self.narration.get(key, "")).format(
                **self.narration_values)
        text = narration
        self.emitter.emit(Phase, index=index, name=name, edge="begin", narration=text, key=key)
        self.phase_index = index
        yield index
        self.emitter.emit(Phase, index=index, name=name, edge="end")

    def next_group_seq(self, group: str) -> int:
        """The number of the next collective this rank issues on ``group`` (1, 2, …: from #1, as
        Flight Recorder, every import and ``collviz run`` number calls)."""
        self._group_seq[group] += 1
        return self._group_seq[group]

    def buffer(
        self,
        name: str,
        role: str,
        moment: str,
        tensor: torch.Tensor,
        provenance: list[ProvenanceRun] | None,
        shape: list[int] | None = None,
        labels: list[str] | None = None,
    ) -> None:
        """Emit a Buffer event for ``tensor`` (snapshotted outside the memory accounting);
        ``labels`` name its elements."""
        with self.tracker.suspended():
            contents = tensor_contents(tensor if shape is None else tensor.reshape(shape))
        self.emitter.emit(
            Buffer, phase=self.phase_index, name=name, role=role, moment=moment, provenance=provenance,
            labels=labels, **contents
        )

    def freed(self, name: str, nbytes: int) -> None:
        """Emit a Freed event: the buffer shown as ``name`` (``nbytes`` of it) was released."""
        self.emitter.emit(Freed, phase=self.phase_index, name=name, bytes=nbytes)

    def memory(self, label: str) -> None:
        """Emit a Memory event: live bytes now, peak, categories, CUDA/NVML figures where present."""
        self.emitter.emit(Memory, phase=self.phase_index, label=label, **memory_figures(self.tracker, self.device))
