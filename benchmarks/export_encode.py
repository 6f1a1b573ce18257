"""Encoding a Perfetto export of 500,000 trace events: stdlib ``json.dumps`` (how ``export
--perfetto`` encoded until 2026-11-25) vs ``msgspec.json.encode`` (how it encodes now), side by side.

The document is a real export (``tests/fixtures/fsdp-tiny.cvz``: phases, calls, flows, counters,
instants with their arguments) repeated, each copy shifted later in time, to ``--events`` trace
events. Rounds alternate the two encoders; the medians and their ratio are printed, after checking
once that both texts decode to the same document.

    python benchmarks/export_encode.py [--events 500000] [--rounds 5] [--quick]

``--quick``: 20,000 events, one round (the test suite runs it so the benchmark cannot break silently).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import msgspec

from collviz.runtime.reports.export import perfetto_trace
from collviz.runtime.wire.trace import read_trace

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "fsdp-tiny.cvz"


def large_document(events: int) -> dict:
    """The fixture's export with its trace events repeated (each copy later by the last one's span)
    until there are ``events`` of them."""
    contents = read_trace(FIXTURE)
    document = perfetto_trace(contents.events, contents.clock)
    base = document["traceEvents"]
    span = max(event.get("ts", 0) for event in base) + 1
    repeated: list[dict] = []
    copy = 0
    while len(repeated) < events:
        repeated.extend({**event, "ts": event["ts"] + copy * span} if "ts" in event else event for event in base)
        copy += 1
    document["traceEvents"] = repeated[:events]
    return document


def stdlib(document: dict) -> bytes:
    """The encoder the export used before."""
    return json.dumps(document, separators=(",", ":"), allow_nan=False).encode()


def timed(encode, document: dict) -> float:
    """Seconds one encode of ``document`` took."""
    start = time.perf_counter()
    encode(document)
    return time.perf_counter() - start


def main() -> None:
    """Print each encoder's median seconds and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="20,000 events, one round")
    args = parser.parse_args()
    if args.quick:
        args.events, args.rounds = 20_000, 1
    document = large_document(args.events)
    old, new = stdlib(document), msgspec.json.encode(document)
    assert json.loads(old) == json.loads(new), "the two encoders disagree"
    times: dict[str, list[float]] = {"json.dumps": [], "msgspec": []}
    for _ in range(args.rounds):
        times["json.dumps"].append(timed(stdlib, document))
        times["msgspec"].append(timed(msgspec.json.encode, document))
    print(f"{len(document['traceEvents']):,} trace events; stdlib text {len(old) / 1e6:.1f} MB, msgspec "
          f"{len(new) / 1e6:.1f} MB; {args.rounds} alternating rounds")
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, values in times.items():
        print(f"{name:<11} median {medians[name]:.3f} s   rounds {' '.join(f'{v:.3f}' for v in values)}")
    print(f"ratio json.dumps / msgspec: {medians['json.dumps'] / medians['msgspec']:.1f}x")


if __name__ == "__main__":
    main()
