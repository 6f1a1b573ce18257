"""The part of each rank's Flight Recorder that a reading needs: the calls past the last one every
rank has completed, decoded; the rest (up to 2,000 calls per rank by default, ~937 KB of JSON)
only skimmed.

torch 2.13's worker server cannot send less: its ``fr_trace_json`` handler ignores every query
parameter and always dumps the whole buffer (gloo never marks a call completed, so torch's own
"only active" filter keeps all of it). What attach controls is how much of each answer it decodes
and analyses: each entry is kept as raw bytes, only the fields that place it (group, sequence
number, retired) are decoded (msgspec, typed: ~10× faster than decoding whole entries), and only
the entries from the last call every rank of a group has completed onwards are decoded in full
and handed to the Flight Recorder reader. Those hold everything a snapshot says (each rank's last
completed call, the call it is in, who waits on whom); calls every rank finished were read in an
earlier reading, and are not read again. A reader that shows every call (the live viewer) starts
each tail where the reading before found the floor instead (``floors``), so each call is decoded
in full in the reading that first finds it completed on every rank, and in few others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import msgspec

__all__ = ["MAX_ENTRY_BYTES", "EntryPlace", "Floors", "Place", "Trace", "at_or_after", "decode_trace", "entry_key", "place_of",
           "retired_floors", "tail_content"]

MAX_ENTRY_BYTES = 64 << 10
"""The largest entry a trace may hold (a call's entry is a few hundred bytes, a few KB with its
stack frames): an answer with a larger one (a size of 10⁶ dimensions) is refused in one line
rather than decoded and multiplied out."""

EntryPlace = tuple[str, str, bool, int]
"""(group, backend, point-to-point, sequence number): where an entry stands in its group's order."""

Floors = dict[tuple[str, str, bool], int]
"""(group, backend, point-to-point) → a call's sequence number on that group: where a tail starts
(a group made with ``"cpu:gloo,cuda:nccl"`` numbers each backend's calls on its own)."""


class Place(msgspec.Struct):
    """The fields of one entry that place it: its group, the name its backend gives the call
    (``nccl:all_reduce``), sequence numbers, whether it retired and when it was made."""

    collective_seq_id: int = 0
    p2p_seq_id: int = 0
    is_p2p: bool = False
    retired: bool = False
    process_group: list[str] = []
    profiling_name: str = ""
    time_created_ns: int = 0


class _Top(msgspec.Struct):
    """A Flight Recorder trace with its entries left undecoded."""

    entries: list[msgspec.Raw] = []
    version: str | float | int = ""
    pg_config: dict | None = None
    pg_status: dict | None = None


_TOP = msgspec.json.Decoder(_Top)
_PLACE = msgspec.json.Decoder(Place)


@dataclass(frozen=True)
class Trace:
    """One recorder's answer: its header fields, each entry's raw JSON, its place (None where
    the entry's fields are not the usual ones: such an entry is always kept) and the place's
    :func:`entry_key` (None there too), worked out once."""

    version: str | float | int
    pg_config: dict
    pg_status: dict
    entries: list[msgspec.Raw]
    places: list[Place | None]
    keys: list[EntryPlace | None]


def place_of(raw: msgspec.Raw | bytes) -> Place | None:
    """The fields that place an entry (None where they are not the usual ones)."""
    try:
        return _PLACE.decode(raw)
    except (msgspec.DecodeError, RecursionError):  # a field of another type (an older torch): decoded in full, never dropped
        return None


def _entries(raws: list[msgspec.Raw]) -> list:
    """Entries decoded in full, in one decoding (a rank's dozen: one call, not one each); where one
    is nested too deeply for a call's, each on its own, that one kept as nothing the Flight Recorder
    reader takes for a call (it says so in a warning)."""
    try:
        return msgspec.json.decode(b"[" + b",".join(raws) + b"]")
    except RecursionError:
        return [_entry(raw) for raw in raws]


def _entry(raw: msgspec.Raw) -> object:
    """One entry decoded in full, or a string where it is nested too deeply (see :func:`_entries`)."""
    try:
        return msgspec.json.decode(raw)
    except RecursionError:
        return "an entry nested too deeply"


