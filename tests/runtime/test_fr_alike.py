"""Dumps that differ only in their ranks' own times are read into columns once, and each dump's
columns are still exactly what reading it alone gives: its own times, durations and deadlines, its
own notes where its own fields make its reading differ.

Hand-made dumps of 5 ranks on two groups (the world and ranks 1 and 3); each rank's times are its
own. The reference is ``read_columns`` dump by dump; that the shared columns are really shared is
counted with a spy on it.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from collviz.runtime.sources import fr_alike
from collviz.runtime.sources.fr_alike import read_alike
from collviz.runtime.sources.fr_columns import DumpColumns, read_columns
from collviz.runtime.sources.names import parse_ranks

CONFIG = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3, 4]"},
          "1": {"name": "1", "desc": "pair", "ranks": "[1, 3]"}}


def _entry(group: str, seq: int, rank: int, record: int, *, retired: bool = True, duration_ms: float | None = None,
           timeout_ms: int = 600_000, started: int = 0) -> dict:
    return {"record_id": record, "collective_seq_id": seq, "profiling_name": "gloo:all_reduce",
            "process_group": [group, CONFIG[group]["desc"]], "input_sizes": [[4]], "output_sizes": [[4]],
            "input_dtypes": ["Float"], "output_dtypes": ["Float"], "time_created_ns": 1_000_000 * seq + 17 * rank,
            "time_discovered_started_ns": started, "duration_ms": duration_ms, "timeout_ms": timeout_ms,
            "retired": retired, "state": "completed" if retired else "started", "thread_id": str(100 + rank),
            "is_p2p": False}


def _dump(rank: int, **changes) -> dict:
    """World calls #1 and #2 (the second still running, started at 5,000 + rank ns), and for ranks 1
    and 3 the pair's call #1 between them; each rank's durations its own."""
    entries = [_entry("0", 1, rank, 0, duration_ms=0.5 + rank)]
    if rank in (1, 3):
        entries.append(_entry("1", 1, rank, 1, duration_ms=0.25 * rank))
    entries.append(_entry("0", 2, rank, len(entries), retired=False, started=5000 + rank))
    for row, change in changes.items():
        entries[int(row[1:])].update(change)
    return {"version": "2.10", "pg_config": CONFIG, "pg_status": {}, "entries": entries}


def _ranks(value: object) -> tuple[int, ...] | None:
    return parse_ranks(value) if isinstance(value, str) else None


def _same(mine: DumpColumns, alone: DumpColumns) -> None:
    for field in fields(DumpColumns):
        ours, theirs = getattr(mine, field.name), getattr(alone, field.name)
        if isinstance(theirs, np.ndarray):
            assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs), field.name
        else:
            assert ours == theirs, field.name


@pytest.fixture
def reads(monkeypatch) -> list[int]:
    """How many dumps ``read_alike`` read on their own (the rest shared a first reading)."""
    counted: list[int] = []

    def counting(content, ranks_of):
        counted.append(1)
        return read_columns(content, ranks_of)

    monkeypatch.setattr(fr_alike, "read_columns", counting)
    return counted


def test_each_rank_has_its_own_times_durations_and_deadlines_from_one_reading_per_shape(reads):
    contents = [_dump(rank) for rank in range(5)]
    read = read_alike(contents, _ranks)
    for content, mine in zip(contents, read):
        _same(mine, read_columns(content, _ranks))
    assert len(reads) == 2  # ranks 0, 2, 4 share one shape; ranks 1 and 3 (in the pair) another
    assert read[3].t_ns.tolist() == [1_000_051, 1_000_051, 2_000_051]  # worked out: 10⁶·seq + 17·rank
    assert read[3].duration_ns.tolist() == [3_500_000, 750_000, -1]  # 0.5 + 3 ms, 0.25·3 ms, still running
    assert read[4].deadlines == {1: 5004 + 600_000 * 1_000_000}  # started at 5,000 + 4 ns, 600 s allowed


def test_a_rank_whose_own_fields_make_its_reading_differ_is_read_on_its_own(reads):
    contents = [_dump(0), _dump(2, e0={"record_id": 7}),  # listed out of its record order: read in that order
                _dump(4, e0={"duration_ms": -3.0})]  # completed in an impossible time: noted, untimed
    read = read_alike(contents, _ranks)
    for content, mine in zip(contents, read):
        _same(mine, read_columns(content, _ranks))
    assert len(reads) == 3
    assert read[1].notes and read[1].seq.tolist() == [2, 1]
    assert read[2].notes and read[2].duration_ns.tolist() == [-1, -1]


def test_a_shape_whose_first_reading_noted_something_is_read_dump_by_dump(reads):
    contents = [_dump(rank, e1={"collective_seq_id": 4}) for rank in (0, 2, 4)]  # calls #2, #3 missing: noted
    read = read_alike(contents, _ranks)
    for content, mine in zip(contents, read):
        _same(mine, read_columns(content, _ranks))
    assert len(reads) == 3 and all(columns.notes for columns in read)
