"""The headless summary: a plain-text account of a run, derived from its event log only.

The same function renders a live headless run and ``collviz replay FILE --headless``, so a trace
tells exactly what the run told.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import groupby
from operator import attrgetter
from typing import Any

from ..errors import STOPPED_BY_SIGTERM
from ..observation.fingerprints import Disagreement, disagreements
from ..observation.metrics import BUS_FACTOR_OPS, bandwidth, human_bytes
from ..wire.protocol import (
    IMPORT_RUN_PREFIX,
    NOTE_MARK,
    UNTIMED_OPTION,
    AnyEvent,
    Buffer,
    Check,
    Collective,
    Dropped,
    Memory,
    Phase,
    ProcessExit,
    ProvenanceRun,
    RankEnd,
    RankStart,
    RunEnd,
    RunStart,
    Span,
    Stall,
    Transfer,
)
from .pipeline import pipeline_lines

__all__ = ["render_summary", "head_lines", "phase_lines", "ending_lines", "untimed_reason", "format_values",
           "format_provenance", "SHOWN_CALLS", "SHOWN_BUFFERS", "SHOWN_SAMPLES", "SHOWN_TRANSFERS", "TransferDigest",
           "transfer_digest", "events_by_kind"]

_SHOWN_VALUES = 16

_size = lru_cache(maxsize=4096)(human_bytes)
"""human_bytes, remembered: a run's memory samples repeat a few sizes thousands of times."""

_UNTIMED_DEFAULT = "issued asynchronously, waited on outside the dispatcher"


def _number(value: float | int) -> str:
    return str(value) if isinstance(value, int) else f"{value:.6g}"


def format_values(buffer: Buffer) -> str:
    """The buffer's values (rows split by ``|`` for 2-D; each after its name when the elements
    are named), or its summary for large buffers."""
    if buffer.values is None:
        if buffer.summary is None:
            return "(not shown)"
        s = buffer.summary
        return f"min {_number(s.min)} max {_number(s.max)} mean {_number(s.mean)} crc32 {s.crc32}"
    raw: list[float | int] = buffer.values
    labels = buffer.labels if buffer.labels is not None and len(buffer.labels) == len(raw) else None
    if len(raw) > _SHOWN_VALUES:  # only the shown ones are formatted
        head, tail = raw[:12], raw[-3:]
        if labels is None and _floats_only(head) and _floats_only(tail):
            return f"[{_floats_format(12) % tuple(head)}, …, {_floats_format(3) % tuple(tail)}]"
        head_texts, tail_texts = _labelled(head, labels and labels[:12]), _labelled(tail, labels and labels[-3:])
        return "[" + ", ".join(head_texts + ["…"] + tail_texts) + "]"
    two_d = len(buffer.shape) == 2 and buffer.shape[1] > 0 and buffer.shape[0] > 1
    if labels is None and not two_d and _floats_only(raw):
        return f"[{_floats_format(len(raw)) % tuple(raw)}]"
    values = _labelled(raw, labels)
    if two_d:
        width = buffer.shape[1]
        rows = [", ".join(values[i : i + width]) for i in range(0, len(values), width)]
        return "[" + " | ".join(rows) + "]"
    return "[" + ", ".join(values) + "]"


def _floats_only(values: list[float | int]) -> bool:
    """Whether ``values`` are floats, and some (formatted by :func:`_floats_format`, one call for all)."""
    return set(map(type, values)) == _FLOATS_ONLY


_FLOATS_ONLY = {float}


@lru_cache(maxsize=None)
def _floats_format(count: int) -> str:
    """The %-format of ``count`` floats as :func:`_number` writes each (``%.6g`` is ``{:.6g}``),
    joined with commas."""
    return ", ".join(["%.6g"] * count)


def _labelled(values: list[float | int], labels: list[str] | None) -> list[str]:
    """``values`` as the summary prints them, each after its label where there are labels."""
    texts = [_number(v) for v in values]
    return texts if labels is None else [f"{label} {text}" for label, text in zip(labels, texts)]


def _ranks_text(ranks: Sequence[int], world_size: int) -> str:
    if not ranks:
        return "no data"
    if len(ranks) == world_size and world_size > 1:
        return "all ranks"
    return "+".join(f"r{r}" for r in ranks)


def format_provenance(provenance: list[ProvenanceRun] | None, world_size: int) -> str:
    """``from r0``, ``from all ranks``, or per element range when the buffer is mixed."""
    if provenance is None:
        return "provenance not observed"
    if not provenance:
        return "empty"
    if len(provenance) == 1:
        ranks = provenance[0].ranks
        return "from " + _ranks_text(ranks, world_size) if ranks else "placeholder (no rank's data)"
    parts = [f"[{run.start}:{run.start + run.length}] {_ranks_text(run.ranks, world_size)}" for run in provenance[:8]]
    more = f" … {len(provenance) - 8} more" if len(provenance) > 8 else ""
    return "from " + ", ".join(parts) + more


