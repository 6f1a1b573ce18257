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
from collviz.runtime.wire.protocol import AnyEvent, Buffer, Collective, Memory, Phase, Transfer
from collviz.runtime.wire.sidecar import index_path

from support.subgroup_events import PAIR_GROUP, subgroup_all_gather, two_pairs_all_gather
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


EXTRA_BUFFERS = {0: 262, 1: 255, 2: 0, 3: 256}
"""Gradient buffers each rank adds in phase 1 of :func:`many_buffers` (beside its own output there)."""

EXTRA_SAMPLES = 40
"""Memory samples rank 3 adds in phase 1 of :func:`many_buffers` (beside its own 1 there)."""


def many_buffers() -> list[AnyEvent]:
    """The 4-rank all-gather with :data:`EXTRA_BUFFERS` and :data:`EXTRA_SAMPLES` added to phase 1,
    the ranks' buffers interleaved in log order, every rank's seq and time renumbered in log order."""
    events = all_gather_events(world=4)
    at = next(at for at, event in enumerate(events) if isinstance(event, Phase) and event.index == 1
              and event.edge == "end")
    added: list[AnyEvent] = [Buffer(run="synthetic", rank=rank, seq=0, t_ns=0, phase=1, name=f"grad{k}", role="grad",
                                    moment="after", shape=[2], dtype="float32", values=[k, rank])
                             for k in range(max(EXTRA_BUFFERS.values())) for rank, count in EXTRA_BUFFERS.items()
                             if k < count]
    added += [Memory(run="synthetic", rank=3, seq=0, t_ns=0, phase=1, label=f"sample{k}", live_bytes=100 + k,
                     peak_bytes=2000) for k in range(EXTRA_SAMPLES)]
    events[at:at] = added
    seqs: dict[int, int] = {}
    for position, event in enumerate(events):
        seqs[event.rank] = seqs.get(event.rank, -1) + 1
        events[position] = msgspec.structs.replace(event, seq=seqs[event.rank], t_ns=1000 * (position + 1))
    return events


def odd_rank_in_a_pair() -> list[AnyEvent]:
    """Two pairs of 4 ranks all-gathering at once (:func:`two_pairs_all_gather`), rank 3 calling
    reduce_scatter of 4 floats on its pair ({1, 3}) instead."""
    return _calling_reduce_scatter(two_pairs_all_gather(), {3})


def two_pairs_of_one_name() -> list[AnyEvent]:
    """Two pairs of 4 ranks at once, both named :data:`PAIR_GROUP`: ranks 1 and 3 all-gather, ranks
    0 and 2 reduce-scatter (two communicators, each agreeing within itself: never compared)."""
    events = _calling_reduce_scatter(two_pairs_all_gather(), {0, 2})
    return [msgspec.structs.replace(event, group=PAIR_GROUP) if isinstance(event, Collective) else event
            for event in events]


def _calling_reduce_scatter(events: list[AnyEvent], ranks: set[int]) -> list[AnyEvent]:
    """``events`` with the calls of ``ranks`` made reduce_scatters of 4 floats."""
    return [msgspec.structs.replace(event, op="reduce_scatter", count=4)
            if isinstance(event, Collective) and event.rank in ranks else event for event in events]


RUNS = {
    "many buffers a rank, 4 ranks": many_buffers,
    "scrambled transfers, 6 ranks": scrambled_run,
    "a subgroup of 2 of 4 ranks": subgroup_all_gather,
    "a subgroup's untimed calls": lambda: subgroup_all_gather(timed=False),
    "a rank that failed": lambda: all_gather_events(world=4, fail_rank=2),
    "a sequence gap": with_a_gap,
    "a bench run": bench_events,
    "an odd rank in a pair of 4 ranks": odd_rank_in_a_pair,
    "two pairs of one name, 4 ranks": two_pairs_of_one_name,
}


