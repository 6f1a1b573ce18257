"""NCCL Inspector records as NCCL writes them, read from a file's text: every layout and spelling.

NCCL's Inspector plugin (NVIDIA/nccl ``plugins/profiler/inspector/inspector_json.cc`` at
5067397c2676d5aed50042fc39e5c8ee96eb0027, NCCL 2.30; ``ext-profiler/inspector`` before 2.29)
writes JSON objects, read here in each of the shapes they take:

- **One object a line** (``jsonNewline`` after each), the default: ``header`` {``id``,
  ``comm_name`` (2.30), ``rank``, ``n_ranks``, ``nnodes``}, ``metadata`` {…, ``dump_timestamp_us``}
  and one performance section. A file read while the job runs may end in a cut line.
- **Pretty-printed**: the same objects over several lines each (a record copied from a report, or
  a file passed through ``jq``); read as a stream of JSON values.
- **``dump_stats`` markers** (NVIDIA/nccl ``inspector_json.cc`` at
  35d819ecb45192e89576c6b8e4c714192dd61af6, format v4.2, the change pull request #2304 describes):
  once per communicator and dump, a record of counts before that dump's records (which still carry
  their own header).
- **Layout v4.3** (NVIDIA/nccl pull request #2359, not in a release yet; a later writer seen in the
  library's index prints version ``v4.4``): header and metadata written once, in a communicator's
  ``dump_stats`` marker {``coll_records``, ``coll_dropped_total``, ``coll_dropped_since_last_dump``,
  ``p2p_records``, ``p2p_dropped_total``, ``p2p_dropped_since_last_dump``, and ``proxy_…`` counts
  when proxy tracing is on}, followed by payload objects that hold only their section (``coll_perf``, then
  ``p2p_perf``, then ``proxy_trace``); each payload takes the last marker's header. Records NCCL
  dropped (its ring overwrote them before a dump) are warned: what is shown is a sample.
- **Sections**: ``coll_perf`` {``coll`` (``AllReduce`` …), ``coll_sn``, ``coll_msg_size_bytes``,
  ``coll_exec_time_us``, ``coll_timing_source``, ``coll_algobw_gbs``, ``coll_busbw_gbs``, and
  with ``NCCL_INSPECTOR_DUMP_VERBOSE=1`` ``event_trace_ts`` with per-channel ``kernel_events``};
  NCCL 2.30's ``p2p_perf`` (written by default: ``NCCL_INSPECTOR_ENABLE_P2P=1``) {``p2p`` (``Send``,
  ``Recv``), ``p2p_sn``, ``p2p_peer`` (the other rank, in the communicator), ``p2p_msg_size_bytes``,
  ``p2p_exec_time_us``, ``p2p_timing_source``, ``p2p_algobw_gbs``, ``p2p_busbw_gbs``}. A number is
  read as an integer or a float, as a real record copied into DataDog/datadog-agent's tests writes
  it (``"coll_exec_time_us":5663.0``; issue #41 quotes only the ``5663.0``): a count, rank or size
  must be a whole number; a time may hold a fraction of a µs. A field is also read without its
  section's prefix (``exec_time_us``) — no writer known here prints that; the tolerance is kept.
  NCCL's ``proxy_trace`` payloads (proxy tracing, on request) are counted and said not drawn.

Values that cannot be (sizes beyond any device, ranks ≥ ``n_ranks``, non-finite bandwidths) make a
record damaged, with the first reason (:mod:`.plausible`). Reading is linear in the text: each
value is decoded once, and a stretch that is not JSON (a 100 MB line without a newline) is skipped
to its line's end.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

import msgspec

from .names import op_name
from .plausible import MAX_DURATION_NS, MAX_RANKS, bytes_ok, rank_ok

__all__ = ["BROKEN", "SECTIONS", "UNDRAWN", "DROPPED", "Record", "Header", "Marker", "Undrawn", "is_inspector_record",
           "is_inspector_log", "classify", "decode_line", "dropped_warning", "undrawn_warning", "values_of",
           "records_of"]

BROKEN = "broken JSON"
"""Why a stretch of text is refused when it is not JSON (a cut last line, or garbage)."""
SECTIONS = {"coll_perf": "coll", "p2p_perf": "p2p"}
"""Each performance section collviz reads, and its fields' prefix."""
UNDRAWN = ("proxy_trace",)
"""Sections NCCL writes that collviz counts but does not draw (proxy tracing's per-step records)."""
DROPPED = {"coll": "collective", "p2p": "point-to-point"}
"""Each ``dump_stats`` count of dropped records collviz reports (``<kind>_dropped_since_last_dump``),
and what its records are."""
_SNIFF_VALUES = 5
_MAX_SN = 1 << 48
"""More calls than one communicator makes: 2⁴⁸ at a million calls a second is nine years."""
_MAX_EXEC_US = MAX_DURATION_NS / 1000


