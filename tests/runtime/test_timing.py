"""GPU time, checked on CPU with fake CUDA events and a fake synchronize: a collective's time by
CUDA events on the issuing stream (since torch 2.8 a synchronous NCCL call, such as every FSDP2
all-gather and reduce-scatter, returns no Work, yet the events recorded on the current stream
before and after it bracket its kernel); timed training steps and pipeline spans that wait for
the GPU instead of reading the host's launch times."""

from __future__ import annotations


import pytest
import torch
import torch.distributed as dist

import collviz.runtime.programs.training.observer as training_observer
import collviz.runtime.userjob.observer as script_observer
from collviz.runtime.context import RankContext
from collviz.runtime.observation.memory import StorageTracker
from collviz.runtime.observation.c10d_calls import c10d_async
from collviz.runtime.observation.timing import CallClock
from collviz.runtime.programs.training.common import PhaseSequence, timed_steps
from collviz.runtime.programs.training.observer import CollectiveObserver
from collviz.runtime.programs.training.pp import _StageWatch
from collviz.runtime.wire.protocol import Collective, Phase, Span

ELAPSED_MS = 2.5
"""What every fake event pair reports."""


class FakeEvent:
    """Stands in for ``torch.cuda.Event(enable_timing=True)``: records where and when it was
    recorded (``stream`` None: the current stream, the issuing one) into a shared log."""

    log: list[tuple[int, object]] = []

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing, "a timing event must be asked for"
        self.synchronized = False

    def record(self, stream: object = None) -> None:
        FakeEvent.log.append((id(self), stream))

    def query(self) -> bool:
        self.synchronized = True  # a completed event needs no wait
        return True

    def synchronize(self) -> None:
        self.synchronized = True

    def elapsed_time(self, end_event: FakeEvent) -> float:
        recorded = [event for event, _ in FakeEvent.log]
        assert recorded.index(id(self)) < recorded.index(id(end_event)), "the end was recorded before the start"
        assert end_event.synchronized, "the time was read before the call completed"
        return ELAPSED_MS


class Emitted:
    """A rank emitter that keeps what it is given."""

    def __init__(self) -> None:
        self.events: list[tuple[type, dict]] = []

    def emit(self, event_type: type, t_ns: int | None = None, **fields: object) -> None:
        self.events.append((event_type, fields))

    def flush(self) -> None:
        """Nothing is queued."""


@pytest.fixture
def fake_cuda_events(monkeypatch):
    """torch.cuda.Event replaced by :class:`FakeEvent`, its log emptied."""
    FakeEvent.log = []
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    return FakeEvent.log


def test_a_call_that_returned_no_work_is_timed_by_the_events_on_the_issuing_stream(fake_cuda_events):
    clock = CallClock(torch.device("cuda", 0))
    clock.issued(seen_complete=False)  # no Work: a synchronous NCCL call
    took = clock.read()
    assert (took.duration_ns, took.clock) == (int(ELAPSED_MS * 1e6), "gpu")
    assert len(fake_cuda_events) == 2 and all(stream is None for _, stream in fake_cuda_events)


def test_on_cpu_a_call_not_seen_complete_has_no_time():
    clock = CallClock(torch.device("cpu"))
    clock.issued(seen_complete=False)
    assert (clock.read().duration_ns, clock.read().clock) == (None, "")
    waited = CallClock(torch.device("cpu"))
    waited.issued()
    assert waited.read().clock == "host" and waited.read().duration_ns >= 0


def test_the_training_observer_gives_an_fsdp_style_call_without_work_its_gpu_time(
        one_rank_group, fake_cuda_events, monkeypatch):
    monkeypatch.setattr(training_observer, "work_of", lambda out: None)  # as NCCL's synchronous calls return
    emitter = Emitted()
    ctx = RankContext(rank=0, world_size=1, backend="nccl", device=torch.device("cuda", 0), emitter=emitter,
                      tracker=StorageTracker(torch.device("cpu")))
    with CollectiveObserver(ctx):
        dist.all_gather_into_tensor(torch.zeros(4), torch.ones(4))
    [end] = [fields for kind, fields in emitter.events if kind is Collective and fields["edge"] == "end"]
    assert end["op"] == "all_gather"
    assert (end["duration_ns"], end["clock"]) == (int(ELAPSED_MS * 1e6), "gpu")
    assert len(fake_cuda_events) == 2 and all(stream is None for _, stream in fake_cuda_events)


