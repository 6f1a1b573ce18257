"""A live reading's calls and waits are keyed by their group's identity (its name and the backend
that numbered the call), never by the label a reading words them with: a group made with
``"cpu:gloo,cuda:nccl"`` is labelled ``0 (default_pg)`` in a reading that holds one backend's
calls and ``0 (default_pg) on nccl`` in one that holds both, and each call must still be shown
once, under one name, and its wait named as the user first read it.

Hand-made Flight Recorder answers of 4 ranks, read through the real RecorderReader and Feed; the
expected steps are counted here from the answers, not from collviz.
"""

from __future__ import annotations

import json

from collviz.runtime.live.feed import Feed
from collviz.runtime.live.recorder_reader import RecorderReader
from collviz.runtime.live.workers import Worker
from collviz.runtime.wire.protocol import Collective, Phase, Stall

from support.attach_job import KeptEvents, asking

RANKS = range(4)
WORKERS = [Worker(rank, f"rank{rank}.sock") for rank in RANKS]
PLAIN, GLOO = "0 (default_pg)", "0 (default_pg) on gloo"


def _answer(nccl: int, gloo: int = 0, first_gloo: int = 1, inside: int = 0) -> bytes:
    """One rank's answer: nccl all_reduces #1..``nccl`` (#``inside`` not completed) and gloo
    barriers #``first_gloo``..``gloo`` on the default group, issued in that order."""
    calls = [("nccl", "all_reduce", seq) for seq in range(1, nccl + 1)]
    calls += [("gloo", "barrier", seq) for seq in range(first_gloo, gloo + 1)]
    entries = [{"collective_seq_id": seq, "profiling_name": f"{backend}:{op}", "process_group": ["0", "default_pg"],
                "input_sizes": [[4]], "output_sizes": [[4]], "input_dtypes": ["Float"], "output_dtypes": ["Float"],
                "time_created_ns": 1000 * (n + 1), "retired": seq != inside or backend != "nccl", "state": "scheduled",
                "is_p2p": False} for n, (backend, op, seq) in enumerate(calls)]
    return json.dumps({"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
                       "pg_status": {}, "entries": entries}).encode()


def _fed(readings: list[dict[int, bytes]]) -> list:
    ask, _ = asking(readings)
    sink = KeptEvents()
    reader = RecorderReader(WORKERS, ask=ask)
    feed = Feed(sink, "t", reader, now_ns=lambda: 100 * 10**9)
    for _ in readings:
        feed.take(reader.read())
    return sink.events


def test_a_call_whose_groups_label_gains_its_backend_is_shown_once_under_its_first_name():
    readings = [
        {rank: _answer(nccl=3) for rank in RANKS},  # one backend: labelled "0 (default_pg)"
        {rank: _answer(nccl=3, gloo=2) for rank in RANKS},  # both: "… on nccl" and "… on gloo" in this reading
        {rank: _answer(nccl=3 if rank == 3 else 4, gloo=2, inside=4) for rank in RANKS},  # ranks 0-2 wait in #4
        {rank: _answer(nccl=3 if rank == 3 else 4, gloo=2, inside=4) for rank in RANKS},  # confirmed
    ]
    events = _fed(readings)
    for rank in RANKS:
        begun = [(e.op, e.group, e.group_seq) for e in events
                 if isinstance(e, Collective) and e.edge == "begin" and e.rank == rank]
        nccl = [("all_reduce", PLAIN, seq) for seq in range(1, 4 if rank == 3 else 5)]
        assert sorted(begun) == sorted(nccl + [("barrier", GLOO, 1), ("barrier", GLOO, 2)]), f"rank {rank}"
        steps = [e.index for e in events if isinstance(e, Phase) and e.edge == "begin" and e.rank == rank]
        assert len(steps) == len(set(steps)) == len(begun), "each call one step, begun once"
    stalls = [e for e in events if isinstance(e, Stall)]
    assert [(e.group, e.group_seq, e.waiting) for e in stalls] == [(PLAIN, 4, [0, 1, 2])]
    assert stalls[0].text.startswith(f"all_reduce #4 on group {PLAIN}: ranks 0–2 waiting ")
    assert "rank 3 is missing from the call" in stalls[0].text


def test_a_second_backends_calls_read_alone_are_not_taken_for_the_firsts():
    """The nccl calls leave the recorder's tail before the first gloo call is read: the gloo calls
    are labelled ``0 (default_pg)`` in that reading, as the nccl ones were in the first."""
    readings = [
        {rank: _answer(nccl=2) for rank in RANKS},
        {rank: _answer(nccl=0, gloo=3, first_gloo=1) for rank in RANKS},
    ]
    events = _fed(readings)
    for rank in RANKS:
        begun = [(e.op, e.group, e.group_seq) for e in events
                 if isinstance(e, Collective) and e.edge == "begin" and e.rank == rank]
        assert begun == [("all_reduce", PLAIN, 1), ("all_reduce", PLAIN, 2),
                         ("barrier", GLOO, 1), ("barrier", GLOO, 2), ("barrier", GLOO, 3)], f"rank {rank}"
