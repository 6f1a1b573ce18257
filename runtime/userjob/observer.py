"""The light observer of a user's script: every collective it issues, with no waits, no extra
collectives and no copies, so that the job's own timing is left as it is.

**Where calls are seen.** Every collective ``torch.distributed`` runs — the script's own calls,
DDP's C++ reducer, FSDP2, the functional collectives DTensor uses (their kernels call these ops) —
reaches the dispatcher as a ``c10d`` op (``c10d::allreduce_``, ``c10d::_allgather_base_``, …).
The observer registers a Python kernel for each of them at the ``BackendSelect`` dispatch key:
that key is in every call's key set (``inference_mode`` included), it lies below autograd (so
the autograd formulas torch registers for functional collectives are untouched), these ops have
no kernel there of their own, and the observer's kernel hands the call on to the real one at
once. Nothing else is intercepted: a ``TorchDispatchMode`` would see every tensor op of the
script, and pay for each (BENCHMARKS.md measures both). Point-to-point ``send``/``recv`` are not
observed (they are not matched across a group as collectives are).

**What is timed**, from the call's issue, by the first of these the call's ``Work`` offers:

- *CUDA* (NCCL): the process group records CUDA events around each call on its own stream
  (``TORCH_NCCL_ENABLE_TIMING``, set before the script creates its group); ``Work._get_duration``
  reads their time once the call is seen complete — polled at the next call, step mark or the
  script's end, never waited for. Clock ``gpu``. A synchronous call (``async_op=False``) returns
  no Work on NCCL since torch 2.8 and runs on the current stream: the observer records two CUDA
  events on that stream around it (:class:`~..observation.timing.CallClock`) and reads them
  when the second has completed, polled the same way. (Not yet run by collviz's tests: no GPU.)
- *the caller's wait*, for the calls whose caller waits at once from Python: those
  ``torch.distributed``'s functions issue without ``async_op`` (they pass ``async_op=False`` down
  to the op and wait on its ``Work`` before returning), and gloo's ``reduce_scatter_tensor`` (an
  all-reduce it finishes inside the ``wait``, with no future; FSDP2 waits on it at once): the
  end of the first ``Work.wait`` called from Python on it. A wait called from C++ is not seen,
  and the call is then shown untimed at the next step mark. Clock ``host``.
- *its completion, on CPU* (gloo's other calls): one completion thread per rank waits on each
  call's ``Work`` in issue order (the interpreter lock released while it waits) and stamps the
  time it wakes; the calls that have completed by then are stamped by the same wake, and one
  issued while it waits does not wake it. The backend's own threads run nothing of collviz's (a
  done-callback on the call's future would: it runs on gloo's thread before the call's waiters
  are woken, delaying them). The stamp is late by the time the completion thread takes to get the
  interpreter lock (at most the switch interval, 5 ms, while the script's thread runs pure
  Python), or, for a call that completes before an earlier one, until the earlier one has.
  Clock ``host``.

**Steps.** ``collviz.step(name)`` opens a step (one viewer step); outside any step each call is a
step of its own, so every rank's k-th call outside steps is step k everywhere.

**Event delivery.** The script's thread only records each call (its sizes, group, step and
issue time) under the observer's lock; the rank emitter's own sending thread collects what is
recorded every :data:`HAND_OVER_S` (and the observer hands over the rest at the script's end),
turns it into events and sends them, all in one message: one thread wake per hand-over, whatever
the number of events. Waking the emitter's sender, and formatting, for each event cost the
script's thread far more on a busy machine, and so did a thread of the observer's own to hand
events over (BENCHMARKS.md). A hang is still reported, within that delay.

**Event order.** The viewer indexes each rank's events by phase, which must never decrease along
a rank's stream: a step's end, and anything after it, is emitted only once every call issued
before it has ended. Calls of the open step are emitted as they are issued (a hang is seen as it
happens); only events after an earlier step's unfinished call wait for it.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
import torch.distributed as dist

from collviz import marks
from ..observation import nvml
from ..observation.c10d_calls import (
    OP_NAMES,
    C10dSignature,
    CallSizes,
    c10d_async,
    c10d_group,
    c10d_root,
    c10d_signature,
    c10d_tensors,
    call_fields,
    call_sizes,
    tensors_in,
    work_of,
)
from ..observation.group_names import group_label
from ..observation.memory import storages_of
from ..observation.timing import CallClock
from ..wire.protocol import Collective, CudaMemory, Memory, Phase, RankStart
from ..wire.transport import EventEmitter
from .completions import CompletionStamper

__all__ = ["OBSERVED_OPS", "NOT_CAPTURED", "HAND_OVER_S", "ScriptObserver"]

OBSERVED_OPS = ("allreduce_", "allreduce_coalesced_", "allgather_", "_allgather_base_", "allgather_coalesced_",
                "allgather_into_tensor_coalesced_", "reduce_scatter_", "_reduce_scatter_base_",
                "reduce_scatter_tensor_coalesced_", "broadcast_", "reduce_", "gather_", "scatter_", "alltoall_base_",
                "barrier")
"""The ``c10d`` ops observed: every collective of a process group (not send/recv)."""

NOT_CAPTURED = ("values, provenance and transfers not captured: collviz run observes your script without copies, "
                "waits or extra collectives")
"""What a script's run does not show, said in its RunStart (and where the viewer would show them)
and in every step's narration."""

