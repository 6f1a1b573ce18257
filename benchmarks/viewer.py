"""Viewer benchmark: a synthetic flood from 8 ranks into the headless app, and a 1M-event trace.

Prints one table: events absorbed per second during a live flood (with a check that none were
lost), view frames rendered per second meanwhile, and the time to open and to seek a
1,000,000-event trace. Targets: >=200,000 events/s, >=30 frames/s, open < 3 s, seek < 50 ms.

    python benchmarks/viewer.py [--events 1000000] [--ranks 8] [--rate 250000] [--quick]

``--quick`` floods and opens 20,000 events from 2 ranks (the test suite runs it so the benchmark
cannot break silently; its figures mean nothing).

The paced run offers events at ``--rate`` (above the target) so frames are measured under a
sustained flood; the burst run hands everything over at once to find the ceiling.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import threading
import time
from pathlib import Path

from collviz.app.app import make_app
from collviz.runtime.wire.protocol import (
    LAUNCHER_RANK,
    AnyEvent,
    Buffer,
    Collective,
    Memory,
    Phase,
    ProvenanceRun,
    RunEnd,
    RunStart,
    Transfer,
    encode,
)
from collviz.runtime.wire.trace import TraceWriter
from textual.screen import Screen

SIZE = (160, 50)
BATCH = 5_000
PHASES = 8


def flood(total: int, ranks: int) -> list[AnyEvent]:
    """About ``total`` events of a run on ``ranks`` ranks: phases of all-gathers with buffers,
    transfers and memory samples, framed by RunStart and RunEnd."""
    events: list[AnyEvent] = []
    seq = [0] * (ranks + 1)

    def head(rank: int) -> dict:
        """The common fields of the next event from ``rank``."""
        slot = rank if rank >= 0 else ranks
        seq[slot] += 1
        return {"run": "bench", "rank": rank, "seq": seq[slot], "t_ns": len(events)}

    events.append(RunStart(**head(LAUNCHER_RANK), scenario="flood", world_size=ranks, backend="gloo",
                           device_kind="cpu", backend_reason="benchmark", mode="live", phase_count=PHASES))
    per_round = ranks * (ranks + 3)  # per rank: collective begin+end, buffer, transfers, memory
    rounds = max(1, -(-(total - 2 - 2 * ranks * PHASES) // (per_round * PHASES)))  # at least ``total``
    runs = [ProvenanceRun(r * 2, 2, [r]) for r in range(ranks)]
    for phase in range(PHASES):
        for rank in range(ranks):
            events.append(Phase(**head(rank), index=phase, name=f"phase {phase}", edge="begin", narration="flood"))
        for i in range(rounds):
            for rank in range(ranks):
                common = dict(phase=phase, op="all_gather", group="world", group_ranks=list(range(ranks)),
                              group_seq=i, dtype="float32", count=2, bytes_in=8, bytes_out=8 * ranks,
                              algo_bytes=8 * ranks)
                events.append(Collective(**head(rank), edge="begin", **common))
                events.append(Collective(**head(rank), edge="end", duration_ns=1000, **common))
                events.append(Buffer(**head(rank), phase=phase, name="output", role="gathered", moment="after",
                                     shape=[2 * ranks], dtype="float32", values=[float(i)] * (2 * ranks),
                                     provenance=runs))
                events += [Transfer(**head(rank), phase=phase, src=src, dst=rank, bytes=8, buffer="output",
                                    start=src * 2, length=2, kind="logical") for src in range(ranks) if src != rank]
                events.append(Memory(**head(rank), phase=phase, label="step", live_bytes=1000 + i % 100,
                                     peak_bytes=1100))
        for rank in range(ranks):
            events.append(Phase(**head(rank), index=phase, name=f"phase {phase}", edge="end"))
    events.append(RunEnd(**head(LAUNCHER_RANK), status="ok"))
    return events


class FloodSession:
    """A Session that hands out a prepared event list at ``rate`` events/s (``None``: at once).

    Nothing flows until ``go`` is set, so the app's start-up is not measured.
    """

    step = False

    def __init__(self, events: list[AnyEvent], rate: float | None) -> None:
        self.events = events
        self.rate = rate
        self.sent = 0
        self.finished = False
        self.go = threading.Event()
        self.started = 0.0

    def start(self) -> None:
        """Nothing to fork."""

    def poll(self, timeout: float) -> list[AnyEvent]:
        """The events due by now (in batches of at most ``BATCH``); ``finished`` once all are out."""
        if not self.go.wait(timeout):
            return []
        if not self.started:
            self.started = time.perf_counter()
        due = len(self.events)
        if self.rate is not None:
            due = min(due, int((time.perf_counter() - self.started) * self.rate))
            if due <= self.sent:
                time.sleep(min(timeout, 0.002))
                return []
        batch = self.events[self.sent : min(due, self.sent + BATCH)]
        self.sent += len(batch)
        self.finished = self.sent >= len(self.events)
        return batch

    def release(self, index: int) -> None:
        """No gates in a flood."""

    def stop(self) -> None:
        """Nothing to stop."""


class PaintCounter:
    """Counts the screen's compositor refreshes (what reaches the terminal) by wrapping them."""

    def __init__(self) -> None:
        self.paints = 0
        self._original = Screen._compositor_refresh

    def __enter__(self) -> "PaintCounter":
        original = self._original

        def counted(screen: Screen) -> None:
            """Count, then paint."""
            self.paints += 1
            original(screen)

        Screen._compositor_refresh = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        Screen._compositor_refresh = self._original  # type: ignore[method-assign]