def decode_trace(body: bytes, since_ns: int = 0) -> Trace | str:
    """A recorder's answer skimmed, without the calls made before ``since_ns`` (ns since the
    epoch), or why it is not a Flight Recorder trace (one line)."""
    try:
        top = _TOP.decode(body)
    except msgspec.ValidationError as exc:
        return f"not a Flight Recorder trace ({exc})"
    except msgspec.DecodeError as exc:
        return f"not JSON ({exc})"
    except RecursionError:
        return "nested deeper than any Flight Recorder trace: not read"
    if top.pg_config is None and top.pg_status is None:
        return "not a Flight Recorder trace (no pg_config or pg_status)"
    largest = max(map(len, top.entries), default=0)
    if largest > MAX_ENTRY_BYTES:
        return f"not a Flight Recorder trace (an entry of {largest:,} bytes, over {MAX_ENTRY_BYTES:,})"
    kept = [(raw, place) for raw in top.entries
            if (place := place_of(raw)) is None or place.time_created_ns >= since_ns]
    places = [place for _, place in kept]
    return Trace(top.version, top.pg_config or {}, top.pg_status or {}, [raw for raw, _ in kept], places,
                 [entry_key(place) if place is not None else None for place in places])


def entry_key(place: Place) -> EntryPlace:
    """Where the entry stands in its group's order (:data:`EntryPlace`)."""
    group = place.process_group[0] if place.process_group else ""
    backend = place.profiling_name.split(":", 1)[0] if ":" in place.profiling_name else ""
    return group, backend, place.is_p2p, place.p2p_seq_id if place.is_p2p else place.collective_seq_id


def retired_floors(traces: Mapping[int, Sequence[Trace]]) -> Floors:
    """(group, backend, point-to-point) → the latest call every rank holding calls of it has
    retired (0 where one of them retired none)."""
    latest: dict[tuple[str, str, bool], list[int]] = {}
    for rank_traces in traces.values():
        mine: dict[tuple[str, str, bool], int] = {}
        for trace in rank_traces:
            for place, entry in zip(trace.places, trace.keys):
                if entry is not None and place is not None:
                    group, backend, p2p, seq = entry
                    key = (group, backend, p2p)
                    mine[key] = max(mine.get(key, 0), seq if place.retired else 0)
        for key, seq in mine.items():
            latest.setdefault(key, []).append(seq)
    return {key: min(seqs) for key, seqs in latest.items()}


def tail_content(traces: Mapping[int, Sequence[Trace]], floors: Floors | None = None) -> dict[int, dict]:
    """rank → one Flight Recorder dump (every recorder's trace merged, their entries in the order
    the rank made them: ``time_created_ns``) holding only the entries from ``floors`` onwards in
    each group (default: from the latest call all ranks completed, :func:`retired_floors`), and
    those not retired."""
    floors = retired_floors(traces) if floors is None else floors
    contents = {}
    for rank, rank_traces in traces.items():
        content: dict = {"version": rank_traces[0].version, "entries": [], "pg_config": {}, "pg_status": {}}
        kept: list[tuple[int, msgspec.Raw]] = []
        for trace in rank_traces:
            content["pg_config"].update(trace.pg_config)
            content["pg_status"].update(trace.pg_status)
            kept += [(place.time_created_ns if place is not None else 0, raw)
                     for raw, place, key in zip(trace.entries, trace.places, trace.keys)
                     if place is None or key is None or not place.retired or at_or_after(key, floors)]
        if len(rank_traces) > 1:
            kept.sort(key=lambda made: made[0])
        content["entries"] = _entries([raw for _, raw in kept])
        contents[rank] = content
    return contents


def at_or_after(key: EntryPlace, floors: Floors) -> bool:
    """Whether the entry whose :func:`entry_key` is ``key`` lies at or after its group's floor."""
    group, backend, p2p, seq = key
    return seq >= floors.get((group, backend, p2p), 0)
