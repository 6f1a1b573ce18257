"""Export an event log as Chrome trace-event JSON, the format Perfetto and chrome://tracing load.

Layout of the exported timeline:

- one process per rank (``pid`` = rank), plus one for the launcher (``pid`` = world size);
- on each rank, thread 0 "phases": every phase as a complete event (``ph: "X"``; phases follow
  one another or nest, never overlap), with buffer snapshots, checks and gates as instant events;
- thread 1 "collectives": every collective call as a complete event while calls follow one
  another; a call that overlaps an earlier one (asynchronous collectives) becomes an async slice
  (``ph: "b"``/``"e"``), since the format forbids complete events that overlap on one track;
- transfers as flow events (``ph: "s"`` → ``"f"``) from a slice on the sender's rank to one on
  the receiver's rank in the same phase: the collective call when the phase has one, else the phase;
- memory as counter tracks (``ph: "C"``): live tensor bytes per category, peak, and the CUDA
  allocator's and NVML's figures where the run had them.

Timestamps are microseconds from the log's first moment: ``t_ns`` is CLOCK_MONOTONIC
(``time.monotonic_ns()``), shared by the processes of one machine. ``otherData.clock`` says so and
gives the ``t_ns`` of timestamp 0; with the trace's :class:`~..wire.trace.ClockAnchor` (when every
rank ran on the host that wrote the trace) it also gives that moment's Unix time, as the top-level
``baseTimeNanoseconds`` too: the key torch.profiler's traces carry, with the same meaning (Unix time
= baseTimeNanoseconds + ts µs), so the two line up by the difference of their bases.

Whatever a damaged trace holds, the export is strict JSON (non-finite numbers become the strings
``"nan"``, ``"inf"``, ``"-inf"``) that keeps the format's rules: a slice that would overlap another
on its track without nesting becomes an async slice, an end before its begin a zero-length slice.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from ..wire.files import write_output
from ..wire.trace import ClockAnchor
from ..wire.protocol import (
    LAUNCHER_RANK,
    AnyEvent,
    Buffer,
    Check,
    Collective,
    Memory,
    Phase,
    RankStart,
    RunStart,
    Span,
    Transfer,
)

__all__ = ["PHASES_TID", "COLLECTIVES_TID", "PIPELINE_TID", "CLOCK_NAME", "perfetto_trace", "write_perfetto"]

PHASES_TID = 0
"""Thread of each rank's process that holds its phases and instant events."""

COLLECTIVES_TID = 1
"""Thread of each rank's process that holds its collective calls."""

PIPELINE_TID = 2
"""Thread of each rank's process that holds its pipeline stage's forwards and backwards (runs with
Span events only)."""

CLOCK_NAME = "CLOCK_MONOTONIC (Python's time.monotonic_ns()) of the host that ran each rank"
"""What every event's ``t_ns`` counts, as the export's metadata names it."""

_SHOWN_VALUES = 16


@dataclass
class _Slice:
    """An interval on one rank, with the name and arguments its trace event will carry."""

    rank: int
    start_ns: int
    end_ns: int
    name: str
    cat: str
    args: dict
    phase: int | None = None
    tid: int = PHASES_TID
    async_id: int | None = None

    def __post_init__(self) -> None:
        self.end_ns = max(self.end_ns, self.start_ns)  # a damaged trace can end a call before it began

    def mid_ns(self) -> int:
        """A moment inside the slice (its middle) where a flow can bind."""
        return (self.start_ns + self.end_ns) // 2