async def measure_flood(events: list[AnyEvent], rate: float | None) -> dict[str, float]:
    """Absorption rate, view frames and screen paints of the live app while ``events`` arrive."""
    session = FloodSession(events, rate)
    app = make_app(session=session)
    with PaintCounter() as counter:
        return await _flood_app(app, session, counter, events)


async def _flood_app(app, session: FloodSession, counter: PaintCounter, events: list[AnyEvent]) -> dict[str, float]:
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        frames0 = app.frames
        paints0 = counter.paints
        started = time.perf_counter()
        session.go.set()
        while app.absorbed < len(events):
            await asyncio.sleep(0.005)
            if time.perf_counter() - started > 120:
                break
        elapsed = time.perf_counter() - started
        frames = app.frames - frames0
        paints = counter.paints - paints0
        await pilot.pause()
        lost = len(events) - len(app.event_log)
    return {"events": len(events), "seconds": elapsed, "events_per_s": app.absorbed / elapsed,
            "frames_per_s": frames / elapsed, "paints_per_s": paints / elapsed, "lost": lost}


async def measure_trace(path: Path, count: int) -> dict[str, float]:
    """Time to open (read, decode, index, first frame) and to seek a large trace."""
    app = make_app(trace=path)
    started = time.perf_counter()
    async with app.run_test(size=SIZE) as pilot:
        while not app.loaded:
            await asyncio.sleep(0.005)
        await pilot.pause()
        opened = time.perf_counter() - started
        seeks = []
        painted = []
        for step in [*range(1, PHASES + 1), 1, PHASES]:
            t0 = time.perf_counter()
            app.action_seek_to(step)
            seeks.append(time.perf_counter() - t0)
            await pilot.pause()
            painted.append(time.perf_counter() - t0)
    return {"events": count, "open_s": opened, "seek_ms_median": statistics.median(seeks) * 1000,
            "seek_ms_max": max(seeks) * 1000, "painted_ms_median": statistics.median(painted) * 1000}


def main() -> None:
    """Run both measurements and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--rate", type=float, default=250_000, help="events/s offered in the paced run")
    parser.add_argument("--quick", action="store_true", help="20,000 events from 2 ranks: a fast check that it runs")
    args = parser.parse_args()
    if args.quick:
        args.events, args.ranks = 20_000, 2
    print(f"building {args.events:,} synthetic events from {args.ranks} ranks…", flush=True)
    events = flood(args.events, args.ranks)
    paced = asyncio.run(measure_flood(events, args.rate))
    burst = asyncio.run(measure_flood(events, None))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "flood.cvz"
        writer = TraceWriter(path)
        writer.write(encode(e) for e in events)
        writer.close()
        size_mb = path.stat().st_size / 1e6
        replay = asyncio.run(measure_trace(path, len(events)))
    rows = [
        (f"live, {args.rate:,.0f} events/s offered: absorbed/s", f"{paced['events_per_s']:,.0f}", ">= 200,000",
         paced["events_per_s"] >= 200_000),
        ("  events lost", f"{paced['lost']}", "0", paced["lost"] == 0),
        ("  view frames rendered/s", f"{paced['frames_per_s']:.1f}", ">= 30", paced["frames_per_s"] >= 30),
        ("  screen paints/s", f"{paced['paints_per_s']:.1f}", ">= 30", paced["paints_per_s"] >= 30),
        ("live, all at once: absorbed/s", f"{burst['events_per_s']:,.0f}", ">= 200,000",
         burst["events_per_s"] >= 200_000),
        ("  events lost", f"{burst['lost']}", "0", burst["lost"] == 0),
        (f"open {replay['events']:,}-event trace ({size_mb:.0f} MB)", f"{replay['open_s']:.2f} s", "< 3 s",
         replay["open_s"] < 3),
        ("seek to a step (median)", f"{replay['seek_ms_median']:.1f} ms", "< 50 ms",
         replay["seek_ms_median"] < 50),
        ("seek to a step (worst)", f"{replay['seek_ms_max']:.1f} ms", "< 50 ms", replay["seek_ms_max"] < 50),
        ("  … until the screen is painted (median)", f"{replay['painted_ms_median']:.1f} ms", "", True),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"\n{'measure'.ljust(width)}  {'result':>14}  {'target':>11}  ok")
    for name, value, target, ok in rows:
        print(f"{name.ljust(width)}  {value:>14}  {target:>11}  {'yes' if ok else 'NO'}")
    print(f"\n({len(events):,} events from {args.ranks} ranks, batches of at most {BATCH:,}; paced run took "
          f"{paced['seconds']:.2f} s; terminal {SIZE[0]}x{SIZE[1]}, headless;\n a seek is the view and frame at the "
          "new cursor; painted adds the screen update)")


if __name__ == "__main__":
    main()