def _section(value: dict) -> str | None:
    """The performance section ``value`` holds (``coll_perf``, ``p2p_perf``), or None."""
    return next((key for key in SECTIONS if isinstance(value.get(key), dict)), None)


def is_inspector_record(value: object) -> bool:
    """Whether ``value`` (one decoded JSON object) is an NCCL Inspector record, or a v4.3 layout's
    ``dump_stats`` marker."""
    return (isinstance(value, dict) and isinstance(value.get("header"), dict)
            and (_section(value) is not None or "dump_stats" in value))


def values_of(text: str) -> Iterator[tuple[int, object]]:
    """Each JSON value of ``text`` with the line it starts on: one a line, or pretty-printed over
    several (a line that is only ``{`` opens one); :data:`BROKEN` for a line that is neither."""
    decoder = json.JSONDecoder()
    pos, line_no, size = 0, 1, len(text)
    while pos < size:
        end = text.find("\n", pos)
        end = size if end < 0 else end
        line = text[pos:end]
        start = pos + len(line) - len(line.lstrip())
        if start < end:
            try:
                yield line_no, msgspec.json.decode(line)
            except (msgspec.DecodeError, RecursionError, ValueError):
                try:
                    if line.strip() != "{":
                        raise ValueError(BROKEN)
                    value, stop = decoder.raw_decode(text, start)
                except (ValueError, RecursionError):
                    yield line_no, BROKEN
                else:
                    yield line_no, value
                    line_no += text.count("\n", pos, stop)
                    pos = stop
                    continue
        line_no += 1
        pos = end + 1


def is_inspector_log(text: str) -> bool:
    """Whether ``text`` is NCCL Inspector output: one of its first values is a record."""
    for n, (_, value) in enumerate(values_of(text)):
        if is_inspector_record(value):
            return True
        if n + 1 >= _SNIFF_VALUES:
            return False
    return False


@dataclass(frozen=True)
class Header:
    """A communicator rank as a record's ``header`` names it (and its dump's time)."""

    comm: str
    name: str
    """``comm_name`` (NCCL 2.30), '' where absent or ``unknown``."""
    rank: int
    nranks: int
    dump_us: int


@dataclass(frozen=True)
class Record:
    """One record, checked: what NCCL wrote of one call on one communicator rank. ``peer`` is a
    send's or receive's other rank (in the communicator); None for a collective."""

    file: Path
    comm: str
    rank: int
    nranks: int
    op: str
    sn: int
    size: int
    exec_us: float
    timing: str
    algbw: float | None
    busbw: float | None
    start_us: int | None
    """The first channel's kernel start (verbose files), else the call's start, else None."""
    dump_us: int
    channels: int
    peer: int | None = None
    name: str = ""


def _whole(value: object, low: int = 0, high: int = 1 << 63) -> int | None:
    """``value`` as a whole number in [low, high) — an integer, or a float with no fraction — else None."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and low <= value < high else None


def _number(value: object, high: float = math.inf) -> float | None:
    """A finite number ≥ 0 and below ``high`` NCCL wrote, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and 0 <= value < high else None


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _header(value: dict) -> Header | str:
    """The checked header and metadata of ``value``, or why they cannot be."""
    header, meta = _dict(value.get("header")), _dict(value.get("metadata"))
    nranks = _whole(header.get("n_ranks"), 1, MAX_RANKS + 1)
    rank = _whole(header.get("rank"))
    if nranks is None or rank is None or not rank_ok(rank, nranks):
        return "a rank or n_ranks that cannot be"
    comm = header.get("id")
    if not isinstance(comm, str) or not comm:
        return "no communicator id"
    name = header.get("comm_name")
    return Header(comm, name if isinstance(name, str) and name != "unknown" else "", rank, nranks,
                  _whole(meta.get("dump_timestamp_us")) or 0)


def _record(path: Path, header: Header, kind: str, perf: dict) -> Record | str:
    """The checked record of section ``kind`` (``coll_perf``…) under ``header``, or why it is damaged."""
    prefix = SECTIONS[kind]

    def field(name: str) -> object:
        return perf.get(f"{prefix}_{name}", perf.get(name))

    operation = perf.get(prefix)
    if not isinstance(operation, str):
        return "no operation"
    sn, size = _whole(field("sn"), 0, _MAX_SN), _whole(field("msg_size_bytes"))
    if sn is None or size is None or not bytes_ok(size):
        return "a call number or size that cannot be"
    exec_us = _number(field("exec_time_us"), _MAX_EXEC_US)
    if exec_us is None:
        return "an execution time that cannot be"
    peer = None
    if prefix == "p2p":
        peer = _whole(field("peer"))
        if peer is None or not rank_ok(peer, header.nranks):
            return "a peer that cannot be"
    trace = _dict(field("event_trace_ts"))
    kernels = [k for k in trace.get("kernel_events", []) if isinstance(k, dict)] \
        if isinstance(trace.get("kernel_events"), list) else []
    starts = [t for k in kernels if (t := _whole(k.get("kernel_start_ts"))) is not None]
    start = min(starts) if starts else _whole(trace.get(f"{prefix}_start_ts"))  # the kernel's, as its time is
    return Record(path, header.comm, header.rank, header.nranks, op_name(operation), sn, size, exec_us,
                  str(field("timing_source") or "not recorded"), _number(field("algobw_gbs")),
                  _number(field("busbw_gbs")), start, header.dump_us, len(kernels), peer, header.name)


