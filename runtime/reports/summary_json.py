"""The headless summary as one JSON document (``--json`` on a headless run and on ``replay``).

The same facts as :func:`~.summary.render_summary`, for a script: the run, its outcome, every
phase with its slowest-rank duration, every collective call (each rank's time, the slowest,
S, algbw and busbw where the op has an nccl-tests bus factor), every check, each rank's peak live
bytes, hangs and mismatches. Buffer values are not repeated (the trace has them).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Protocol

from ..observation.fingerprints import Disagreement, disagreements
from ..observation.metrics import BUS_FACTOR_OPS, bandwidth
from ..wire.protocol import IMPORT_RUN_PREFIX, AnyEvent, Check, Collective, Memory, Phase, RunEnd, RunStart, Stall
from .summary import events_by_kind, latest_stalls

__all__ = ["SUMMARY_FORMAT", "summary_document", "CallEnd", "call_entries", "assemble"]

SUMMARY_FORMAT = {"format": "collviz-summary", "version": 1}
"""Names the document and its version (a later version only adds keys)."""


class CallEnd(Protocol):
    """What :func:`call_entries` reads of a call's end: a Collective event, or a row of an import's table."""

    @property
    def edge(self) -> str: ...
    @property
    def rank(self) -> int: ...
    @property
    def phase(self) -> int: ...
    @property
    def op(self) -> str: ...
    @property
    def group(self) -> str: ...
    @property
    def group_ranks(self) -> list[int]: ...
    @property
    def group_seq(self) -> int: ...
    @property
    def iteration(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def bytes_in(self) -> int: ...
    @property
    def bytes_out(self) -> int: ...
    @property
    def algo_bytes(self) -> int: ...
    @property
    def duration_ns(self) -> int | None: ...
    @property
    def clock(self) -> str: ...


def call_entries(collectives: Sequence[CallEnd], world_size: int) -> list[dict]:
    """One entry per call (group, sequence number, iteration), from its ranks' end events."""
    by_call: dict[tuple[str, int, int], list[CallEnd]] = defaultdict(list)
    for event in collectives:
        if event.edge == "end":
            by_call[(event.group, event.group_seq, event.iteration)].append(event)
    calls = []
    for (group, seq, iteration), ends in by_call.items():
        first = ends[0]
        times = {e.rank: e.duration_ns / 1e9 for e in ends if e.duration_ns is not None}
        slowest = max(times.values()) if times else None
        ranks = len(first.group_ranks) or world_size
        algo_bytes = max(e.algo_bytes for e in ends)
        entry = {
            "phase": first.phase, "op": first.op, "group": group, "group_ranks": first.group_ranks, "group_seq": seq,
            "iteration": iteration, "dtype": first.dtype, "bytes_in": {e.rank: e.bytes_in for e in ends},
            "bytes_out": {e.rank: e.bytes_out for e in ends}, "algo_bytes": algo_bytes,
            "seconds": times, "slowest_seconds": slowest, "clock": first.clock or None,
        }
        if slowest and first.op in BUS_FACTOR_OPS and algo_bytes:
            rate = bandwidth(first.op, ranks, algo_bytes, slowest)
            entry.update(algbw=rate.algbw, busbw=rate.busbw)
        calls.append(entry)
    return calls


def summary_document(events: Iterable[AnyEvent], mismatches: Sequence[Disagreement] | None = None) -> dict:
    """The run described by ``events`` as a JSON-ready dict (see the module's docstring);
    ``mismatches``: the calls that disagree, where ``events`` lack the calls' begins (an indexed
    trace's: :mod:`.indexed`), found in ``events`` by default."""
    events = list(events)
    of_kind = events_by_kind(events)
    start = next(iter(of_kind[RunStart]), None)
    world_size = start.world_size if start else 1 + max((e.rank for e in events), default=0)
    begins: dict[tuple[int, int], int] = {}
    phases: dict[int, dict] = {}
    for event in of_kind[Phase]:
        phase = phases.setdefault(event.index, {"index": event.index, "name": event.name, "key": event.key,
                                                "slowest_seconds": None})
        if event.edge == "begin":
            begins[(event.rank, event.index)] = event.t_ns
        elif (event.rank, event.index) in begins:
            took = (event.t_ns - begins[(event.rank, event.index)]) / 1e9
            phase["slowest_seconds"] = max(phase["slowest_seconds"] or 0.0, took)
    peaks: dict[int, int] = {}
    for memory in of_kind[Memory]:
        peaks[memory.rank] = max(peaks.get(memory.rank, 0), memory.peak_bytes)
    return assemble(
        start, next(iter(of_kind[RunEnd]), None), [phases[index] for index in sorted(phases)],
        call_entries(of_kind[Collective], world_size),
        [{"phase": c.phase, "rank": c.rank, "name": c.name, "ok": c.ok, "detail": c.detail} for c in of_kind[Check]],
        peaks, [stall.text for stall in latest_stalls(of_kind[Stall])],
        [found.text for found in (disagreements(of_kind[Collective]) if mismatches is None else mismatches)])


def _run_entry(start: RunStart | None) -> dict | None:
    """The document's ``run``: what the RunStart says."""
    return None if start is None else {
        "run": start.run, "scenario": start.scenario, "world_size": start.world_size, "backend": start.backend,
        "device_kind": start.device_kind, "banner": start.backend_reason,
        "mode": "imported" if start.run.startswith(IMPORT_RUN_PREFIX) else start.mode,
        "inputs": start.example, "torch": start.torch_version, "options": start.options,
    }


def assemble(start: RunStart | None, end: RunEnd | None, phases: list[dict], calls: list[dict], checks: list[dict],
             peaks: dict[int, int], hangs: list[str], mismatches: list[str]) -> dict:
    """The document from its parts (see the module's docstring)."""
    return {
        **SUMMARY_FORMAT,
        "run": _run_entry(start),
        "outcome": None if end is None else {"status": end.status, "detail": end.detail, "events": end.events,
                                             "dropped": end.dropped},
        "phases": phases,
        "calls": calls,
        "checks": checks,
        "peak_live_bytes": peaks,
        "hangs": hangs,
        "mismatches": mismatches,
    }
