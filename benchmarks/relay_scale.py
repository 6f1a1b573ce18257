"""How a job of many ranks is read through per-host relays (``collviz attach --relay``, one per
node) by one viewer (``collviz attach --listen``): a synthetic job of RANKS worker servers (one
process, ``_fr_moving_servers.py``: real gloo Flight Recorder entries, a window of WINDOW calls per
rank that moves on STEP calls before each of the viewer's readings, one rank behind the rest) read by RELAYS relays,
each a real ``collviz attach --relay`` process reading its share of the ranks every second, all on
this machine.

Measured in one run, side by side: what the relays cost (each rank's CPU-ms per reading, from the
relays' own per-reading CPU lines), what reached the viewer per reading (the news) against what one
process reading every rank's whole buffer fetches (``attach HOST:PORT`` today), and the viewer's
readings (each the relays' news applied, the calls in flight analysed, the feed's events made —
one per call and reading, as ``attach --listen`` makes them — and filed in the viewer's event log):
their median time and CPU, and the refresh rate that allows. Every timed reading must find the
rank behind among those the others wait for (relays read the moving job at their own moments, so a
reading may also show a relay's ranks one step behind the rest: counted, and printed).

    python benchmarks/relay_scale.py [--ranks 1024] [--relays 8] [--window 2000] [--step 10]
                                     [--readings 5] [--quick]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from collviz.app.model.log import EventLog
from collviz.runtime.live.feed import Feed
from collviz.runtime.live.reading import waits_of
from collviz.runtime.live.recorder_reader import RecorderReader
from collviz.runtime.live.relayed_reader import RelayedReader
from collviz.runtime.live.workers import ask_all, find_sockets
from collviz.runtime.sessions.intake import Intake
from collviz.runtime.sessions.torchrun_line import free_port_pair
from collviz.runtime.wire.relay_link import RelayListener

HERE = Path(__file__).parent
SECRET = "relay-scale-benchmark-secret"
BEHIND = 5
_CPU_LINE = re.compile(r"^reading (\d+): ([\d,]+) entries sent, (\d+) ms CPU")


def _real_dump(folder: Path) -> None:
    subprocess.run([sys.executable, str(HERE / "_fr_rank.py"), "200", "--dump", str(folder / "real.json")], check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})


def _relay_folders(folder: Path, ranks: int, relays: int) -> list[Path]:
    """One folder per relay holding links to its ranks' sockets (a node's ranks)."""
    per = -(-ranks // relays)
    folders = []
    for relay in range(relays):
        node = folder / f"node{relay}"
        node.mkdir()
        for rank in range(relay * per, min(ranks, (relay + 1) * per)):
            (node / f"rank{rank}.sock").symlink_to(folder / "sockets" / f"rank{rank}.sock")
        folders.append(node)
    return folders


def main() -> None:
    """Serve the synthetic job, start the relays, take the viewer's readings, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--relays", type=int, default=8)
    parser.add_argument("--window", type=int, default=2000, help="calls each rank's recorder holds (torch's default)")
    parser.add_argument("--step", type=int, default=10, help="calls each rank makes between two readings")
    parser.add_argument("--readings", type=int, default=5, help="the viewer's timed readings (default 5)")
    parser.add_argument("--quick", action="store_true", help="64 ranks behind 2 relays, 100 calls each, 3 readings")
    args = parser.parse_args()
    ranks, relays, window, readings = (64, 2, 100, 3) if args.quick else (args.ranks, args.relays, args.window,
                                                                          args.readings)
    port = free_port_pair()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        _real_dump(folder)
        servers = subprocess.Popen([sys.executable, str(HERE / "_fr_moving_servers.py"), str(folder), str(ranks),
                                    str(window), str(args.step), str(BEHIND % ranks)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        listener = RelayListener("127.0.0.1", port, SECRET.encode())
        started: list[subprocess.Popen] = []
        try:
            if servers.stdin is None or servers.stdout is None or servers.stdout.readline().strip() != "ready":
                raise SystemExit("relay_scale: the synthetic servers did not start")
            start = time.perf_counter()
            whole = ask_all(find_sockets(str(folder / "sockets")), "fr_trace_json", 60.0)
            whole_s = time.perf_counter() - start
            whole_bytes = sum(len(answer.body or b"") for answer in whole.values())
            for node in _relay_folders(folder, ranks, relays):
                started.append(subprocess.Popen(
                    [sys.executable, "-m", "collviz.app.cli", "attach", "--relay", f"127.0.0.1:{port}",
                     "--timeout", "30", str(node)],
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                    env={**os.environ, "COLLVIZ_SECRET": SECRET}))
            # as attach --listen --headless --watch reads: each reading from where every rank was done
            reader = RelayedReader(listener, timeout_s=30.0, first_wait_s=600.0, from_first=False)
            intake = Intake(None, float("inf"), "relay-scale")
            feed = Feed(intake, "relay-scale", reader, grouped=True)
            log = EventLog()  # the viewer's
            first_at = time.perf_counter()
            reading = reader.read()  # what the relays have sent so far: each rank's whole window, once
            feed.take(reading)
            log.extend(intake.take_pending())  # what the session hands the viewer
            first_s = time.perf_counter() - first_at
            while len(reading.answered) < ranks and time.perf_counter() - first_at < 1800:
                time.sleep(1.0)  # the rest of the job joins as its relays report it
                reading = reader.read()
                feed.take(reading)
                log.extend(intake.take_pending())
            whole_read_s = time.perf_counter() - first_at
            times, cpu, news_bytes, missing = [], [], [], []
            for _ in range(readings):
                servers.stdin.write("step\n")  # every rank makes STEP calls more
                servers.stdin.flush()
                time.sleep(1.0)  # the viewer's pace while ranks wait (attach's --interval): each relay reads once
                before, wall, own = listener.received_bytes, time.perf_counter(), time.process_time()
                reading = reader.read()
                feed.take(reading)
                log.extend(intake.take_pending())
                times.append(time.perf_counter() - wall)
                cpu.append(time.process_time() - own)
                news_bytes.append(listener.received_bytes - before)
                missing.append({rank for wait in waits_of(reading).values() for rank in wait.missing})
            for relay in started:
                relay.send_signal(signal.SIGINT)  # Ctrl-C: a relay ends at once, its lines printed
            outputs = [relay.communicate(timeout=120) for relay in started]
        finally:
            for relay in started:
                if relay.poll() is None:
                    relay.kill()
            listener.close()
            servers.communicate("")
    if any(BEHIND % ranks not in found for found in missing) or len(reading.answered) != ranks:
        raise SystemExit(f"relay_scale: the viewer read {len(reading.answered)} ranks and found "
                         f"{[sorted(found) for found in missing]} missing, not rank {BEHIND % ranks} every time")
    per_rank_ms = []
    for out, err in outputs:
        lines = [found for line in out.splitlines() if (found := _CPU_LINE.match(line))]
        if not lines:
            raise SystemExit(f"relay_scale: a relay reported no reading:\n{err[-2000:]}")
        share = -(-ranks // relays)
        per_rank_ms += [int(found[3]) / share for found in lines[1:]]  # reading 0 sends each whole window once
    read_s = statistics.median(times)
    print(f"relay_scale: {ranks} synthetic ranks ({window} real gloo calls each, {args.step} more a reading) "
          f"behind {relays} relays; rank {BEHIND % ranks} found missing by every viewer reading (with it, up to "
          f"{max(len(found) - 1 for found in missing)} ranks a step behind as their relay read them)")
    print(f"{'per reading':<52}{'bytes':>14}{'median':>10}{'refresh rate':>14}")
    print(f"{'one process fetching every whole buffer (attach now)':<52}{whole_bytes:>14,}{whole_s:>9.2f}s"
          f"{1 / whole_s:>11.2f} Hz   (fetch only)")
    print(f"{'the viewer: the relays news applied and analysed':<52}{int(statistics.median(news_bytes)):>14,}"
          f"{read_s:>9.3f}s{1 / read_s:>11.1f} Hz   ({statistics.median(cpu) * 1e3:.0f} ms CPU)")
    print(f"{'  its first reading (the ranks reported by then)':<52}{'':>14}{first_s:>9.2f}s")
    print(f"{'  every rank read (each whole window, once)':<52}{'':>14}{whole_read_s:>9.2f}s")
    print(f"each rank's cost per reading at its relay: {statistics.median(per_rank_ms):.2f} CPU-ms median "
          f"({max(per_rank_ms):.2f} max; fetching the whole answer, skimming it, sending what changed)")
    print(f"ratio bytes whole/news: {whole_bytes / max(1, statistics.median(news_bytes)):.0f}x")


if __name__ == "__main__":
    main()