def _cuda_context(emitter: Emitted) -> RankContext:
    """A rank context on a (fake) CUDA device whose memory samples are dropped (no CUDA here)."""
    ctx = RankContext(rank=0, world_size=1, backend="nccl", device=torch.device("cuda", 0), emitter=emitter,
                      tracker=StorageTracker(torch.device("cpu")))
    ctx.memory = lambda label: None  # type: ignore[method-assign]
    return ctx


def test_timed_steps_drain_the_gpu_before_the_phase_begins_and_before_it_ends(monkeypatch):
    order: list[str] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: order.append("drain"))

    class Ordered(Emitted):
        def emit(self, event_type: type, t_ns: int | None = None, **fields: object) -> None:
            if event_type is Phase:
                order.append(f"phase {fields['edge']}")

    ctx = _cuda_context(Ordered())
    timed_steps(ctx, PhaseSequence(ctx, memory=False), 2, lambda: order.append("step"))
    assert order == ["drain", "phase begin", "step", "step", "drain", "phase end"]


def test_a_pipeline_span_on_cuda_is_timed_by_events_read_once_the_stage_has_run(fake_cuda_events):
    class Stage:
        """The four methods of a PipelineStage the watch wraps."""

        def get_fwd_recv_ops(self, chunk: int) -> list:
            return []

        def get_bwd_recv_ops(self, chunk: int) -> list:
            return []

        def forward_one_chunk(self, chunk: int) -> str:
            return f"forward {chunk}"

        def backward_one_chunk(self, chunk: int) -> str:
            return f"backward {chunk}"

    emitter = Emitted()
    ctx = _cuda_context(emitter)
    stage = Stage()
    _StageWatch(ctx, PhaseSequence(ctx, memory=False), stage)  # type: ignore[arg-type]
    assert stage.forward_one_chunk(3) == "forward 3"
    [span] = [fields for kind, fields in emitter.events if kind is Span]
    assert (span["kind"], span["microbatch"], span["duration_ns"]) == ("forward", 3, int(ELAPSED_MS * 1e6))
    assert len(fake_cuda_events) == 2


class Collected:
    """The emitter side the script observer uses: its events arrive through ``emit_all``."""

    def __init__(self) -> None:
        self.events: list[tuple[type, dict]] = []

    def collect_every(self, interval_s: float, source: object) -> None:
        """Nothing is collected on a timer here: everything comes at the end."""

    def stop_collecting(self) -> None:
        """See :meth:`collect_every`."""

    def emit_all(self, events: list[tuple[type, dict]]) -> None:
        self.events.extend(events)


def test_a_scripts_synchronous_call_without_work_is_timed_by_the_events_around_it(
        one_rank_group, fake_cuda_events, monkeypatch):
    """``collviz run``: a synchronous call on CUDA tensors (async_op=False) returns no Work on NCCL;
    the events recorded on the current stream around it give its time once they have completed."""
    monkeypatch.setattr(script_observer, "work_of", lambda out: None)
    monkeypatch.setattr(script_observer, "_synchronous_cuda_clock",  # as for CUDA tensors
                        lambda args, signature: None if c10d_async(args, signature) else CallClock(torch.device("cuda", 0)))
    emitter = Collected()
    with script_observer.ScriptObserver(emitter):  # type: ignore[arg-type]
        dist.all_reduce(torch.ones(4))
    [end] = [fields for kind, fields in emitter.events if kind is Collective and fields["edge"] == "end"]
    assert end["op"] == "all_reduce"
    assert (end["duration_ns"], end["clock"]) == (int(ELAPSED_MS * 1e6), "gpu")
    assert len(fake_cuda_events) == 2 and all(stream is None for _, stream in fake_cuda_events)
