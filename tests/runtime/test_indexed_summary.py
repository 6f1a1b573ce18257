"""``collviz replay TRACE --headless`` / ``--json`` read through the trace's index
(runtime/reports/indexed.py): the same output as the careful reader's, which reads every event.

Each trace is replayed twice by the command itself, with its index and with the index removed
(the careful reader, as before indexes); the listed transfers of the scrambled 6-rank run are
written out here by hand.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

from collviz.app.commands import replay
from collviz.runtime.reports.indexed import read_for_summary
from collviz.runtime.wire import sidecar
from collviz.runtime.wire.protocol import AnyEvent, Memory, Transfer
from collviz.runtime.wire.sidecar import index_path

from support.subgroup_events import subgroup_all_gather
from support.synthetic import all_gather_events, write_trace
from support.synthetic_bench import bench_events


def scrambled_run() -> list[AnyEvent]:
    """The 6-rank all-gather with each rank's transfers listed in reverse source order, and rank 0's
    first one (from r5) turned into a 100-byte point-to-point copy of its r1 chunk: a tie on
    (dst, src, start) that log order settles."""
    events = all_gather_events(world=6)
    for rank in range(6):
        mine = [at for at, event in enumerate(events) if isinstance(event, Transfer) and event.dst == rank]
        sources = [events[at].src for at in mine][::-1]
        for at, src in zip(mine, sources):
            events[at] = msgspec.structs.replace(events[at], src=src, start=2 * src)
    first = next(at for at, event in enumerate(events) if isinstance(event, Transfer) and event.dst == 0)
    assert events[first].src == 5
    events[first] = msgspec.structs.replace(events[first], src=1, start=2, bytes=100, kind="p2p")
    return events


def with_a_gap() -> list[AnyEvent]:
    """The 4-rank all-gather without rank 2's second memory sample: a sequence gap."""
    events = all_gather_events(world=4)
    samples = [at for at, event in enumerate(events) if isinstance(event, Memory) and event.rank == 2]
    del events[samples[1]]
    return events


def beyond_the_order_key() -> list[AnyEvent]:
    """The 4-rank all-gather with a transfer starting past what the index's order key packs (2**32)."""
    events = all_gather_events(world=4)
    at = next(at for at, event in enumerate(events) if isinstance(event, Transfer))
    events[at] = msgspec.structs.replace(events[at], start=2**32)
    return events


RUNS = {
    "scrambled transfers, 6 ranks": scrambled_run,
    "a subgroup of 2 of 4 ranks": subgroup_all_gather,
    "a rank that failed": lambda: all_gather_events(world=4, fail_rank=2),
    "a sequence gap": with_a_gap,
    "a bench run": bench_events,
}


GAPS = {"a sequence gap": "1 gap", "a subgroup of 2 of 4 ranks": "2 gaps"}
"""The runs with sequence gaps (the subgroup's: ranks 0 and 2 skip phase 1's two call events)."""


def _replayed(trace: Path, option: str, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """What ``collviz replay TRACE option`` prints (stdout, stderr); it must exit 0."""
    assert replay.main([str(trace), option]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


@pytest.mark.parametrize("option", ["--headless", "--json"])
@pytest.mark.parametrize("run", list(RUNS))
def test_an_indexed_trace_replays_as_the_careful_reader_replays_it(tmp_path, capsys, run, option):
    trace = write_trace(tmp_path / "t.cvz", RUNS[run]())
    assert read_for_summary(trace) is not None  # read through the index
    indexed = _replayed(trace, option, capsys)
    os.unlink(index_path(trace))
    assert read_for_summary(trace) is None
    assert indexed == _replayed(trace, option, capsys)
    gaps = GAPS.get(run)
    assert indexed[1] == (f"collviz: warning: {trace}: {gaps} in ranks' event sequences (events lost before "
                          "recording)\n" if gaps else "")


def test_a_phases_transfers_are_counted_and_listed_from_the_columns(tmp_path, capsys):
    trace = write_trace(tmp_path / "t.cvz", scrambled_run())
    text, _ = _replayed(trace, "--headless", capsys)
    listed = ["    r1 → r0  output[2:4]  100 B", "    r1 → r0  output[2:4]  8 B"]  # the tie, in log order
    listed += [f"    r{src} → r0  output[{2 * src}:{2 * src + 2}]  8 B" for src in (2, 3, 4)]
    listed += [f"    r{src} → r{dst}  output[{2 * src}:{2 * src + 2}]  8 B"
               for dst in range(1, 6) for src in range(6) if src != dst][:19]
    lines = text.splitlines()
    at = lines.index("  transfers (point-to-point): 30, 332 B in all")  # 29 × 8 B + 100 B
    assert lines[at + 1 : at + 26] == [*listed, "    … 6 more"]


def test_a_trace_beyond_its_columns_or_with_an_index_before_them_replays_the_careful_way(tmp_path, capsys,
                                                                                        monkeypatch):
    beyond = write_trace(tmp_path / "beyond.cvz", beyond_the_order_key())
    monkeypatch.setattr(sidecar, "INDEX_VERSION", 2)
    monkeypatch.setattr(sidecar, "_COLUMNS", sidecar._COLUMNS[:7])  # as a collviz before index version 3 wrote
    older = write_trace(tmp_path / "older.cvz", scrambled_run())
    monkeypatch.undo()
    texts = {}
    for trace in (beyond, older):
        assert index_path(trace).exists() and read_for_summary(trace) is None
        texts[trace] = _replayed(trace, "--headless", capsys)
        os.unlink(index_path(trace))
        assert texts[trace] == _replayed(trace, "--headless", capsys)
    assert "    r1 → r0  output[4294967296:4294967298]  8 B" in texts[beyond][0].splitlines()


def test_reading_through_the_index_reports_its_progress_in_bytes(tmp_path, monkeypatch):
    from collviz.runtime.reports import indexed

    monkeypatch.setattr(indexed, "PROGRESS_RECORDS", 1)  # as for a large trace
    monkeypatch.setattr(indexed, "INDEX_PART", 10)
    events = all_gather_events(world=4)
    trace = write_trace(tmp_path / "t.cvz", events)
    calls: list[tuple[int, int]] = []
    assert read_for_summary(trace, progress=lambda done, total: calls.append((done, total))) is not None
    size = trace.stat().st_size
    assert len(calls) == -(-len(events) // 10) and calls[-1] == (size, size)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