@dataclass(frozen=True)
class Marker:
    """A ``dump_stats`` marker: its header (the header of the v4.3 payloads after it), or why it
    cannot be one, and how many records of each kind of :data:`DROPPED` NCCL dropped since its last
    dump (its ring overwrote them before they were written)."""

    header: Header | str
    dropped: dict[str, int]


@dataclass(frozen=True)
class Undrawn:
    """A record of a section NCCL writes that collviz counts but does not draw (:data:`UNDRAWN`)."""

    section: str


def dropped_warning(name: str, kind: str, n: int) -> str:
    """What is said of ``n`` records of ``kind`` (``coll``, ``p2p``) NCCL dropped in file ``name``."""
    return (f"{name}: {n} {DROPPED[kind]} record{'s' if n > 1 else ''} dropped since the last dump (NCCL's "
            "dump_stats: its ring overwrote them): the calls shown are a sample")


def undrawn_warning(name: str, section: str, n: int) -> str:
    """What is said of ``n`` records of an undrawn ``section`` in file ``name``."""
    return f"{name}: {n} {section} record{'s' if n > 1 else ''} (NCCL's proxy tracing): not drawn"


def classify(path: Path, value: object, header: Header | None) -> Record | Marker | Undrawn | str:
    """One decoded value of ``path`` read: a checked record (a v4.3 payload takes ``header``, its
    marker's), a ``dump_stats`` marker, a record of an undrawn section, or why it is damaged
    (:data:`BROKEN`: not JSON)."""
    if value == BROKEN:
        return BROKEN
    if _is_marker(value):
        stats = _dict(value["dump_stats"])
        return Marker(_header(value), {kind: _whole(stats.get(f"{kind}_dropped_since_last_dump")) or 0
                                       for kind in DROPPED})
    section = next((key for key in UNDRAWN if isinstance(value, dict) and key in value), None)
    if section is not None:
        return Undrawn(section)
    return _checked(path, value, header)


def decode_line(path: Path, line: str, header: Header | None = None) -> Record | Marker | Undrawn | str:
    """One line of ``path`` read as :func:`classify` reads a value."""
    try:
        value = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError, ValueError):
        return BROKEN
    return classify(path, value, header)


def _is_marker(value: object) -> TypeGuard[dict]:
    """Whether ``value`` is a ``dump_stats`` marker (in layout v4.3, the header of the payloads after it)."""
    return isinstance(value, dict) and "dump_stats" in value and _section(value) is None


def _checked(path: Path, value: object, header: Header | None) -> Record | str:
    if not isinstance(value, dict):
        return "not an Inspector record"
    kind = _section(value)
    if kind is None:
        other = sorted(key for key in value if key.endswith("_perf"))
        return f"a {other[0]} section (not drawn)" if other else "not an Inspector record"
    own = _header(value) if "header" in value else header
    if own is None:
        return "no header (and no dump_stats marker before it)"
    return own if isinstance(own, str) else _record(path, own, kind, value[kind])


def records_of(path: Path, text: str, warnings: list[str]) -> list[Record]:
    """Every record of one file, in any layout; a cut last value (the file still being written) and
    damaged ones are warned and left out, counted by why; records NCCL dropped and undrawn ones
    are warned."""
    records: list[Record] = []
    damaged: dict[str, int] = {}
    undrawn: dict[str, int] = {}
    dropped = dict.fromkeys(DROPPED, 0)
    header: Header | None = None
    last = text.rstrip().count("\n") + 1
    for line_no, value in values_of(text):
        found = classify(path, value, header)
        if isinstance(found, Marker):
            header = found.header if isinstance(found.header, Header) else None
            if isinstance(found.header, str):
                damaged[found.header] = damaged.get(found.header, 0) + 1
            for kind, n in found.dropped.items():
                dropped[kind] += n
        elif isinstance(found, Undrawn):
            undrawn[found.section] = undrawn.get(found.section, 0) + 1
        elif found == BROKEN and line_no == last:
            warnings.append(f"{path.name}: its last line is cut short (the file was being written): left out")
        elif isinstance(found, str):
            damaged[found] = damaged.get(found, 0) + 1
        else:
            records.append(found)
    for why, n in sorted(damaged.items()):
        warnings.append(f"{path.name}: {n} line{'s' if n > 1 else ''} with {why}: damaged input, left out")
    warnings += [dropped_warning(path.name, kind, n) for kind, n in dropped.items() if n]
    warnings += [undrawn_warning(path.name, section, n) for section, n in sorted(undrawn.items())]
    return records