GAPS = {"a sequence gap": "1 gap", "a subgroup of 2 of 4 ranks": "2 gaps", "a subgroup's untimed calls": "2 gaps"}
"""The runs with sequence gaps (the subgroup's: ranks 0 and 2 skip phase 1's two call events)."""


def _replayed(trace: Path, option: str, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """What ``collviz replay TRACE option`` prints (stdout, stderr); it must exit 0."""
    assert replay.main([str(trace), option]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


@pytest.mark.parametrize("version", [3, 4])  # its body checked whole, or a part at a time
@pytest.mark.parametrize("option", ["--headless", "--json"])
@pytest.mark.parametrize("run", list(RUNS))
def test_an_indexed_trace_replays_as_the_careful_reader_replays_it(tmp_path, capsys, run, option, version,
                                                                   monkeypatch):
    monkeypatch.setattr(sidecar, "INDEX_VERSION", version)
    trace = write_trace(tmp_path / "t.cvz", RUNS[run]())
    monkeypatch.undo()
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


@pytest.mark.parametrize("part", [10_000, 7])
def test_a_ranks_first_buffers_in_a_phase_are_listed_and_the_rest_counted(tmp_path, capsys, monkeypatch, part):
    from collviz.runtime.reports import indexed

    monkeypatch.setattr(indexed, "INDEX_PART", part)  # 7: a rank's buffers counted across parts
    events = many_buffers()
    held = {rank: sum(isinstance(event, Buffer) and event.phase == 1 and event.rank == rank for event in events)
            for rank in range(4)}
    assert held == {0: 263, 1: 256, 2: 1, 3: 257}  # each rank's own output, and the added
    trace = write_trace(tmp_path / "t.cvz", events)
    assert read_for_summary(trace) is not None
    lines = _replayed(trace, "--headless", capsys)[0].splitlines()
    heads = [at for at, line in enumerate(lines) if line.startswith(("phase 1  all_gather", "phase 2  release"))]
    phase = lines[heads[0] + 1 : heads[1]]
    rank_lines = {rank: [line for line in phase if line.startswith(f"  rank {rank}  ")] for rank in range(4)}
    assert [len(found) for found in rank_lines.values()] == [256 + 1, 256, 1, 256 + 1]
    assert rank_lines[0][-1] == "  rank 0  … 7 more buffers in this phase (the viewer shows each)"
    assert rank_lines[3][-1] == "  rank 3  … 1 more buffers in this phase (the viewer shows each)"
    assert rank_lines[0][-2].startswith("  rank 0  grad254  after   [254, 0]")  # by seq: its output, grad0 … 254
    assert rank_lines[3][-2].startswith("  rank 3  grad255  after   [255, 3]")  # its output came after the grads
    samples = next(line for line in phase if line.startswith("  memory r3 "))
    assert samples.startswith("  memory r3 (live tensor bytes, tracker): sample0: 100 B; sample1: 101 B; ")
    assert samples.count("; sample") == 31 and samples.endswith("; sample31: 131 B; … 9 more samples; peak 48 B")


def test_a_subgroups_odd_rank_is_found_on_the_columns(tmp_path, capsys):
    trace = write_trace(tmp_path / "t.cvz", odd_rank_in_a_pair())
    found = ("collective mismatch at call #0 on group 1 (pair): rank 3 called reduce_scatter(float32 ×4), "
             "where rank 1 called all_gather(float32 ×2)")
    indexed = read_for_summary(trace)
    assert indexed is not None and [mismatch.text for mismatch in indexed.mismatches] == [found]
    text, _ = _replayed(trace, "--headless", capsys)
    assert [line for line in text.splitlines() if "mismatch" in line] == [found]
    assert msgspec.json.decode(_replayed(trace, "--json", capsys)[0])["mismatches"] == [found]


def test_two_communicators_of_one_name_are_not_compared_on_the_columns(tmp_path):
    trace = write_trace(tmp_path / "t.cvz", two_pairs_of_one_name())
    indexed = read_for_summary(trace)
    assert indexed is not None and indexed.mismatches == []