HAND_OVER_S = 0.25
"""How often the emitter collects the observed events (seconds): the events' delay, at most,
before they leave the rank. Each collection wakes a thread, which on a busy machine costs the
rank far more than the events it carries (BENCHMARKS.md, "The observer's events batched"): 0.1 s cost about
1 ms of CPU per 300 ms step, 0.25 s about 0.4 ms."""

_DESCRIPTIONS_KEPT = 1024
"""Distinct calls (op, sizes, root) a group's descriptions are kept for."""

_PER_CALL = "Outside collviz.step each collective is a step of its own. "

_AFTER_BACKEND_SELECT = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.BackendSelect)


def _synchronous_cuda_clock(args: tuple, signature: C10dSignature) -> CallClock | None:
    """A started :class:`CallClock` for a synchronous call on CUDA tensors (``async_op=False``:
    NCCL runs it on the current stream and returns no Work since torch 2.8), else None."""
    if c10d_async(args, signature):
        return None
    first = args[0] if args else None
    sample = first if isinstance(first, torch.Tensor) else next(iter(tensors_in(first)), None)
    return CallClock(sample.device) if sample is not None and sample.is_cuda else None


@dataclass(slots=True)
class _Call:
    """One observed call: what it was (its event fields are made when first sent, off the
    script's thread), when it was issued and ended, and how far its events have gone out."""

    name: str
    group: _Group
    sizes: CallSizes
    root: int | None
    phase: int
    group_seq: int
    issued_ns: int
    ended_ns: int | None = None
    duration_ns: int | None = None
    clock: str = ""
    fields_sent: dict | None = None
    """The fields its begin and end events share, once its begin event went out."""
    sent: bool = False
    """Its end event went out."""

    def end(self, now_ns: int, duration_ns: int | None, clock: str) -> None:
        """Record that the call ended at ``now_ns`` (``duration_ns`` None: not timed)."""
        self.ended_ns, self.duration_ns, self.clock = now_ns, duration_ns, clock if duration_ns is not None else ""

    @property
    def fields(self) -> dict:
        """The fields its begin and end events share."""
        return {**self.group.described(self.name, self.sizes, self.root), "phase": self.phase,
                "group_seq": self.group_seq}