class _Builder:
    """Accumulates trace events for one log; :meth:`document` returns the JSON object."""

    def __init__(self, events: list[AnyEvent], clock: ClockAnchor | None) -> None:
        self.events = events
        self.clock = clock
        self.t0 = min((_first_ns(e) for e in events), default=0)
        start = next((e for e in events if isinstance(e, RunStart)), None)
        ranks = {e.rank for e in events if e.rank != LAUNCHER_RANK}
        self.start = start
        self.ranks = sorted(ranks)
        """The ranks the events hold: each gets its process (a job of 10⁶ ranks whose artifacts
        describe two gets two, not 10⁶)."""
        self.world_size = start.world_size if start else 1 + max(ranks, default=0)
        self.launcher_pid = self.world_size
        self.out: list[dict] = []
        self.last_ns: dict[int, int] = {}
        for event in events:  # one pass: each emitter's last timestamp (the launcher's too)
            self.last_ns[event.rank] = max(event.t_ns, self.last_ns.get(event.rank, event.t_ns))
        self._next_id = 1

    def us(self, t_ns: int) -> float:
        """Microseconds since the log's first event (ns precision)."""
        return round((t_ns - self.t0) / 1000, 3)

    def pid(self, rank: int) -> int:
        """The trace process of ``rank`` (the launcher has its own)."""
        return self.launcher_pid if rank == LAUNCHER_RANK else rank

    def new_id(self) -> int:
        """A fresh id for an async slice or a flow."""
        self._next_id += 1
        return self._next_id - 1

    def document(self) -> dict:
        """Every part of the timeline, as one trace-event JSON object."""
        self.metadata()
        phases = self.phases()
        calls = self.collectives()
        self.flows(phases, calls)
        self.spans()
        self.counters()
        self.instants()
        body = sorted(self.out, key=lambda e: e["ts"])
        clock, base_unix_ns = self.clock_metadata()
        other = {"exporter": "collviz", "world_size": self.world_size, "clock": clock}
        if self.start is not None:
            other.update(run=self.start.run, scenario=self.start.scenario, backend=self.start.backend)
        document: dict[str, object] = {"traceEvents": self.meta + body, "displayTimeUnit": "ms", "otherData": other}
        if base_unix_ns is not None:
            document["baseTimeNanoseconds"] = base_unix_ns
        return document

    def clock_metadata(self) -> tuple[dict, int | None]:
        """What ``ts`` counts, and the Unix time of ts 0 (None where the trace cannot know it)."""
        hosts = {e.host for e in self.events if isinstance(e, (RunStart, RankStart)) and e.host}
        clock = {"t_ns": CLOCK_NAME, "ts": "µs since t_ns = ts_0_t_ns", "ts_0_t_ns": self.t0}
        if self.clock is None:
            why = "the trace has no clock anchor (recorded before collviz wrote one, or not given to the export)"
        elif hosts - {self.clock.host}:
            why = (f"ranks ran on {', '.join(sorted(hosts))} and the anchor was read on {self.clock.host}: "
                   "monotonic clocks of different hosts do not compare")
        else:
            base = self.clock.unix_ns_of(self.t0)
            clock.update(ts_0_unix_ns=base, anchor=msgspec.to_builtins(self.clock),
                         unix_time="baseTimeNanoseconds + ts µs, as in torch.profiler's traces")
            return clock, base
        clock.update(ts_0_unix_ns=None, why_no_unix_time=why)
        return clock, None

    def metadata(self) -> None:
        """Process and thread names and their order."""
        devices = {e.rank: e.device for e in self.events if isinstance(e, RankStart)}
        pipelined = {e.rank for e in self.events if isinstance(e, Span)}
        self.meta: list[dict] = []

        def add(name: str, pid: int, tid: int, args: dict) -> None:
            self.meta.append({"ph": "M", "name": name, "pid": pid, "tid": tid, "ts": 0, "args": args})

        for rank in self.ranks:
            device = f" ({devices[rank]})" if rank in devices else ""
            add("process_name", rank, PHASES_TID, {"name": f"rank {rank}{device}"})
            add("process_sort_index", rank, PHASES_TID, {"sort_index": rank})
            add("thread_name", rank, PHASES_TID, {"name": "phases"})
            add("thread_name", rank, COLLECTIVES_TID, {"name": "collectives"})
            if rank in pipelined:
                add("thread_name", rank, PIPELINE_TID, {"name": "pipeline stage"})
        add("process_name", self.launcher_pid, 0, {"name": "launcher"})
        add("process_sort_index", self.launcher_pid, 0, {"sort_index": self.launcher_pid})

    def phases(self) -> dict[tuple[int, int], _Slice]:
        """Phase slices, keyed by (rank, phase index); an unfinished phase ends at its rank's last event."""
        open_: dict[tuple[int, int], Phase] = {}
        slices: dict[tuple[int, int], _Slice] = {}
        for event in self.events:
            if not isinstance(event, Phase):
                continue
            key = (event.rank, event.index)
            if event.edge == "begin":
                open_[key] = event
            elif key in open_:
                begin = open_.pop(key)
                slices[key] = self._phase_slice(begin, event.t_ns)
        for key, begin in open_.items():
            slices[key] = self._phase_slice(begin, self.last_ns[begin.rank])
        self.lay_out(slices.values())
        return slices

    def _phase_slice(self, begin: Phase, end_ns: int) -> _Slice:
        args: dict[str, object] = {"index": begin.index}
        if begin.narration:
            args["narration"] = begin.narration
        return _Slice(begin.rank, begin.t_ns, end_ns, begin.name, "phase", args, begin.index)

    def collectives(self) -> list[_Slice]:
        """Collective call slices: complete events while they do not overlap, else async slices."""
        begins: dict[tuple, Collective] = {}
        calls: list[_Slice] = []
        for event in self.events:
            if not isinstance(event, Collective):
                continue
            key = (event.rank, event.group, event.group_seq, event.iteration)
            if event.edge == "begin":
                begins[key] = event
                continue
            begin = begins.pop(key, None)
            # a measured call is drawn exactly as long as it was measured: its begin event can be
            # emitted before the flush and barrier that precede the timed call
            if event.duration_ns is not None:
                start = event.t_ns - event.duration_ns
            else:
                start = begin.t_ns if begin is not None else event.t_ns
            calls.append(self._call_slice(event, start, event.t_ns))
        for begin in begins.values():  # entered, never left (the run failed inside it)
            calls.append(self._call_slice(begin, begin.t_ns, self.last_ns[begin.rank]))
        for call in calls:
            call.tid = COLLECTIVES_TID
        self.lay_out(calls)
        return calls

    def _call_slice(self, event: Collective, start_ns: int, end_ns: int) -> _Slice:
        args = {"group": event.group, "group_seq": event.group_seq, "iteration": event.iteration,
                "dtype": event.dtype, "count": event.count, "bytes_in": event.bytes_in,
                "bytes_out": event.bytes_out, "algo_bytes": event.algo_bytes}
        for name in ("root", "reduce_op", "duration_ns"):
            if getattr(event, name) is not None:
                args[name] = getattr(event, name)
        return _Slice(event.rank, start_ns, end_ns, event.op, "collective", args, event.phase)

    def lay_out(self, items: Iterable[_Slice]) -> None:
        """Each slice as a complete event where it follows or nests inside the ones before it on its
        track, else (it overlaps one without nesting: asynchronous calls, a damaged trace) as an async slice."""
        open_: dict[tuple[int, int], list[_Slice]] = defaultdict(list)  # per track, the slices enclosing now
        for item in sorted(items, key=lambda i: (i.rank, i.tid, i.start_ns, -i.end_ns)):
            stack = open_[(item.rank, item.tid)]
            while stack and stack[-1].end_ns <= item.start_ns:
                stack.pop()
            if stack and item.end_ns > stack[-1].end_ns:
                item.async_id = self.new_id()
                self.async_slice(item)
            else:
                stack.append(item)
                self.complete(item)

    def complete(self, item: _Slice) -> None:
        """A complete event ("X") for ``item`` on its rank's thread ``item.tid``."""
        self.out.append({"ph": "X", "name": item.name, "cat": item.cat, "pid": self.pid(item.rank), "tid": item.tid,
                         "ts": self.us(item.start_ns), "dur": round(self.us(item.end_ns) - self.us(item.start_ns), 3),
                         "args": item.args})

    def async_slice(self, item: _Slice) -> None:
        """An async slice ("b" … "e", same cat, name and id) for ``item``."""
        common = {"name": item.name, "cat": item.cat, "id": item.async_id, "pid": self.pid(item.rank), "tid": item.tid}
        self.out.append({"ph": "b", "ts": self.us(item.start_ns), "args": item.args, **common})
        self.out.append({"ph": "e", "ts": self.us(item.end_ns), **common})

    def flows(self, phases: dict[tuple[int, int], _Slice], calls: list[_Slice]) -> None:
        """One flow per Transfer, from the sender's slice in that phase to the receiver's."""
        last_call: dict[tuple[int, int], _Slice] = {}
        for call in sorted(calls, key=lambda c: c.start_ns):
            if call.async_id is None and call.phase is not None:
                last_call[(call.rank, call.phase)] = call
        complete_phases = {key: item for key, item in phases.items() if item.async_id is None}
        for transfer in (e for e in self.events if isinstance(e, Transfer)):
            src_end, dst_end = [last_call.get((r, transfer.phase)) or complete_phases.get((r, transfer.phase))
                                for r in (transfer.src, transfer.dst)]
            if src_end is None or dst_end is None:
                continue  # a rank that never reached the phase (or drew it async): nothing to bind the flow to
            flow_id = self.new_id()
            name = f"{transfer.buffer}[{transfer.start}:{transfer.start + transfer.length}]"
            args = {"src": transfer.src, "dst": transfer.dst, "bytes": transfer.bytes, "kind": transfer.kind,
                    "hop": transfer.hop}
            for ph, bound in (("s", src_end), ("f", dst_end)):
                flow = {"ph": ph, "name": name, "cat": f"transfer.{transfer.kind}", "id": flow_id, "pid": self.pid(bound.rank),
                        "tid": bound.tid, "ts": self.us(bound.mid_ns())}
                if ph == "s":
                    flow["args"] = args
                else:
                    flow["bp"] = "e"
                self.out.append(flow)

    def spans(self) -> None:
        """Each pipeline stage's forward or backward of one microbatch: a complete slice of exactly
        its measured duration (``F3``, ``B3``) on the rank's pipeline thread."""
        self.lay_out(_Slice(span.rank, span.t_ns - span.duration_ns, span.t_ns,
                            f"{'F' if span.kind == 'forward' else 'B'}{span.microbatch}", "pipeline",
                            {"microbatch": span.microbatch, "duration_ns": span.duration_ns}, span.phase, tid=PIPELINE_TID)
                     for span in self.events if isinstance(span, Span))

    def counters(self) -> None:
        """Memory counter tracks per rank (every category present in each sample, 0 when empty)."""
        samples = [e for e in self.events if isinstance(e, Memory)]
        categories: dict[int, set[str]] = defaultdict(set)
        for sample in samples:
            categories[sample.rank].update(sample.by_category)
        for sample in samples:
            ts, pid = self.us(sample.t_ns), self.pid(sample.rank)
            values = {name: sample.by_category.get(name, 0) for name in sorted(categories[sample.rank])}
            series = [("live tensor bytes", values or {"live": sample.live_bytes}),
                      ("peak tensor bytes", {"peak": sample.peak_bytes})]
            if sample.cuda is not None:
                series.append(("CUDA allocator bytes", {"allocated": sample.cuda.allocated,
                                                        "reserved": sample.cuda.reserved}))
            if sample.nvml is not None:
                series.append(("NVML device bytes", {"used": sample.nvml.used, "total": sample.nvml.total}))
            for name, args in series:
                self.out.append({"ph": "C", "name": name, "pid": pid, "tid": PHASES_TID, "ts": ts, "args": args})

    def instants(self) -> None:
        """Every other event as an instant on its rank's phases thread (the launcher's on its own)."""
        skip = (Phase, Collective, Transfer, Memory, Span)
        for event in self.events:
            if isinstance(event, skip):
                continue
            self.out.append({"ph": "i", "s": "t", "name": _instant_name(event), "cat": type(event).__name__,
                             "pid": self.pid(event.rank), "tid": PHASES_TID, "ts": self.us(event.t_ns),
                             "args": _instant_args(event)})