def _header(start: RunStart | None) -> list[str]:
    if start is None:
        return ["(no RunStart event: the trace is incomplete)"]
    dtype = start.options.get("dtype")
    return [
        f"collviz {start.scenario} — {start.world_size} ranks, {start.backend_reason}",
        f"inputs: {start.example}" + (f" · dtype {dtype}" if dtype else "") if start.example else "",
        f"run {start.run} · torch {start.torch_version} · "
        + (f"NCCL {start.nccl_version} · " if start.nccl_version else "")
        + ("imported from artifacts" if start.run.startswith(IMPORT_RUN_PREFIX) else f"mode {start.mode}"),
    ]


SHOWN_CALLS = 4
"""Most collective calls of one phase the summary details."""


def _collective_lines(collectives: list[Collective], world_size: int, untimed: str) -> list[str]:
    """Each timed collective call of a phase (at most :data:`SHOWN_CALLS`): every rank's time,
    S, and algbw/busbw with the factor of the call's own group size."""
    ends = [c for c in collectives if c.edge == "end" and c.duration_ns]
    if not ends:
        return _untimed_lines(collectives, untimed)
    calls: dict[tuple[str, int], list[Collective]] = defaultdict(list)
    for c in ends:
        calls[(c.group, c.group_seq)].append(c)
    lines = []
    several = len(calls) > 1
    for events in list(calls.values())[:SHOWN_CALLS]:
        per_rank: dict[int, list[int]] = defaultdict(list)
        for c in events:
            if c.duration_ns:  # always: ends holds timed calls only
                per_rank[c.rank].append(c.duration_ns)
        medians = {rank: statistics.median(times) for rank, times in sorted(per_rank.items())}
        first = events[0]
        n = len(first.group_ranks) or world_size
        iters = len(per_rank[first.rank])
        timing = ", ".join(f"r{rank} {ns / 1e6:.3f} ms" for rank, ns in medians.items())
        if several:
            lines.append(f"  {first.op} on {first.group} (ranks {', '.join(map(str, first.group_ranks))}):")
        lines.append(f"  time ({'median of ' + str(iters) + ' calls, ' if iters > 1 else ''}per rank): {timing}")
        if first.op not in BUS_FACTOR_OPS:
            lines.append(f"  ({first.op}: no nccl-tests bus factor, so no algbw/busbw)")
            continue
        bw = bandwidth(first.op, n, first.algo_bytes, max(medians.values()) / 1e9)
        lines.append(f"  t = slowest rank; S = {human_bytes(first.algo_bytes)} (nccl-tests algorithm size for {first.op})")
        lines.append(f"  {bw.formula}")
    if len(calls) > SHOWN_CALLS:
        rest = Counter(events[0].op for events in list(calls.values())[SHOWN_CALLS:])
        tally = ", ".join(f"{op} ×{count}" for op, count in rest.items())
        lines.append(f"  … {len(calls) - SHOWN_CALLS} more collective calls in this phase: {tally}")
    return lines


def _untimed_lines(collectives: list[Collective], why: str) -> list[str]:
    """Collectives whose end carries no duration (``why``: issued asynchronously inside torch's own
    code, or the run's source records no durations)."""
    calls = [c for c in collectives if c.edge == "end" and c.duration_ns is None]
    calls = [c for c in calls if c.rank == calls[0].rank] if calls else []
    if not calls:
        return []
    text = ", ".join(f"{c.op} {human_bytes(c.bytes_in)} → {human_bytes(c.bytes_out)}" for c in calls[:6])
    more = f" … {len(calls) - 6} more" if len(calls) > 6 else ""
    return [f"  collectives (r{calls[0].rank}, not timed: {why}): {text}{more}"]


