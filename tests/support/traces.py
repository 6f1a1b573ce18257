"""Trace checks the tests share: the Trace Event Format's structural rules, and an event type from a
later collviz.

The checker is written from the Trace Event Format document (the "JSON Object Format" with
``traceEvents``), not from the exporter: every event has ``ph``, ``ts``, ``pid`` and ``tid``;
complete events ("X") carry ``dur`` and, on one (pid, tid) track, either do not overlap or nest
properly; async slices ("b"/"e") pair by (cat, id, name); flow events ("s"/"f") pair by (cat, id)
and each binds to a slice enclosing its timestamp on its own track; counters ("C") carry numbers.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from collviz.runtime.wire.protocol import Event

PHASES_WITH_NAME = {"X", "B", "E", "i", "I", "C", "b", "e", "n", "s", "t", "f", "M"}


METADATA_NAMES = {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}


def _ns(value: float) -> int:
    """A trace timestamp (µs) as integer ns, so nesting is judged without float noise."""
    return round(value * 1000)


def check_trace_events(document: dict) -> list[str]:
    """Every way ``document`` breaks the Trace Event Format's structural rules, as sentences."""
    problems: list[str] = []
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        return ["no traceEvents list"]
    slices: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    asyncs: dict[tuple, list[dict]] = defaultdict(list)
    flows: dict[tuple, list[dict]] = defaultdict(list)
    for i, event in enumerate(events):
        where = f"event {i} ({event.get('ph')!r} {event.get('name')!r})"
        for key in ("ph", "ts", "pid", "tid"):
            if key not in event:
                problems.append(f"{where}: missing {key}")
        if any(key not in event for key in ("ph", "ts", "pid", "tid")):
            continue
        ph = event["ph"]
        if ph not in PHASES_WITH_NAME:
            problems.append(f"{where}: unknown phase type")
        if not isinstance(event["ts"], (int, float)) or isinstance(event["ts"], bool) or event["ts"] < 0:
            problems.append(f"{where}: ts is not a non-negative number")
        if not isinstance(event["pid"], int) or not isinstance(event["tid"], int):
            problems.append(f"{where}: pid/tid are not integers")
        if not isinstance(event.get("name"), str):
            problems.append(f"{where}: no name")
        track = (event["pid"], event["tid"])
        if ph == "X":
            if not isinstance(event.get("dur"), (int, float)) or event["dur"] < 0:
                problems.append(f"{where}: complete event without a non-negative dur")
            else:
                slices[track].append((_ns(event["ts"]), _ns(event["ts"] + event["dur"])))
        elif ph == "C":
            args = event.get("args")
            if not isinstance(args, dict) or not args or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in args.values()
            ):
                problems.append(f"{where}: counter args are not all numbers")
        elif ph in ("b", "e"):
            if "id" not in event or "cat" not in event:
                problems.append(f"{where}: async event without id and cat")
            asyncs[(event.get("cat"), event.get("id"), event["name"])].append(event)
        elif ph in ("s", "t", "f"):
            if "id" not in event or "cat" not in event:
                problems.append(f"{where}: flow event without id and cat")
            flows[(event.get("cat"), event.get("id"))].append(event)
        elif ph == "M":
            if event["name"] not in METADATA_NAMES or not isinstance(event.get("args"), dict):
                problems.append(f"{where}: unknown metadata or no args")
        elif ph in ("i", "I") and event.get("s", "t") not in ("g", "p", "t"):
            problems.append(f"{where}: instant scope must be g, p or t")
    problems += _nesting_problems(slices)
    problems += _async_problems(asyncs)
    problems += _flow_problems(flows, slices)
    return problems


def _nesting_problems(slices: dict[tuple, list[tuple[int, int]]]) -> list[str]:
    """Complete events on one track must be disjoint or nested (a child inside its parent)."""
    problems = []
    for track, intervals in slices.items():
        stack: list[tuple[int, int]] = []
        for start, end in sorted(intervals, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack and end > stack[-1][1]:
                problems.append(f"track {track}: [{start}, {end}] ns overlaps [{stack[-1][0]}, {stack[-1][1]}] without nesting")
            stack.append((start, end))
    return problems


def _async_problems(asyncs: dict[tuple, list[dict]]) -> list[str]:
    problems = []
    for key, events in asyncs.items():
        kinds = Counter(e["ph"] for e in events)
        if kinds["b"] != kinds["e"]:
            problems.append(f"async {key}: {kinds['b']} begins, {kinds['e']} ends")
        begins = sorted(e["ts"] for e in events if e["ph"] == "b")
        ends = sorted(e["ts"] for e in events if e["ph"] == "e")
        if any(end < begin for begin, end in zip(begins, ends)):
            problems.append(f"async {key}: ends before it begins")
    return problems


def _flow_problems(flows: dict[tuple, list[dict]], slices: dict[tuple, list[tuple[int, int]]]) -> list[str]:
    """Each flow id has one start and one finish, each bound to a slice enclosing it on its track."""
    problems = []
    for key, events in flows.items():
        kinds = Counter(e["ph"] for e in events)
        if kinds["s"] != 1 or kinds["f"] != 1:
            problems.append(f"flow {key}: {kinds['s']} starts and {kinds['f']} finishes (need one each)")
        for event in events:
            t = _ns(event["ts"])
            if not any(start <= t <= end for start, end in slices.get((event["pid"], event["tid"]), [])):
                problems.append(f"flow {key} {event['ph']}: no slice encloses ts {event['ts']} on track "
                                f"({event['pid']}, {event['tid']})")
    return problems



class FutureEvent(Event):
    """Stands for an event type a later 1.x collviz adds (this collviz's decoder does not know it)."""

    detail: str = ""