def _first_ns(event: AnyEvent) -> int:
    """The earliest moment ``event`` draws: a measured call or span starts its duration before it."""
    duration = event.duration_ns if isinstance(event, (Collective, Span)) else None
    return event.t_ns - max(duration or 0, 0)


def _json_safe(value: object) -> object:
    """``value`` (builtins) with non-finite floats as the strings ``nan``, ``inf``, ``-inf``: strict
    JSON has no NaN, and Perfetto's reader refuses it."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list):
        return [_json_safe(item) for item in value]
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    return value


def _instant_name(event: AnyEvent) -> str:
    if isinstance(event, Check):
        return f"{'✓' if event.ok else '✗'} {event.name}"
    if isinstance(event, Buffer):
        return f"{event.name} ({event.moment})"
    return type(event).__name__


def _instant_args(event: AnyEvent) -> dict:
    """The event's own fields (values cut to the first few), as JSON-ready builtins."""
    fields = msgspec.to_builtins(event)
    for name in ("run", "rank", "seq", "t_ns", "type"):
        fields.pop(name, None)
    values = fields.get("values")
    if isinstance(values, list) and len(values) > _SHOWN_VALUES:
        fields["values"] = values[:_SHOWN_VALUES] + [f"… {len(values) - _SHOWN_VALUES} more"]
    return {name: _json_safe(value) for name, value in fields.items()}


def perfetto_trace(events: Iterable[AnyEvent], clock: ClockAnchor | None = None) -> dict:
    """The Chrome trace-event JSON object (``{"traceEvents": [...], …}``) of a checked event log (as
    :func:`~..wire.trace.read_trace` gives it); ``clock``, the trace's anchor, puts it on Unix time."""
    return _Builder(list(events), clock).document()


def write_perfetto(events: Iterable[AnyEvent], path: str | os.PathLike[str], clock: ClockAnchor | None = None) -> int:
    """Write the export of ``events`` (``clock``: the trace's :attr:`~..wire.trace.TraceContents.clock`)
    to ``path`` (``-``: stdout); return how many trace events it holds.

    Written by :func:`~..wire.files.write_output`'s rule: a new or regular file is created 0600 and
    replaced atomically (a failed export leaves nothing behind), a device, FIFO or link is written
    through; UsageError (one line) when it cannot be written. Encoded by msgspec (UTF-8, compact).
    """
    document = perfetto_trace(events, clock)
    write_output(Path(path), [msgspec.json.encode(document)], "--perfetto")
    return len(document["traceEvents"])