def render_summary(events: Iterable[AnyEvent], transfers: Mapping[int, TransferDigest] | None = None,
                   buffers: Mapping[tuple[int, int], int] | None = None,
                   mismatches: Sequence[Disagreement] | None = None) -> str:
    """The whole summary of a run as text (one string, lines joined with newlines). ``transfers``:
    each phase's transfers digested (an indexed trace's, :mod:`.indexed`), ``events`` then holding
    none; by default they are digested from ``events``. ``buffers``: how many Buffers each (phase,
    rank) holds in all, where ``events`` hold only the first :data:`SHOWN_BUFFERS` of each (an
    indexed trace's); by default they are counted in ``events``. ``mismatches``: the calls that
    disagree, where ``events`` lack the calls' begins (an indexed trace's, whose ``events`` may
    also hold only the calls' ends the text reads: :class:`~.indexed_calls.ShownEnds`); by
    default found in ``events``."""
    events = list(events)
    of_kind = events_by_kind(events)
    start = next(iter(of_kind[RunStart]), None)
    world_size = start.world_size if start else 1 + max((e.rank for e in events), default=0)
    phases: dict[int, str] = {}
    notes: dict[int, str] = {}
    for event in of_kind[Phase]:
        if event.edge == "begin":
            phases.setdefault(event.index, event.name)
            if NOTE_MARK in event.narration:
                notes.setdefault(event.index, event.narration.split(NOTE_MARK, 1)[1])
    by_phase: defaultdict[int, defaultdict[type, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for kind in _PHASE_KINDS:  # each kind's events in runs of one phase
        for phase, run in groupby(of_kind[kind], _PHASE):
            by_phase[phase][kind].extend(run)
    durations = _phase_durations(of_kind[Phase])
    lines = head_lines(start, sorted({(e.rank, e.device) for e in of_kind[RankStart]}), of_kind[Memory])
    held_by_phase: defaultdict[int, dict[int, int]] = defaultdict(dict)
    for (phase, rank), count in (buffers or {}).items():
        held_by_phase[phase][rank] = count
    for index in sorted(phases):
        digest = None if transfers is None else transfers.get(index, _NO_TRANSFERS)
        held = None if buffers is None else held_by_phase[index]
        lines.extend(_phase_block(index, phases[index], durations.get(index), notes.get(index), by_phase[index],
                                  world_size, untimed_reason(start), digest, held))
    lines.append("")
    ending = [event for kind in _ENDING_KINDS for event in of_kind[kind]]  # each kind in log order suffices
    if mismatches is None:
        mismatches = disagreements(of_kind[Collective])  # from the calls: traces before the check
    lines.extend(ending_lines(ending, mismatches))
    return "\n".join(lines)


_ENDING_KINDS = (RankEnd, ProcessExit, Stall, Dropped, RunEnd)
"""The kinds of event :func:`ending_lines` reads."""

_PHASE_KINDS = (Buffer, Transfer, Collective, Memory, Span, Check)
"""The kinds of event a phase's block reads (each with an int ``phase``)."""

_PHASE = attrgetter("phase")


def events_by_kind(events: list[AnyEvent]) -> defaultdict[type, list[Any]]:
    """``events`` by their type, each kind's in log order (one pass, where a filter per kind made many)."""
    of_kind: defaultdict[type, list[Any]] = defaultdict(list)
    for event in events:
        of_kind[type(event)].append(event)
    return of_kind


def untimed_reason(start: RunStart | None) -> str:
    """Why a run's collectives may carry no duration, as its RunStart says (or the live runs' reason)."""
    return str(start.options.get(UNTIMED_OPTION, _UNTIMED_DEFAULT)) if start else _UNTIMED_DEFAULT


def head_lines(start: RunStart | None, devices: Sequence[tuple[int, str]], memory: list[Memory]) -> list[str]:
    """The summary's first lines: the run, its ranks' devices (rank, device), what its memory figures are."""
    lines = [line for line in _header(start) if line]
    if devices:
        lines.append("devices: " + ", ".join(f"r{rank} {device}" for rank, device in devices))
    if memory:
        lines.append(_device_figures_line(memory))
    return lines


def phase_lines(index: int, name: str, took_ns: int | None, note: str | None, events: list[AnyEvent], world_size: int,
                untimed: str, transfers: TransferDigest | None = None, buffers: Mapping[int, int] | None = None,
                ) -> list[str]:
    """One phase's block: a blank line, its name and slowest rank's time (``took_ns``, if any), a
    teacher's ``note``, then what its ``events`` show (its transfers as ``transfers`` digests
    them, when given: ``events`` then holds none; ``buffers``: how many Buffers each rank holds
    in the phase, when ``events`` hold only the first :data:`SHOWN_BUFFERS` of each)."""
    return _phase_block(index, name, took_ns, note, events_by_kind(events), world_size, untimed, transfers, buffers)


def _phase_block(index: int, name: str, took_ns: int | None, note: str | None, of_kind: Mapping[type, list[Any]],
                 world_size: int, untimed: str, transfers: TransferDigest | None, buffers: Mapping[int, int] | None,
                 ) -> list[str]:
    """:func:`phase_lines` of the phase's events filed by kind (``of_kind``, each kind's in log order)."""
    lines = ["", f"phase {index}  {name}" + (f"  ({took_ns / 1e6:.1f} ms, slowest rank)" if took_ns else "")]
    if note is not None:
        lines.append(f"  {NOTE_MARK}{note}")
    return lines + _phase_lines(of_kind, world_size, untimed, transfers, buffers)


def _phase_durations(events: list[AnyEvent]) -> dict[int, int]:
    """Phase index → its duration in ns on the slowest rank (from the Phase begin/end times)."""
    begins: dict[tuple[int, int], int] = {}
    slowest: dict[int, int] = {}
    for event in events:
        if isinstance(event, Phase):
            if event.edge == "begin":
                begins[(event.rank, event.index)] = event.t_ns
            elif (event.rank, event.index) in begins:
                took = event.t_ns - begins[(event.rank, event.index)]
                slowest[event.index] = max(slowest.get(event.index, 0), took)
    return slowest


_MEMORY_SOURCES = {
    "tracker": "exact live tensor bytes from the storage tracker",
    "watched": "the parameters, gradients and optimizer state the script named with collviz.watch (not activations)",
    "cuda allocator": "the CUDA caching allocator's allocated bytes",
}
"""What each ``Memory.source`` measures, as the summary says it."""


def _device_figures_line(memory: list[Memory]) -> str:
    """What the memory figures are (their sources), plus CUDA allocator and NVML peaks, or N/A."""
    cuda = [m.cuda for m in memory if m.cuda is not None]
    nvml = [m.nvml for m in memory if m.nvml is not None]
    cuda_text = f"CUDA allocator peak {human_bytes(max(c.max_allocated for c in cuda))}" if cuda else "CUDA allocator N/A"
    nvml_text = (f"NVML device used up to {human_bytes(max(n.used for n in nvml))} of {human_bytes(nvml[0].total)}"
                 if nvml else "NVML N/A")
    sources = "; ".join(_MEMORY_SOURCES.get(source, source) for source in dict.fromkeys(m.source for m in memory))
    return f"memory: {sources}; {cuda_text}; {nvml_text}"


SHOWN_TRANSFERS = 24
"""Most transfers of one phase the summary lists (the first in order of destination, source and start)."""


@dataclass
class TransferDigest:
    """What the summary says of one phase's transfers: how many, their bytes in all, whether any is
    point-to-point, and the first :data:`SHOWN_TRANSFERS` in order of (dst, src, start), ties in
    log order. Made from the transfers (:func:`transfer_digest`) or, for an indexed trace, from
    its columns with only the listed ones decoded."""

    count: int
    total_bytes: int
    p2p: bool
    shown: list[Transfer]


def transfer_digest(transfers: list[Transfer]) -> TransferDigest:
    """The digest of one phase's ``transfers``, in log order."""
    shown = sorted(transfers, key=lambda t: (t.dst, t.src, t.start))[:SHOWN_TRANSFERS]
    total = sum(t.bytes for t in transfers)
    return TransferDigest(len(transfers), total, any(t.kind != "logical" for t in transfers), shown)


_NO_TRANSFERS = TransferDigest(0, 0, False, [])
"""A phase without transfers."""


def _transfer_lines(digest: TransferDigest) -> list[str]:
    """The phase's transfer lines: their count and bytes, the first few, how many more."""
    if not digest.count:
        return []
    label = "point-to-point" if digest.p2p else "logical data movement, as seen from inputs and outputs"
    lines = [f"  transfers ({label}): {digest.count}, {human_bytes(digest.total_bytes)} in all"]
    for t in digest.shown:
        lines.append(f"    r{t.src} → r{t.dst}  {t.buffer}[{t.start}:{t.start + t.length}]  {human_bytes(t.bytes)}")
    if digest.count > SHOWN_TRANSFERS:
        lines.append(f"    … {digest.count - SHOWN_TRANSFERS} more")
    return lines


SHOWN_BUFFERS = 256
"""Most buffers of one rank in one phase the summary lists (in the order the rank sent them);
collviz's own scenarios stay under it (fsdp-tp holds the most: 138, its AdamW step's 69 parameter
shards before and after)."""

SHOWN_SAMPLES = 32
"""Most memory samples of one rank in one phase the summary lists (the phase's peak is said anyway)."""


def _buffer_lines(buffers: list[Buffer], world_size: int, held: Mapping[int, int] | None) -> list[str]:
    """One line per buffer (its rank, name, moment, values and provenance), at most
    :data:`SHOWN_BUFFERS` of each rank, then how many more that rank holds in the phase (``held``:
    each rank's count, where ``buffers`` are only the first of each; else counted in them)."""
    per_rank: dict[int, list[Buffer]] = defaultdict(list)
    for b in buffers:
        per_rank[b.rank].append(b)
    shown = {rank: sorted(of_rank, key=lambda b: b.seq)[:SHOWN_BUFFERS] for rank, of_rank in sorted(per_rank.items())}
    width = max((len(b.name) for listed in shown.values() for b in listed), default=0)
    provenances: dict[int, str] = {}  # by the list's identity: a trace's Buffers share equal ones (StoredEvents)
    lines = []
    for rank, listed in shown.items():
        for b in listed:
            provenance = provenances.get(id(b.provenance))
            if provenance is None:
                provenance = provenances[id(b.provenance)] = format_provenance(b.provenance, world_size)
            lines.append(f"  rank {b.rank}  {b.name:<{width}}  {b.moment:<6}  {format_values(b)}  {provenance}")
        count = len(per_rank[rank]) if held is None else held[rank]
        if count > SHOWN_BUFFERS:
            lines.append(f"  rank {rank}  … {count - SHOWN_BUFFERS} more buffers in this phase (the viewer shows each)")
    return lines


def _phase_lines(of_kind: Mapping[type, list[Any]], world_size: int, untimed: str, transfers: TransferDigest | None,
                 buffers: Mapping[int, int] | None) -> list[str]:
    lines: list[str] = []
    lines.extend(_buffer_lines(of_kind[Buffer], world_size, buffers))
    lines.extend(_transfer_lines(transfers if transfers is not None else transfer_digest(of_kind[Transfer])))
    lines.extend(_collective_lines(of_kind[Collective], world_size, untimed))
    memory: dict[int, list[Memory]] = defaultdict(list)
    for m in of_kind[Memory]:
        memory[m.rank].append(m)
    spans = of_kind[Span]
    if spans:
        lines.extend(pipeline_lines(spans, [m for samples in memory.values() for m in samples]))
    for rank in sorted(memory):
        samples = memory[rank]
        steps = "; ".join(f"{m.label}: {_size(m.live_bytes)}" for m in samples[:SHOWN_SAMPLES])
        more = f"; … {len(samples) - SHOWN_SAMPLES} more samples" if len(samples) > SHOWN_SAMPLES else ""
        lines.append(f"  memory r{rank} (live tensor bytes, {samples[-1].source}): {steps}{more}; "
                     f"peak {human_bytes(samples[-1].peak_bytes)}")
    for check in of_kind[Check]:
        lines.append(f"  {'✓' if check.ok else '✗'} r{check.rank} {check.name}{': ' + check.detail if check.detail else ''}")
    return lines


def latest_stalls(events: Iterable[AnyEvent]) -> list[Stall]:
    """Each wait's last Stall, in the order the waits were first reported (a job read live reports
    a lasting wait again at every reading, its waiting time grown)."""
    latest: dict[tuple[str, int], Stall] = {}
    for stall in (e for e in events if isinstance(e, Stall)):
        latest[stall.group, stall.group_seq] = stall
    return list(latest.values())


def ending_lines(events: list[AnyEvent], mismatches: Sequence[Disagreement]) -> list[str]:
    """The summary's last lines: ranks that failed, hangs, the calls that disagree (``mismatches``),
    dropped frames and the result, from ``events`` (those of the run's end suffice)."""
    lines = []
    for failed in (e for e in events if isinstance(e, RankEnd) and e.status == "error"):
        said = "" if failed.error == STOPPED_BY_SIGTERM else "raised: "  # its agent stopped it: it raised nothing
        lines.append(f"rank {failed.rank} {said}{failed.error}")
    for exit_ in (e for e in events if isinstance(e, ProcessExit) and e.signal):
        lines.append(f"rank {exit_.target} ended by {exit_.signal}")
    for stall in latest_stalls(events):
        lines.append(f"hang: {stall.text}")
    lines.extend(found.text for found in mismatches)
    for dropped in (e for e in events if isinstance(e, Dropped)):
        lines.append("dropped frames: " + ", ".join(f"{reason} {count}" for reason, count in dropped.counts.items()))
    end = next((e for e in events if isinstance(e, RunEnd)), None)
    if end is None:
        lines.append("run did not finish (no RunEnd event: trace cut short)")
    else:
        detail = f" — {end.detail}" if end.detail else ""
        if end.status == "ok" and mismatches:
            detail += " (but ranks called different collectives, above: the results cannot be trusted)"
        lines.append(f"result: {end.status}{detail} · {end.events} events · {end.dropped} dropped")
    return lines
