"""A hand-made NCCL Inspector job with four ranks and three communicators, every figure counted here
from the records written (nothing from collviz's reading of them).

- ``W``, the world (4 ranks, processes p0–p3): AllReduce #0 of 1 MiB on every rank, each rank
  timed differently (r0 100, r1 150, r2 120, r3 110 µs), written at dump ``BASE + 1,000 µs``
  without the verbose trace (so each call is placed to end at its dump); AllReduce #2 on rank 0
  only (#1 sampled away); AllGather #0 of 64 KiB sent per rank with the verbose trace (two channels'
  kernels starting at ``BASE + 500`` and ``BASE + 520 µs``), rank 2's record written without its
  fields' ``coll_`` prefix (as issue #41's real record is).
- ``S``, 2 ranks on processes p1 and p3 (job ranks 1 and 3: no rank 0): ReduceScatter #0 receiving
  4 KiB per rank, 50 µs; p1's file holds it twice (two dumps wrote it).
- ``X``, 2 ranks on processes p4 and p5 that hold no world record: Broadcast #0 of 8 B, 10 µs,
  shown side by side as job ranks 4 and 5.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collviz.runtime.sources.nccl_inspector import import_inspector
from collviz.runtime.wire.protocol import Collective, Phase

BASE = 1_764_097_200_000_000
W, S, X = "0xworld", "0xsub", "0xapart"
AR_US = {0: 100, 1: 150, 2: 120, 3: 110}


def _record(comm: str, rank: int, nranks: int, coll: str, sn: int, size: int, exec_us: int, *,
            kernels: tuple[int, ...] = (), prefixed: bool = True) -> dict:
    perf = {"sn": sn, "msg_size_bytes": size, "exec_time_us": exec_us, "timing_source": "kernel_gpu",
            "algobw_gbs": 1.0, "busbw_gbs": 1.0}
    if kernels:
        perf["event_trace_ts"] = {"kernel_events": [{"kernel_start_ts": BASE + t} for t in kernels]}
    perf = {f"coll_{k}" if prefixed else k: v for k, v in perf.items()}
    return {"header": {"id": comm, "rank": rank, "n_ranks": nranks, "nnodes": 1},
            "metadata": {"inspector_output_format_version": "v4.0", "dump_timestamp_us": BASE + 1_000},
            "coll_perf": {"coll": coll, **perf}}


def _files() -> list[tuple[Path, str]]:
    lines: dict[int, list[dict]] = {p: [] for p in range(6)}
    for rank in range(4):
        lines[rank].append(_record(W, rank, 4, "AllReduce", 0, 1 << 20, AR_US[rank]))
        lines[rank].append(_record(W, rank, 4, "AllGather", 0, 1 << 16, 40, kernels=(520, 500), prefixed=rank != 2))
    lines[0].append(_record(W, 0, 4, "AllReduce", 2, 1 << 20, 100))
    for process, rank in ((1, 0), (3, 1)):
        lines[process].append(_record(S, rank, 2, "ReduceScatter", 0, 4096, 50))
    lines[1].append(lines[1][-1])
    for process, rank in ((4, 0), (5, 1)):
        lines[process].append(_record(X, rank, 2, "Broadcast", 0, 8, 10))
    return [(Path(f"node0-pid{100 + p}.log"), "".join(json.dumps(r) + "\n" for r in records))
            for p, records in lines.items()]


@pytest.fixture(scope="module")
def imported():
    warnings: list[str] = []
    run = import_inspector(_files(), warnings)
    ends = {}
    for event in run.events:
        if isinstance(event, Collective):
            ends.setdefault((event.op, event.group_seq, event.rank, event.edge), []).append(event)
    return warnings, ends


def test_the_warnings_say_the_sampled_call_and_the_communicator_apart(imported):
    warnings, _ = imported
    assert warnings == [
        "communicator 0xapart (2 ranks) shares no process with those placed before it: shown side by side, "
        "as ranks 4, 5 of the job",
        # rank 0's AllReduce numbers 0 and 2: #1 between them
        "1 calls numbered between the records are not in the files: the Inspector writes each communicator's "
        "last completed calls once per dump interval (sampled, not lost)",
    ]


def test_each_call_is_numbered_from_1_and_timed_in_ns(imported):
    _, ends = imported
    for rank, exec_us in AR_US.items():
        [end] = ends["all_reduce", 1, rank, "end"]
        [begin] = ends["all_reduce", 1, rank, "begin"]
        assert end.duration_ns == exec_us * 1000
        assert begin.t_ns == (BASE + 1_000 - exec_us) * 1000  # placed to end at its dump
    assert [e.rank for e in ends["all_reduce", 3, 0, "end"]] == [0]  # NCCL's #2


def test_a_verbose_call_starts_at_its_first_kernel_and_an_unprefixed_record_is_read(imported):
    _, ends = imported
    for rank in range(4):
        [begin] = ends["all_gather", 1, rank, "begin"]
        assert begin.t_ns == (BASE + 500) * 1000
        [end] = ends["all_gather", 1, rank, "end"]
        assert (end.bytes_in, end.bytes_out) == (1 << 16, 4 << 16)  # 64 KiB sent, × 4 ranks gathered


def test_the_subgroups_reduce_scatter_has_its_sizes_and_is_shown_once(imported):
    _, ends = imported
    for rank in (1, 3):
        [end] = ends["reduce_scatter", 1, rank, "end"]  # once, though p1's file wrote it twice
        assert (end.group_ranks, end.bytes_in, end.bytes_out) == ([1, 3], 2 * 4096, 4096)
    assert not any(key[0] == "reduce_scatter" and key[2] in (0, 2) for key in ends)
    assert [e.group_ranks for e in ends["broadcast", 1, 4, "end"]] == [[4, 5]]


def test_a_call_written_twice_is_narrated_once():
    run = import_inspector(_files(), [])
    [narration] = {e.narration for e in run.events
                   if isinstance(e, Phase) and e.edge == "begin" and e.name.startswith("reduce_scatter")}
    # NCCL's figures of each rank once (r1 50 µs, r3 50 µs), and the two ranks of its 2 named once each
    assert narration.count("r1 50 µs") == 1 and narration.count("r3 50 µs") == 1
    assert "Records of ranks 1, 3 of 2 (" in narration