@dataclass
class _Group:
    """What the observer knows of one process group: its label and global ranks in events, how
    its calls are described (a training step repeats the same calls), and the ops whose Work it
    gives has no future (it is asked once: the question costs an exception)."""

    group: dist.ProcessGroup
    label: str
    members: list[int]
    futureless: set[torch._ops.OpOverload] = field(default_factory=set)
    descriptions: dict[tuple[str, CallSizes, int | None], dict] = field(default_factory=dict)

    def described(self, name: str, sizes: CallSizes, root: int | None) -> dict:
        """The fields of a call ``name`` of these ``sizes`` (and ``root``) on this group, but its
        phase and number (:func:`call_fields`; made once, never to be changed)."""
        key = (name, sizes, root)
        fields = self.descriptions.get(key)
        if fields is None:
            fields = call_fields(name, self.label, self.members, sizes, None, root)
            if len(self.descriptions) < _DESCRIPTIONS_KEPT:  # sizes that change every step are not kept
                self.descriptions[key] = fields
        return fields

    def has_future(self, op: torch._ops.OpOverload, work: dist.Work) -> bool:
        """Whether ``op``'s Works on this group, like ``work``, are works of their own (waiting on
        one has no effect but waiting), as gloo's ``reduce_scatter_tensor``'s is not."""
        if op in self.futureless:
            return False
        try:
            work.get_future()
        except RuntimeError:  # "not implemented": the call finishes inside its wait
            self.futureless.add(op)
            return False
        return True


@dataclass
class _Edge:
    """A step's begin or end, waiting in the queue for its turn. A step of one call ends when the
    call does (``after``); a marked step's end carries its Memory event's fields, sent right after
    it (so that no event of a later step goes out before a call of this one)."""

    index: int
    name: str
    edge: str
    t_ns: int | None
    after: _Call | None = None
    narration: str = ""
    memory: dict | None = None
    sent: bool = False


@dataclass
class _Watched:
    """What ``collviz.watch`` named: modules (parameters, gradients) and optimizers (state)."""

    modules: list[torch.nn.Module] = field(default_factory=list)
    optimizers: list[torch.optim.Optimizer] = field(default_factory=list)


