"""Perfetto export of damaged and odd traces: whatever events a trace holds, the export is strict
JSON that passes the Trace Event Format's structural check, never a traceback.

Event lists are drawn with hypothesis from the protocol's own structs (every event type, every
field of its declared type): ranks around the world's edge and the launcher's, colliding phase
indices and call numbers, begins without ends, NaN and infinite floats, 64-bit extremes. They go
through what reading a trace does to any event list (``checked_events``: events of ranks outside
the world dropped, an impossible world size refused) before the export, as in ``collviz export``;
sequence numbers are renumbered per rank, since repeats are only dropped there.
"""

from __future__ import annotations

import json
from collections import Counter

import msgspec
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from msgspec import inspect as types

from collviz.runtime.reports.export import perfetto_trace
from collviz.runtime.wire.protocol import AnyEvent, Collective, Phase, ProtocolError, RunStart
from collviz.runtime.wire.sanity import checked_events

from support.hypothesis_profiles import examples
from support.traces import check_trace_events


INT64 = st.integers(-(2**63), 2**63 - 1)
SMALL = st.integers(-2, 5)
"""Ranks, phases, sequence numbers, times: small, so that they collide and overlap."""
WORDS = st.sampled_from(["", "x", "world", "all_reduce", "output", "params"]) | st.text(max_size=4)


def values_of(kind: types.Type) -> st.SearchStrategy:
    """Any value of the inspected msgspec type ``kind``."""
    if isinstance(kind, types.Metadata):
        return values_of(kind.type)
    if isinstance(kind, types.IntType):
        return st.one_of(SMALL, SMALL, SMALL, INT64)
    if isinstance(kind, types.FloatType):
        return st.floats()
    if isinstance(kind, types.StrType):
        return WORDS
    if isinstance(kind, types.BoolType):
        return st.booleans()
    if isinstance(kind, types.NoneType):
        return st.none()
    if isinstance(kind, types.LiteralType):
        return st.sampled_from(kind.values)
    if isinstance(kind, types.ListType):
        return st.lists(values_of(kind.item_type), max_size=4)
    if isinstance(kind, types.DictType):
        return st.dictionaries(values_of(kind.key_type), values_of(kind.value_type), max_size=3)
    if isinstance(kind, types.UnionType):
        return st.one_of([values_of(member) for member in kind.types])
    if isinstance(kind, types.StructType):
        return st.builds(kind.cls, **{f.name: values_of(f.type) for f in kind.fields})
    raise AssertionError(f"no strategy for {kind}")


EVENTS = st.lists(values_of(types.type_info(AnyEvent)), max_size=25)


def as_read(events: list[AnyEvent]) -> list[AnyEvent]:
    """``events`` as reading a trace of them gives them to the export (seq renumbered per rank)."""
    seen: Counter[int] = Counter()
    numbered = []
    for event in events:
        numbered.append(msgspec.structs.replace(event, seq=seen[event.rank]))
        seen[event.rank] += 1
    try:
        return checked_events(numbered)[0]
    except ProtocolError:  # an impossible world size: the trace is refused before any export
        assume(False)


@settings(max_examples=examples(250), suppress_health_check=[HealthCheck.too_slow])
@given(events=EVENTS)
def test_any_event_list_exports_to_valid_strict_json(events):
    document = perfetto_trace(as_read(events))
    text = json.dumps(document, allow_nan=False)  # Perfetto's JSON reader refuses NaN and Infinity
    assert check_trace_events(json.loads(text)) == []


def test_a_collective_of_a_rank_with_no_other_event_exports():
    """The KeyError of issue 23: a call entered and never left, by an emitter (here the launcher's
    rank) that has no other event to end it at."""
    start = RunStart(run="r", rank=-1, seq=0, t_ns=0, scenario="s", world_size=2, backend="gloo", device_kind="cpu",
                     backend_reason="", mode="live")
    call = Collective(run="r", rank=-1, seq=1, t_ns=5_000, phase=0, edge="begin", op="all_reduce", group="world",
                      group_ranks=[0, 1], group_seq=0, dtype="float32", count=1, bytes_in=4, bytes_out=4, algo_bytes=4)
    phase = Phase(run="r", rank=1, seq=0, t_ns=1_000, index=0, name="p", edge="begin")
    document = perfetto_trace([start, call, phase])
    assert check_trace_events(document) == []
    [slice_] = [e for e in document["traceEvents"] if e.get("cat") == "collective"]
    assert (slice_["pid"], slice_["ts"], slice_["dur"]) == (2, 5.0, 0.0)  # the launcher's process; nothing after it
