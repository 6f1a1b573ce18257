"""Viewer benchmark: a synthetic flood from 8 and 64 ranks into the headless app, the traces of
those floods opened and seeked, and a 10M-event trace opened in a fresh interpreter.

Per rank count, one table (medians of ``--rounds``, every round shown): events absorbed per second
during a live flood (with a check that none were lost), view frames rendered and screen paints
per second meanwhile, the CPU its writer spends recording the ~1,000,000-event trace of that flood
(payloads already encoded, flushed 1,000 at a time as a launcher does), the time to open it (wall
and process CPU; from the index its writer left beside it, and again scanned with the index
removed, beside the careful reader's time to read and index it alone: how every trace opened
before), and to seek to a step. Then the large trace: open time and peak resident memory. Run
against a collviz that writes no index, the open and scanned rows measure the same thing. Targets (issue 23):
>=200,000 events/s, >=30 frames and paints/s, open <= 1 s, seek <= 10 ms, 10M events <= 10 s in
<= 2 GiB.

    python benchmarks/viewer.py [--events 1000000] [--ranks 8,64] [--rate 250000] [--rounds 3]
                                [--large 10000000] [--quick]

The paced run offers events at ``--rate`` (above the target) so frames are measured under a
sustained flood; the burst run hands everything over at once to find the ceiling. ``--quick``
runs the same paths in seconds (40,000 events, 8 ranks, one round, a 200,000-event large trace).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from collviz.app.app import make_app
from collviz.app.model import EventLog
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
from collviz.runtime.wire.trace import TraceWriter, read_trace
from textual.screen import Screen

try:
    from collviz.runtime.wire.sidecar import index_path
except ImportError:  # a collviz from before trace indexes (a baseline): its traces are always scanned
    index_path = None

SIZE = (160, 50)
BATCH = 5_000
PHASES = 8


def flood(total: int, ranks: int) -> list[AnyEvent]:
    """About ``total`` events of a run on ``ranks`` ranks: phases of all-gathers with buffers,
    transfers and memory samples, framed by RunStart and RunEnd."""
    return list(flood_events(total, ranks))


def flood_events(total: int, ranks: int, varied: bool = False) -> Iterator[AnyEvent]:
    """The events of :func:`flood`, one at a time (a 10M-event trace is written without holding
    them); ``varied``: each step's calls take their own time (by phase and rank) and its buffers
    hold their own values, as a training run's steps repeat their calls with new times and data
    (else every step repeats the first's exactly, which flatters whatever keeps the last frame)."""
    seq = [0] * (ranks + 1)
    made = 0

    def head(rank: int) -> dict:
        """The common fields of the next event from ``rank``."""
        nonlocal made
        slot = rank if rank >= 0 else ranks
        seq[slot] += 1
        made += 1
        return {"run": "bench", "rank": rank, "seq": seq[slot], "t_ns": made - 1}

    yield RunStart(**head(LAUNCHER_RANK), scenario="flood", world_size=ranks, backend="gloo",
                   device_kind="cpu", backend_reason="benchmark", mode="live", phase_count=PHASES)
    per_round = ranks * (ranks + 3)  # per rank: collective begin+end, buffer, transfers, memory
    rounds = max(1, -(-(total - 2 - 2 * ranks * PHASES) // (per_round * PHASES)))  # at least ``total``
    runs = [ProvenanceRun(r * 2, 2, [r]) for r in range(ranks)]
    for phase in range(PHASES):
        for rank in range(ranks):
            yield Phase(**head(rank), index=phase, name=f"phase {phase}", edge="begin", narration="flood")
        for i in range(rounds):
            for rank in range(ranks):
                common = dict(phase=phase, op="all_gather", group="world", group_ranks=list(range(ranks)),
                              group_seq=i, dtype="float32", count=2, bytes_in=8, bytes_out=8 * ranks,
                              algo_bytes=8 * ranks)
                yield Collective(**head(rank), edge="begin", **common)
                yield Collective(**head(rank), edge="end", duration_ns=1000 + (37 * phase + rank) * varied, **common)
                yield Buffer(**head(rank), phase=phase, name="output", role="gathered", moment="after",
                             shape=[2 * ranks], dtype="float32", values=[i + 0.5 * phase * varied] * (2 * ranks),
                             provenance=runs)
                for src in range(ranks):
                    if src != rank:
                        yield Transfer(**head(rank), phase=phase, src=src, dst=rank, bytes=8, buffer="output",
                                       start=src * 2, length=2, kind="logical")
                yield Memory(**head(rank), phase=phase, label="step", live_bytes=1000 + i % 100, peak_bytes=1100)
        for rank in range(ranks):
            yield Phase(**head(rank), index=phase, name=f"phase {phase}", edge="end")
    yield RunEnd(**head(LAUNCHER_RANK), status="ok")


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
        started, cpu = time.perf_counter(), time.process_time()
        session.go.set()
        while app.mode.absorbed < len(events):
            await asyncio.sleep(0.005)
            if time.perf_counter() - started > 120:
                break
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        frames = app.frames - frames0
        paints = counter.paints - paints0
        await pilot.pause()
        lost = len(events) - len(app.event_log)
    return {"events": len(events), "seconds": elapsed, "events_per_s": app.mode.absorbed / elapsed,
            "frames_per_s": frames / elapsed, "paints_per_s": paints / elapsed, "lost": lost, "cpu_s": cpu}


class FirstFrame:
    """Stands in for :class:`~collviz.app.messages.TraceLoaded`'s ``shown`` (set by the viewer
    once the first frame of a trace it shows before reading it whole is drawn): notes the time
    and CPU then, and passes it on to the reader waiting for it."""

    def __init__(self) -> None:
        self.at: tuple[float, float] | None = None
        self.passed_on: threading.Event | None = None

    def set(self) -> None:
        """Note when, then set the reader's event."""
        self.at = (time.perf_counter(), time.process_time())
        if self.passed_on is not None:
            self.passed_on.set()


async def measure_trace(path: Path, count: int) -> dict[str, float]:
    """Time (wall and process CPU) to open a trace in the viewer (read, index, first frame painted;
    where the viewer reads the rest afterwards, until it is read and checked whole too), then to
    seek to each step and back."""
    app = make_app(trace=path)
    first = FirstFrame()

    def noted(message: object) -> None:
        """Note the first frame of a TraceLoaded that has one noted (a collviz before: none)."""
        shown = getattr(message, "shown", None)
        if shown is not None and first.passed_on is None:
            first.passed_on, message.shown = shown, first

    started, cpu = time.perf_counter(), time.process_time()
    async with app.run_test(size=SIZE, message_hook=noted) as pilot:
        while not app.loaded:
            await asyncio.sleep(0.005)
        await pilot.pause()
        opened, opened_cpu = time.perf_counter() - started, time.process_time() - cpu
        if first.at is not None:  # drawn before the rest was read: the pause above ran into it
            opened, opened_cpu = first.at[0] - started, first.at[1] - cpu
        while not getattr(app, "checked", True):  # a trace shown before it was read whole (a collviz before: always whole)
            await asyncio.sleep(0.005)
        await pilot.pause()
        whole, whole_cpu = time.perf_counter() - started, time.process_time() - cpu
        seeks, seeks_cpu, painted = [], [], []
        for step in [*range(1, PHASES + 1), 1, PHASES]:
            t0, c0 = time.perf_counter(), time.process_time()
            app.action_seek_to(step)
            seeks.append(time.perf_counter() - t0)
            seeks_cpu.append(time.process_time() - c0)
            await pilot.pause()
            painted.append(time.perf_counter() - t0)
    return {"events": count, "open_s": opened, "open_cpu_s": opened_cpu, "whole_s": whole, "whole_cpu_s": whole_cpu,
            "seek_ms_median": statistics.median(seeks) * 1000, "seek_cpu_ms_median": statistics.median(seeks_cpu) * 1000,
            "seek_ms_max": max(seeks) * 1000, "painted_ms_median": statistics.median(painted) * 1000}


def measure_careful(path: Path) -> dict[str, float]:
    """Time to read and index the same trace the careful way (read_trace, then the log's handlers
    one event at a time, garbage collector paused): how the viewer opened every trace before
    intact ones were indexed a chunk at a time, and how it still opens damaged ones."""
    gc.collect()
    started, cpu = time.perf_counter(), time.process_time()
    gc.disable()
    try:
        log = EventLog(read_trace(path).events)
    finally:
        gc.enable()
    result = {"careful_s": time.perf_counter() - started, "careful_cpu_s": time.process_time() - cpu}
    del log
    gc.collect()
    return result


def measure_recording(path: Path, payloads: list[bytes]) -> dict[str, float]:
    """CPU and wall seconds a :class:`TraceWriter` takes to record ``payloads`` (flushed 1,000 at
    a time, as a launcher flushes each batch it polls) and close the file."""
    started, cpu = time.perf_counter(), time.process_time()
    writer = TraceWriter(path)
    for start in range(0, len(payloads), 1_000):
        writer.write(payloads[start : start + 1_000])
    writer.close()
    return {"record_s": time.perf_counter() - started, "record_cpu_s": time.process_time() - cpu}


def measure_scanned(path: Path, count: int) -> dict[str, float]:
    """:func:`measure_trace` on a copy of the trace at ``path`` without its index (scanned)."""
    copy = path.with_name(f"scanned-{path.name}")
    copy.write_bytes(path.read_bytes())
    try:
        return asyncio.run(measure_trace(copy, count))
    finally:
        copy.unlink()


def write_flood(path: Path, total: int, ranks: int, varied: bool = False) -> int:
    """Write the flood of about ``total`` events as a trace, a batch at a time; how many
    (``varied``: as :func:`flood_events` takes it)."""
    writer = TraceWriter(path)
    count = 0
    batch: list[bytes] = []
    for event in flood_events(total, ranks, varied):
        batch.append(encode(event))
        if len(batch) == 50_000:
            writer.write(batch)
            count += len(batch)
            batch.clear()
    writer.write(batch)
    writer.close()
    return count + len(batch)


def open_in_child(path: Path) -> dict[str, float]:
    """Open ``path`` in the viewer in a fresh interpreter (so its peak memory is the opening's
    alone): wall and CPU seconds, and the peak resident set from ``getrusage``."""
    result = subprocess.run([sys.executable, __file__, "--open-only", str(path)], capture_output=True, text=True,
                            check=True, timeout=600)
    return json.loads(result.stdout.strip().splitlines()[-1])


def peak_resident_bytes() -> int:
    """This process's peak resident set: Linux's VmHWM, which starts afresh at exec (getrusage's
    ru_maxrss does not: it keeps the forking parent's peak), else ru_maxrss."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _open_only(path: Path) -> None:
    """The child side of :func:`open_in_child`: one JSON line."""
    measured = asyncio.run(measure_trace(path, 0))
    peak = peak_resident_bytes()
    print(json.dumps({"open_s": measured["open_s"], "open_cpu_s": measured["open_cpu_s"], "peak_rss": peak,
                      "whole_s": measured["whole_s"], "whole_cpu_s": measured["whole_cpu_s"],
                      "seek_ms_median": measured["seek_ms_median"],
                      "seek_cpu_ms_median": measured["seek_cpu_ms_median"], "seek_ms_max": measured["seek_ms_max"]}))


def _median(rounds: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rounds)


def _spread(rounds: list[dict[str, float]], key: str, fmt: str) -> str:
    return " ".join(format(r[key], fmt) for r in rounds)


def run_ranks(ranks: int, total: int, rate: float, rounds: int, folder: Path) -> list[tuple[str, str, str, str, bool]]:
    """Every measurement at ``ranks`` ranks, ``rounds`` times: rows of (measure, median, all
    rounds, target, met)."""
    print(f"building {total:,} synthetic events from {ranks} ranks…", flush=True)
    events = flood(total, ranks)
    payloads = [encode(e) for e in events]
    path = folder / f"flood-{ranks}.cvz"
    paced, burst, recorded, opened, scanned, careful = [], [], [], [], [], []
    for _ in range(rounds):
        paced.append(asyncio.run(measure_flood(events, rate)))
        burst.append(asyncio.run(measure_flood(events, None)))
        recorded.append(measure_recording(path, payloads))
        opened.append(asyncio.run(measure_trace(path, len(events))))
        scanned.append(measure_scanned(path, len(events)))
        careful.append(measure_careful(path))
    del events, payloads
    size_mb = path.stat().st_size / 1e6
    indexed = index_path is not None and index_path(path).exists()
    open_s, careful_s = _median(opened, "open_s"), _median(careful, "careful_s")
    return [
        (f"live, {rate:,.0f} events/s offered: absorbed/s", f"{_median(paced, 'events_per_s'):,.0f}",
         _spread(paced, "events_per_s", ",.0f"), ">= 200,000", _median(paced, "events_per_s") >= 200_000),
        ("  events lost (all rounds)", f"{sum(r['lost'] for r in paced)}", "", "0", all(r["lost"] == 0 for r in paced)),
        ("  view frames rendered/s", f"{_median(paced, 'frames_per_s'):.1f}", _spread(paced, "frames_per_s", ".1f"),
         ">= 30", _median(paced, "frames_per_s") >= 30),
        ("  screen paints/s", f"{_median(paced, 'paints_per_s'):.1f}", _spread(paced, "paints_per_s", ".1f"), ">= 30",
         _median(paced, "paints_per_s") >= 30),
        ("  process CPU seconds", f"{_median(paced, 'cpu_s'):.2f}", _spread(paced, "cpu_s", ".2f"), "", True),
        ("live, all at once: absorbed/s", f"{_median(burst, 'events_per_s'):,.0f}", _spread(burst, "events_per_s", ",.0f"),
         ">= 200,000", _median(burst, "events_per_s") >= 200_000),
        (f"record the {opened[0]['events']:,}-event trace ({size_mb:.0f} MB): writer CPU",
         f"{_median(recorded, 'record_cpu_s'):.2f} s", _spread(recorded, "record_cpu_s", ".2f"), "", True),
        ("  … wall (with the fsyncs of closing)", f"{_median(recorded, 'record_s'):.2f} s",
         _spread(recorded, "record_s", ".2f"), "", True),
        (f"open it{' (from its index)' if indexed else ''}, wall",
         f"{open_s:.2f} s", _spread(opened, "open_s", ".2f"), "<= 1 s", open_s <= 1),
        ("  … process CPU", f"{_median(opened, 'open_cpu_s'):.2f} s", _spread(opened, "open_cpu_s", ".2f"), "", True),
        ("  open it scanned (no index), wall", f"{_median(scanned, 'open_s'):.2f} s", _spread(scanned, "open_s", ".2f"),
         "", True),
        ("  … process CPU", f"{_median(scanned, 'open_cpu_s'):.2f} s", _spread(scanned, "open_cpu_s", ".2f"), "", True),
        ("  the careful reader alone (read_trace + index)", f"{careful_s:.2f} s", _spread(careful, "careful_s", ".2f"),
         "", True),
        ("  … its CPU", f"{_median(careful, 'careful_cpu_s'):.2f} s", _spread(careful, "careful_cpu_s", ".2f"), "", True),
        ("  opening ÷ the careful reader alone", f"{open_s / careful_s:.2f}", "", "", True),
        ("seek to a step (median)", f"{_median(opened, 'seek_ms_median'):.1f} ms", _spread(opened, "seek_ms_median", ".1f"),
         "<= 10 ms", _median(opened, "seek_ms_median") <= 10),
        ("  … process CPU (median)", f"{_median(opened, 'seek_cpu_ms_median'):.1f} ms",
         _spread(opened, "seek_cpu_ms_median", ".1f"), "", True),
        ("seek to a step (worst)", f"{max(r['seek_ms_max'] for r in opened):.1f} ms", "", "< 50 ms",
         max(r["seek_ms_max"] for r in opened) < 50),
        ("  … until the screen is painted (median)", f"{_median(opened, 'painted_ms_median'):.1f} ms",
         _spread(opened, "painted_ms_median", ".1f"), "", True),
    ]


def run_large(total: int, folder: Path) -> list[tuple[str, str, str, str, bool]]:
    """Write a ``total``-event trace (8 ranks) and open it in a fresh interpreter."""
    print(f"writing a {total:,}-event trace…", flush=True)
    path = folder / "large.cvz"
    count = write_flood(path, total, 8)
    indexed = index_path is not None and index_path(path).exists()
    child = open_in_child(path)
    gb = child["peak_rss"] / 2**30
    return [
        (f"open the {count:,}-event trace ({path.stat().st_size / 1e9:.2f} GB){' from its index' if indexed else ''}, "
         "wall", f"{child['open_s']:.2f} s", "", "<= 10 s", child["open_s"] <= 10),
        ("  … process CPU", f"{child['open_cpu_s']:.2f} s", "", "", True),
        ("  … peak resident memory", f"{gb:.2f} GiB", "", "<= 2 GiB", gb <= 2),
        ("  … then a seek (median)", f"{child['seek_ms_median']:.1f} ms", "", "", True),
    ]


def main() -> None:
    """Run the measurements and print one table per rank count (and the large trace's)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--ranks", default="8,64", help="rank counts, comma-separated")
    parser.add_argument("--rate", type=float, default=250_000, help="events/s offered in the paced run")
    parser.add_argument("--rounds", type=int, default=3, help="repeat every measurement; medians are shown")
    parser.add_argument("--large", type=int, default=10_000_000, help="events of the large trace (0: skip it)")
    parser.add_argument("--quick", action="store_true", help="a seconds-long run of the same paths")
    parser.add_argument("--open-only", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.open_only is not None:
        _open_only(args.open_only)
        return
    if args.quick:
        args.events, args.ranks, args.rounds, args.large = 40_000, "8", 1, 200_000
    tables = []
    with tempfile.TemporaryDirectory() as folder:
        for ranks in (int(r) for r in args.ranks.split(",")):
            tables.append((f"{ranks} ranks", run_ranks(ranks, args.events, args.rate, args.rounds, Path(folder))))
        if args.large:
            tables.append(("large trace, 8 ranks, fresh interpreter", run_large(args.large, Path(folder))))
    for title, rows in tables:
        width = max(len(r[0]) for r in rows)
        print(f"\n{title} (median of {args.rounds}; terminal {SIZE[0]}x{SIZE[1]}, headless)")
        print(f"{'measure'.ljust(width)}  {'median':>12}  {'target':>10}  ok   rounds")
        for name, value, spread, target, ok in rows:
            print(f"{name.ljust(width)}  {value:>12}  {target:>10}  {'yes' if ok else 'NO ':3}  {spread}")
    print(f"\n(events arrive in batches of at most {BATCH:,}; a seek is the view and frame at the new cursor, "
          "painted adds the screen update;\n wall times on a shared machine swing with its load: CPU is the "
          "process's own, both threads)")


if __name__ == "__main__":
    main()