class ScriptObserver:
    """Observes every collective this process issues while entered (``with observer:``), and
    receives the script's marks (:class:`collviz.marks.Recorder`); emits events through ``emitter``.

    Calls may be issued, and complete, on any thread; everything the observer holds is guarded by
    one lock. Events wait in an outbox until the emitter collects them.
    """

    def __init__(self, emitter: EventEmitter) -> None:
        self.emitter = emitter
        self.phase_index = -1
        """The step calls go to now (-1: none yet)."""
        self._lock = threading.Lock()
        self._queue: deque[_Call | _Edge] = deque()
        self._polled: list[tuple[dist.Work | CallClock, _Call]] = []
        """CUDA calls and their Work (or, for a synchronous call, the events around it), until seen complete."""
        self._waited: dict[int, tuple[dist.Work, _Call]] = {}
        """id(Work) → (Work, call) for calls whose end is the caller's wait."""
        self._group_seq: Counter[str] = Counter()
        self._groups: dict[int, _Group] = {}
        self._next_phase = 0
        self._phase_name = ""
        self._step_open = False
        self._started = False
        self._closed = True
        self._library: torch.library.Library | None = None
        self._original_wait = dist.Work.wait
        self._wait_code: Any = None
        self._watched = _Watched()
        self._peak = 0
        self._completions = CompletionStamper(self._original_wait, self._completed)
        self._outbox: list[tuple[type, dict]] = []

    # ---- lifetime ------------------------------------------------------------------------------

    def __enter__(self) -> ScriptObserver:
        self._closed = False
        self._library = torch.library.Library("c10d", "IMPL")
        for name in OBSERVED_OPS:
            packet = getattr(torch.ops.c10d, name, None)
            if packet is not None:
                self._library.impl(name, partial(self._kernel, packet.default, OP_NAMES.get(name, name),
                                                 c10d_signature(packet.default)), "BackendSelect", with_keyset=True)
        original, waited = self._original_wait, self._waited_on

        def wait(self: dist.Work, *args: Any, **kwargs: Any) -> bool:  # installed as Work.wait: self is the Work
            result = original(self, *args, **kwargs)
            waited(self)
            return result

        self._wait_code = wait.__code__
        dist.Work.wait = wait  # type: ignore[method-assign]
        self._completions.start()
        self.emitter.collect_every(HAND_OVER_S, self._handed_over)
        marks.attach(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        marks.detach()
        dist.Work.wait = self._original_wait  # type: ignore[method-assign]
        self._completions.stop()
        with self._lock:
            now = time.monotonic_ns()
            if self._step_open:
                self._end_step_locked(now)
            self._poll_locked()
            self._give_up_waits_locked(now)
            self._flush_locked()
            if not self._started:
                self._announce_locked(None)
            self._closed = True
        self.emitter.stop_collecting()
        self.emitter.emit_all(self._handed_over())
        if self._library is not None:
            self._library._destroy()
            self._library = None

    # ---- calls ---------------------------------------------------------------------------------

    def _kernel(self, op: torch._ops.OpOverload, name: str, signature: C10dSignature,
                keyset: torch._C.DispatchKeySet, *args: Any, **kwargs: Any) -> Any:
        """Issue the call (the real kernel, at once), then record it as ``name``; returns what the
        call returned."""
        issued_ns = time.monotonic_ns()
        clock = _synchronous_cuda_clock(args, signature)
        out = op.redispatch(keyset & _AFTER_BACKEND_SELECT, *args, **kwargs)
        if clock is not None:
            clock.issued()
        if not self._closed:
            self._issued(op, name, signature, args, out, issued_ns, clock)
        return out

    def _group(self, group: dist.ProcessGroup) -> _Group:
        """What is known of ``group`` (looked up once per group)."""
        known = self._groups.get(id(group))
        if known is None or known.group is not group:
            label = group_label(group.group_name, getattr(group, "group_desc", ""))  # as its Flight Recorder names it
            known = self._groups[id(group)] = _Group(group, label, dist.get_process_group_ranks(group))
        return known

    def _issued(self, op: torch._ops.OpOverload, name: str, signature: C10dSignature, args: tuple, out: Any,
                issued_ns: int, clock: CallClock | None = None) -> None:
        """Record a call of ``op`` just issued: what it moves, and where its end will come from
        (``clock``: the CUDA events around a synchronous call, which returns no Work on NCCL)."""
        inputs, outputs = c10d_tensors(args)
        group = c10d_group(args, signature.group_at)
        known = self._group(group)
        label = known.label
        sizes = call_sizes(inputs, outputs)
        sample = outputs[0] if outputs else inputs[0] if inputs else None
        on_gpu = sample is not None and sample.is_cuda
        work = work_of(out)
        timed = None  # the Work the completion thread times
        if work is not None and not on_gpu and c10d_async(args, signature):
            if name != "reduce_scatter" or known.has_future(op, work):
                timed = work  # else gloo's reduce_scatter_tensor, finished inside its wait: timed by the caller's
        with self._lock:
            if not self._started:
                self._announce_locked(sample, group)
            if self._polled:
                self._poll_locked()
            seq = self._group_seq[label] + 1  # numbered from #1 on each group, as Flight Recorder numbers them
            if not self._step_open:
                self._open_locked(f"{name} #{seq} on group {label}", issued_ns, _PER_CALL + NOT_CAPTURED)
            call = _Call(name, known, sizes, c10d_root(name, args), self.phase_index, seq, issued_ns)
            self._group_seq[label] = seq
            self._queue.append(call)
            if not self._step_open:  # a step of one call: it ends when the call does
                self._queue.append(_Edge(self.phase_index, self._phase_name, "end", None, after=call))
            if work is None and clock is not None:
                self._polled.append((clock, call))
            elif work is None:
                call.end(issued_ns, None, "")  # nothing to time (NCCL's coalesced calls return no Work)
            elif on_gpu:
                self._polled.append((work, call))
            elif timed is None:
                self._waited[id(work)] = (work, call)
        if timed is not None:
            self._completions.add(timed, call)

    def _completed(self, ended: list[tuple[_Call, bool]], now_ns: int) -> None:
        """The completion thread saw these calls complete by ``now_ns`` (each with False when it failed, so
        has no time of its own): stamp them; what that releases goes out at the next hand-over."""
        with self._lock:
            for call, ok in ended:
                call.end(now_ns, now_ns - call.issued_ns if ok else None, "host")

    def _waited_on(self, work: dist.Work) -> None:
        """A ``Work.wait`` called from Python returned: the end of a call timed by its wait."""
        if id(work) not in self._waited:
            return
        now = time.monotonic_ns()
        with self._lock:
            entry = self._waited.get(id(work))
            if entry is None or entry[0] is not work:
                return
            del self._waited[id(work)]
            entry[1].end(now, now - entry[1].issued_ns, "host")

    def hide_wait(self, exc: BaseException) -> None:
        """Drop the observer's ``Work.wait`` wrapper from the end of ``exc``'s traceback, so that an
        error a wait raised is reported where the script (or torch) waited, not inside collviz."""
        entry = exc.__traceback__
        while entry is not None and entry.tb_next is not None:
            if entry.tb_next.tb_next is None and entry.tb_next.tb_frame.f_code is self._wait_code:
                entry.tb_next = None
                return
            entry = entry.tb_next

    def _poll_locked(self) -> None:
        """Stamp the CUDA calls whose work has completed with the GPU time NCCL measured."""
        pending: list[tuple[dist.Work | CallClock, _Call]] = []
        for work, call in self._polled:
            if isinstance(work, CallClock):
                if work.done():
                    call.end(time.monotonic_ns(), work.read().duration_ns, "gpu")
                else:
                    pending.append((work, call))
                continue
            if not work.is_completed():
                pending.append((work, call))
                continue
            try:
                # torch's stubs omit Work._get_duration, which the C++ binding has (NCCL's GPU time, ms)
                duration = int(work._get_duration() * 1e6)  # type: ignore[attr-defined]
            except RuntimeError:  # timing was off for this group (created before the variable was set)
                duration = None
            call.end(time.monotonic_ns(), duration, "gpu")
        self._polled = pending

    def _give_up_waits_locked(self, now_ns: int) -> None:
        """Calls timed by a wait that no Python code made (a wait from C++) end here, untimed."""
        for _, call in self._waited.values():
            call.end(now_ns, None, "")
        self._waited.clear()

    # ---- the script's marks (marks.Recorder) ---------------------------------------------------

    def begin_step(self, name: str) -> int:
        """Open step ``name`` now, ending the open one; returns its number."""
        now = time.monotonic_ns()
        with self._lock:
            if self._step_open:
                self._end_step_locked(now)
            self._poll_locked()
            self._give_up_waits_locked(now)
            self._open_locked(name, now, NOT_CAPTURED)
            self._step_open = True
            return self.phase_index

    def end_step(self, number: int) -> None:
        """End step ``number`` if it is the open one."""
        now = time.monotonic_ns()
        with self._lock:
            if self._step_open and self.phase_index == number:
                self._end_step_locked(now)
                self._poll_locked()
                self._give_up_waits_locked(now)

    def watch(self, objects: tuple[Any, ...]) -> None:
        """Account these modules and optimizers in each step's memory (TypeError for anything else)."""
        for item in objects:
            if isinstance(item, torch.nn.Module):
                self._watched.modules.append(item)
            elif isinstance(item, torch.optim.Optimizer):
                self._watched.optimizers.append(item)
            else:
                raise TypeError(f"collviz.watch takes modules and optimizers, not {type(item).__name__}")

    # ---- steps, memory, RankStart (callers hold the lock) --------------------------------------

    def _open_locked(self, name: str, t_ns: int, narration: str) -> None:
        self.phase_index, self._phase_name = self._next_phase, name
        self._next_phase += 1
        self._queue.append(_Edge(self.phase_index, name, "begin", t_ns, narration=narration))

    def _end_step_locked(self, t_ns: int) -> None:
        self._step_open = False
        self._queue.append(_Edge(self.phase_index, self._phase_name, "end", t_ns, memory=self._memory_locked(t_ns)))

    def _memory_locked(self, t_ns: int) -> dict | None:
        """The fields of a Memory event for the step that ends at ``t_ns``, from what is cheap to
        read: the CUDA allocator's figures (where the script has initialised CUDA) and the watched
        objects' bytes; None when there are neither."""
        categories = _watched_bytes(self._watched)
        cuda = device_totals = None
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            index = torch.cuda.current_device()
            cuda = CudaMemory(allocated=torch.cuda.memory_allocated(index), reserved=torch.cuda.memory_reserved(index),
                              max_allocated=torch.cuda.max_memory_allocated(index))
            device_totals = nvml.device_memory(index)
        if cuda is None and not categories:
            return None
        live = cuda.allocated if cuda is not None else sum(categories.values())
        self._peak = max(self._peak, cuda.max_allocated if cuda is not None else live)
        return {"t_ns": t_ns, "phase": self.phase_index, "label": "step end", "live_bytes": live,
                "peak_bytes": self._peak, "by_category": categories,
                "source": "cuda allocator" if cuda is not None else "watched", "cuda": cuda, "nvml": device_totals}

    def _announce_locked(self, sample: torch.Tensor | None, group: dist.ProcessGroup | None = None) -> None:
        """RankStart (once): the device of the first call's tensors and its group's backend."""
        self._started = True
        backend = ""
        if dist.is_initialized():
            try:
                backend = str(dist.get_backend(group))
            except (RuntimeError, ValueError):
                pass
        device = str(sample.device) if sample is not None else "(no collective)"
        self._send(RankStart, device=device, backend=backend, host=socket.gethostname(), pid=os.getpid())

    # ---- emission in order ---------------------------------------------------------------------

    def _flush_locked(self) -> None:
        """Emit every queued event whose turn has come (see the module's "Event order")."""
        all_ended = True
        for item in self._queue:
            if isinstance(item, _Edge):
                if not item.sent:
                    if item.edge == "end" and not all_ended:
                        break
                    self._send_edge(item)
                continue
            fields = item.fields_sent
            if fields is None:
                fields = item.fields_sent = item.fields
                self._outbox.append((Collective, {**fields, "t_ns": item.issued_ns, "edge": "begin"}))
            if item.ended_ns is not None and not item.sent:
                self._outbox.append((Collective, {**fields, "t_ns": item.ended_ns, "edge": "end",
                                                  "duration_ns": item.duration_ns, "clock": item.clock}))
                item.sent = True
            all_ended = all_ended and item.sent
        while self._queue and self._queue[0].sent:
            self._queue.popleft()

    def _send(self, event_type: type, **fields: Any) -> None:
        """Put an event in the outbox (the lock is held), stamped now unless ``t_ns`` says when."""
        fields.setdefault("t_ns", time.monotonic_ns())
        self._outbox.append((event_type, fields))

    def _handed_over(self) -> list[tuple[type, dict]]:
        """The events whose turn has come, taken from the outbox (the emitter's :data:`Source`)."""
        with self._lock:
            self._flush_locked()
            batch, self._outbox = self._outbox, []
        return batch

    def _send_edge(self, edge: _Edge) -> None:
        if edge.edge == "begin":
            self._send(Phase, t_ns=edge.t_ns, index=edge.index, name=edge.name, edge="begin",
                       narration=edge.narration)
        else:
            t_ns = edge.t_ns
            if t_ns is None:  # a step of one call ends when the call did
                if edge.after is None:
                    raise RuntimeError(f"step {edge.index} ends with neither a time nor a call")
                t_ns = edge.after.ended_ns
            self._send(Phase, t_ns=t_ns, index=edge.index, name=edge.name, edge="end")
            if edge.memory is not None:
                self._send(Memory, **edge.memory)
        edge.sent = True


def _watched_bytes(watched: _Watched) -> dict[str, int]:
    """Bytes of the watched modules' parameters and gradients and the optimizers' state, each
    storage counted once (FSDP2's parameters count their local shards); empty when nothing is
    watched."""
    if not watched.modules and not watched.optimizers:
        return {}
    seen: set[int] = set()

    def total(tensors: list[torch.Tensor]) -> int:
        count = 0
        for storage in storages_of(tensors):
            if storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                count += storage.nbytes()
        return count

    params: list[torch.Tensor] = [p for module in watched.modules for p in module.parameters()]
    grads = [p.grad for p in params if p.grad is not None]
    state = [value for optimizer in watched.optimizers for entry in optimizer.state.values()
             for value in entry.values() if isinstance(value, torch.Tensor)]
    figures = {"params": total(params), "grads": total(grads), "optimizer state": total(state)}
    return {name: count for name, count in figures.items() if count}
