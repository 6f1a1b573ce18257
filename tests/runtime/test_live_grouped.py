"""A grouped feed (a job read through relays) says each call's news once a reading: one CallRanks
event per call and party of ranks agreeing on its sizes, each rank's state and time a column.

Hand-made Flight Recorder answers of 5 ranks on two groups — the world (ranks 0–4) and a subgroup
of ranks 1 and 3 — read through the real RecorderReader and Feed. The expected columns are worked
out here from the answers (which rank issued what, at which time, and retired it), not from collviz;
the viewer's log of the grouped events is then compared with its log of the same readings' per-rank
events, view by view.
"""

from __future__ import annotations

import json
import math

import msgspec

from collviz.app.cli import main as cli_main
from collviz.app.model.log import EventLog
from collviz.app.model.trace_index import index_trace
from collviz.app.model.view import view_at
from collviz.runtime.live.feed import Feed
from collviz.runtime.live.recorder_reader import RecorderReader
from collviz.runtime.live.workers import Worker
from collviz.runtime.observation.fingerprints import FingerprintCheck
from collviz.runtime.wire.call_ranks import per_rank_events
from collviz.runtime.wire.protocol import CallRanks, Collective, Phase, RunStart, Stall, decode, encode
from collviz.runtime.sessions.contract import RunOutcome
from collviz.runtime.sessions.intake import Intake
from collviz.runtime.wire.trace import TraceWriter, read_trace

from support.attach_job import KeptEvents, asking
from support.synthetic import write_trace

RANKS = range(5)
WORKERS = [Worker(rank, f"rank{rank}.sock") for rank in RANKS]
CONFIG = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3, 4]"},
          "1": {"name": "1", "desc": "pair", "ranks": "[1, 3]"}}


def _entry(group: str, seq: int, made_ns: int, retired: bool, count: int = 4) -> dict:
    return {"collective_seq_id": seq, "profiling_name": "gloo:all_reduce", "process_group": [group, CONFIG[group]["desc"]],
            "input_sizes": [[count]], "output_sizes": [[count]], "input_dtypes": ["Float"],
            "output_dtypes": ["Float"], "time_created_ns": made_ns, "retired": retired, "state": "scheduled",
            "is_p2p": False}


def _answer(entries: list[dict]) -> bytes:
    return json.dumps({"version": "2.10", "pg_config": CONFIG, "pg_status": {}, "entries": entries}).encode()


def _first() -> dict[int, bytes]:
    """World call #1: ranks 0–3 retired it, rank 4 is inside (made at 4,000 + rank ns). Pair call
    #1 (ranks 1 and 3): rank 1 retired it, rank 3 is inside (made at 9,000 + rank ns). World call #2:
    rank 0 is inside it with 4 floats, rank 2 with 8 (a party of its own); ranks 1, 3, 4 not yet."""
    answers = {}
    for rank in RANKS:
        entries = [_entry("0", 1, 4000 + rank, retired=rank != 4)]
        if rank in (1, 3):
            entries.append(_entry("1", 1, 9000 + rank, retired=rank == 1))
        if rank in (0, 2):
            entries.append(_entry("0", 2, 12000 + rank, retired=False, count=4 if rank == 0 else 8))
        answers[rank] = _answer(entries)
    return answers


def _second() -> dict[int, bytes]:
    """Every call above retired on every rank that made it, and ranks 1, 3, 4 made world call #2
    (4 floats, at 12,000 + rank ns) and retired it."""
    answers = {}
    for rank in RANKS:
        entries = [_entry("0", 1, 4000 + rank, retired=True)]
        if rank in (1, 3):
            entries.append(_entry("1", 1, 9000 + rank, retired=True))
        entries.append(_entry("0", 2, 12000 + rank, retired=True, count=8 if rank == 2 else 4))
        answers[rank] = _answer(entries)
    return answers


def _fed(grouped: bool) -> list[list]:
    """Each reading's events, from a grouped feed or a per-rank one."""
    readings = [_first(), _second()]
    ask, _ = asking(readings)
    sink = KeptEvents()
    reader = RecorderReader(WORKERS, ask=ask)
    feed = Feed(sink, "t", reader, now_ns=lambda: 100 * 10**9, grouped=grouped)
    out = []
    for _ in readings:
        feed.take(reader.read())
        out.append(sink.events)
        sink.events = []
    return out


def _columns(event: CallRanks) -> tuple:
    """The event's call and its columns, the times relative to ``made`` (the feed moves the source's
    times onto the events' clock by one offset: differences are the source's)."""
    base = 4000 if event.group_seq == 1 and event.group_ranks == [0, 1, 2, 3, 4] else 9000 if event.group_ranks == [1, 3] else 12000
    offset = event.issued_ns[0] - (base + event.issued[0]) if event.issued else event.ended_ns[0] - (base + event.ended[0])
    return ((event.group_ranks, event.group_seq, event.count), event.issued, [t - offset for t in event.issued_ns],
            event.ended, [t - offset for t in event.ended_ns], event.durations_ns)


def test_each_call_is_one_event_a_reading_carrying_each_ranks_state_and_time():
    first, second = ([_columns(e) for e in events if isinstance(e, CallRanks)] for events in _fed(grouped=True))
    world, pair = [0, 1, 2, 3, 4], [1, 3]
    assert first == [
        ((world, 1, 4), [0, 1, 2, 3, 4], [4000, 4001, 4002, 4003, 4004], [0, 1, 2, 3], [4000, 4001, 4002, 4003],
         [None] * 4),
        ((pair, 1, 4), [1, 3], [9001, 9003], [1], [9001], [None]),
        ((world, 2, 4), [0], [12000], [], [], []),
        ((world, 2, 8), [2], [12002], [], [], []),  # rank 2's sizes differ: a party, and an event, of its own
    ]
    assert second == [
        ((world, 1, 4), [], [], [4], [4004], [None]),
        ((pair, 1, 4), [], [], [3], [9003], [None]),
        ((world, 2, 4), [1, 3, 4], [12001, 12003, 12004], [0, 1, 3, 4], [12000, 12001, 12003, 12004], [None] * 4),
        ((world, 2, 8), [], [], [2], [12002], [None]),
    ]


def test_no_rank_event_is_made_and_the_event_travels_as_it_was_made():
    for events in _fed(grouped=True):
        assert not [e for e in events if isinstance(e, (Phase, Collective))]
        for event in events:
            assert decode(encode(event)) == event


def test_the_rank_that_called_other_sizes_is_found_from_the_grouped_events():
    check = FingerprintCheck()
    for events in _fed(grouped=True):
        for event in events:
            check.observe(event)
    found = check.check(None)
    assert [(d.group_seq, d.odd_ranks) for d in found] == [(2, [2])]
    assert found[0].calls == {0: "all_reduce(float32 ×4)", 1: "all_reduce(float32 ×4)", 2: "all_reduce(float32 ×8)",
                              3: "all_reduce(float32 ×4)", 4: "all_reduce(float32 ×4)"}


def _unstamped(ranks: tuple) -> list:
    """Each rank's view, its call's stamp left out (the two feeds' clocks differ by their start)."""
    return [view._replace(collective=view.collective and msgspec.structs.replace(view.collective, seq=0, t_ns=0))
            for view in ranks]


def test_the_viewer_shows_the_grouped_events_as_it_shows_each_ranks_events():
    grouped, per_rank = EventLog(), EventLog()
    for by_call, by_rank in zip(_fed(grouped=True), _fed(grouped=False)):
        grouped.extend(by_call)
        per_rank.extend(by_rank)
        for rank in RANKS:  # each rank's begins and ends, in order, as its own events said them
            as_grouped = [(type(e).__name__, e.edge, e.group_seq, e.count) for e in grouped.rank(rank).collectives.events]
            as_ranks = [(type(e).__name__, e.edge, e.group_seq, e.count) for e in per_rank.rank(rank).collectives.events]
            assert as_grouped == as_ranks
            assert [e.index for e in grouped.rank(rank).phases.events] == [e.index for e in per_rank.rank(rank).phases.events]
        mine, theirs = view_at(grouped, len(grouped)), view_at(per_rank, len(per_rank))
        assert _unstamped(mine.ranks) == _unstamped(theirs.ranks)
        assert grouped.step_ends and len(grouped.step_ends) == len(per_rank.step_ends)
        assert {n: p.call_keys for n, p in grouped.phases.items()} == {n: p.call_keys for n, p in per_rank.phases.items()}


def test_a_grouped_event_read_per_rank_is_each_ranks_events():
    (first, _) = _fed(grouped=True)
    event = next(e for e in first if isinstance(e, CallRanks) and e.group_ranks == [1, 3])
    expanded = [(type(e).__name__, e.rank, e.edge, e.seq) for e in per_rank_events(event)]
    # each rank's own numbers: its RankStart 0, world #1's begins 1, 2 and ends 3, 4, then the pair's
    assert expanded == [("Phase", 1, "begin", 5), ("Collective", 1, "begin", 6), ("Phase", 3, "begin", 5),
                        ("Collective", 3, "begin", 6), ("Collective", 1, "end", 7), ("Phase", 1, "end", 8)]


def test_a_trace_of_grouped_events_opens_as_the_events_were_filed(tmp_path):
    start = RunStart(run="t", rank=-1, seq=0, t_ns=0, scenario="attach", world_size=5, backend="gloo", device_kind="cpu",
                     backend_reason="attached", mode="live")
    events = [start] + [msgspec.structs.replace(e, seq=n + 1) for n, e in enumerate(sum(_fed(grouped=True), []))]
    path = write_trace(tmp_path / "grouped.cvz", events)
    opened, _ = index_trace(path)
    filed = EventLog(read_trace(path).events)
    assert list(filed.events) == events
    for rank in RANKS:
        assert list(opened.rank(rank).collectives.index) == list(filed.rank(rank).collectives.index)
        assert list(opened.rank(rank).collectives.events) == list(filed.rank(rank).collectives.events)
    assert view_at(opened, len(opened)) == view_at(filed, len(filed))


def _recorded(path, grouped: bool):
    """The readings' events as ``attach --listen --record`` takes them in (the session's intake,
    writing its trace at ``path``), from a grouped feed or a per-rank one; the intake."""
    readings = [_first(), _second()]
    ask, _ = asking(readings)
    intake = Intake(TraceWriter(path), math.inf, "t")
    reader = RecorderReader(WORKERS, ask=ask)
    feed = Feed(intake, "t", reader, now_ns=lambda: 100 * 10**9, grouped=grouped, _clock_ns=0)
    for _ in readings:
        feed.take(reader.read())
    feed.close()
    intake.close(RunOutcome("ok", "the job ended", 0))
    return intake


def _replayed(path, capsys, *options: str) -> str:
    assert cli_main(["replay", str(path), *options]) == 0
    out, err = capsys.readouterr()
    return out + err


def test_a_recorded_trace_holds_each_ranks_own_events_and_replays_as_the_per_rank_news(tmp_path, capsys):
    _recorded(tmp_path / "grouped.cvz", grouped=True)
    _recorded(tmp_path / "ranks.cvz", grouped=False)
    grouped, ranks = read_trace(tmp_path / "grouped.cvz"), read_trace(tmp_path / "ranks.cvz")
    assert (grouped.warning, ranks.warning) == ("", "")
    assert not [e for e in grouped.events if isinstance(e, CallRanks)]
    # 5 RankStarts; world #1: 5 ranks × (2 begins + 2 ends); pair #1: 2 × 4; world #2: 5 × 4; 5 RankEnds; RunStart, RunEnd
    assert len(grouped.events) == 5 + 20 + 8 + 20 + 5 + 2
    for rank in RANKS:  # each rank's own events, numbered 0, 1, 2, … in its own sequence, as a per-rank feed numbers them
        mine = [e for e in grouped.events if e.rank == rank]
        assert [e.seq for e in mine] == list(range(len(mine)))
        assert sorted(e.seq for e in ranks.events if e.rank == rank) == [e.seq for e in mine]
    text = _replayed(tmp_path / "grouped.cvz", capsys, "--headless")
    assert text == _replayed(tmp_path / "ranks.cvz", capsys, "--headless")
    assert [line.split("  ")[1] for line in text.splitlines() if line.startswith("phase ")] == [
        "all_reduce #1 on group 0 (default_pg)", "all_reduce #1 on group 1 (pair)", "all_reduce #2 on group 0 (default_pg)"]
    assert ("rank 2 called all_reduce(float32 ×8), where ranks 0, 1, 3, 4 called all_reduce(float32 ×4)" in text
            and "· 60 events ·" in text)
    as_json = json.loads(_replayed(tmp_path / "grouped.cvz", capsys, "--json"))
    assert as_json == json.loads(_replayed(tmp_path / "ranks.cvz", capsys, "--json"))  # each rank's figures, in another order


def test_the_intakes_watch_finds_the_hang_in_grouped_events():
    """A finite timeout: after the first reading, rank 4 waits in world #1 (ranks 0 and 2 are in #2,
    ranks 1 and 3 have left #1) and rank 3 waits in pair #1, which rank 1 completed."""
    found = {}
    for grouped in (True, False):
        intake = Intake(None, 1.0, "t")
        readings = [_first()]
        ask, _ = asking(readings)
        reader = RecorderReader(WORKERS, ask=ask)
        Feed(intake, "t", reader, now_ns=lambda: 100 * 10**9, grouped=grouped, _clock_ns=-10**12).take(reader.read())
        intake.check()
        found[grouped] = [e for e in intake.take_pending() if isinstance(e, Stall)]
    assert [(s.group_seq, s.waiting, s.elsewhere) for s in found[True]] == [
        (1, [4], ["rank 0 is in all_reduce #2", "rank 1 never arrived (last seen in phase 1 'all_reduce #1 on group 1 (pair)')",
                  "rank 2 is in all_reduce #2", "rank 3 never arrived (last seen in phase 1 'all_reduce #1 on group 1 (pair)')"]),
        (1, [3], ["rank 1 never arrived (last seen in phase 1 'all_reduce #1 on group 1 (pair)')"])]
    assert [s.text for s in found[True]] == [s.text for s in found[False]]


# An 8-rank live log worked out by hand: the pair group "1" (ranks 1, 3, 5, 7) and the world's group
# "0" calls interleaved, their ranks listed in orders other than theirs, rank 1 never ending the
# pair's call, rank 3 in both groups, rank 2 saying its own events between grouped ones.
NARRATION = "two groups' calls"
PAIR = dict(op="all_gather", group="1", group_ranks=[1, 3, 5, 7], group_seq=1, dtype="float32", count=2, bytes_in=8,
            bytes_out=32, algo_bytes=24)
WORLD = dict(op="all_reduce", group="0", group_ranks=list(range(8)), group_seq=1, dtype="float32", count=4,
             bytes_in=16, bytes_out=16, algo_bytes=28)
WORLD_2 = {**WORLD, "group_seq": 2}


def _grouped(call: dict, **columns) -> CallRanks:
    return CallRanks(run="t", rank=-1, seq=0, t_ns=0, phase=0, name="step 0", narration=NARRATION, **call, **columns)


def _phase(rank: int, seq: int, t_ns: int, edge: str) -> Phase:
    return Phase(run="t", rank=rank, seq=seq, t_ns=t_ns, index=0, name="step 0", edge=edge,
                 narration=NARRATION if edge == "begin" else "")


def _call(call: dict, rank: int, seq: int, t_ns: int, edge: str, duration_ns: int | None = None) -> Collective:
    return Collective(run="t", rank=rank, seq=seq, t_ns=t_ns, phase=0, edge=edge, duration_ns=duration_ns, **call)


PAIR_FIRST = _grouped(PAIR, issued=[5, 1, 7, 3], issued_ns=[1005, 1001, 1007, 1003], issued_seq=[1, 1, 1, 1],
                      ended=[3, 5], ended_ns=[1113, 1130], durations_ns=[110, 125], ended_seq=[3, 3])
TWO_GROUPS = [
    RunStart(run="t", rank=-1, seq=0, t_ns=0, scenario="attach", world_size=8, backend="gloo", device_kind="cpu",
             backend_reason="attached", mode="live"),
    PAIR_FIRST,  # 1
    _grouped(WORLD, issued=[6, 3, 0], issued_ns=[2006, 2003, 2000], issued_seq=[1, 5, 1],  # 2
             ended=[3], ended_ns=[2053], durations_ns=[None], ended_seq=[7]),
    _grouped(PAIR, ended=[7], ended_ns=[1207], durations_ns=[200], ended_seq=[3]),  # 3
    _grouped(WORLD, issued=[4], issued_ns=[2004], issued_seq=[1],  # 4
             ended=[6, 0], ended_ns=[2096, 2095], durations_ns=[90, 95], ended_seq=[3, 3]),
    _phase(2, 1, 2002, "begin"), _call(WORLD, 2, 2, 2002, "begin"),  # 5, 6: rank 2's own
    _call(WORLD, 2, 3, 2152, "end", 150), _phase(2, 4, 2152, "end"),  # 7, 8
    _grouped(WORLD, ended=[4], ended_ns=[2304], durations_ns=[300], ended_seq=[3]),  # 9
    _grouped(WORLD_2, issued=[2], issued_ns=[3002], issued_seq=[5]),  # 10
]
PHASES = {  # each rank's Phase events: (log position, event)
    0: [(2, _phase(0, 1, 2000, "begin")), (4, _phase(0, 4, 2095, "end"))],
    1: [(1, _phase(1, 1, 1001, "begin"))],
    2: [(5, _phase(2, 1, 2002, "begin")), (8, _phase(2, 4, 2152, "end")), (10, _phase(2, 5, 3002, "begin"))],
    3: [(1, _phase(3, 1, 1003, "begin")), (1, _phase(3, 4, 1113, "end")), (2, _phase(3, 5, 2003, "begin")),
        (2, _phase(3, 8, 2053, "end"))],
    4: [(4, _phase(4, 1, 2004, "begin")), (9, _phase(4, 4, 2304, "end"))],
    5: [(1, _phase(5, 1, 1005, "begin")), (1, _phase(5, 4, 1130, "end"))],
    6: [(2, _phase(6, 1, 2006, "begin")), (4, _phase(6, 4, 2096, "end"))],
    7: [(1, _phase(7, 1, 1007, "begin")), (3, _phase(7, 4, 1207, "end"))],
}
CALLS = {  # each rank's Collective events: (log position, event)
    0: [(2, _call(WORLD, 0, 2, 2000, "begin")), (4, _call(WORLD, 0, 3, 2095, "end", 95))],
    1: [(1, _call(PAIR, 1, 2, 1001, "begin"))],
    2: [(6, _call(WORLD, 2, 2, 2002, "begin")), (7, _call(WORLD, 2, 3, 2152, "end", 150)),
        (10, _call(WORLD_2, 2, 6, 3002, "begin"))],
    3: [(1, _call(PAIR, 3, 2, 1003, "begin")), (1, _call(PAIR, 3, 3, 1113, "end", 110)),
        (2, _call(WORLD, 3, 6, 2003, "begin")), (2, _call(WORLD, 3, 7, 2053, "end"))],
    4: [(4, _call(WORLD, 4, 2, 2004, "begin")), (9, _call(WORLD, 4, 3, 2304, "end", 300))],
    5: [(1, _call(PAIR, 5, 2, 1005, "begin")), (1, _call(PAIR, 5, 3, 1130, "end", 125))],
    6: [(2, _call(WORLD, 6, 2, 2006, "begin")), (4, _call(WORLD, 6, 3, 2096, "end", 90))],
    7: [(1, _call(PAIR, 7, 2, 1007, "begin")), (3, _call(PAIR, 7, 3, 1207, "end", 200))],
}


def test_each_rank_reads_its_own_edges_of_a_subgroups_and_the_worlds_grouped_calls():
    log = EventLog(TWO_GROUPS)
    for rank in range(8):
        assert list(log.rank(rank).phases.events) == [event for _, event in PHASES[rank]], rank
        assert list(log.rank(rank).collectives.events) == [event for _, event in CALLS[rank]], rank
        assert list(log.rank(rank).collectives.index) == [position for position, _ in CALLS[rank]], rank
        assert log.rank(rank).collectives.events[-1] == CALLS[rank][-1][1]
    # the step's collective ends in log order, each event's in the order of its ``ended``; rank 2's own among them
    ends = [CALLS[3][1], CALLS[5][1], CALLS[3][3], CALLS[7][1], CALLS[6][1], CALLS[0][1], CALLS[2][1], CALLS[4][1]]
    assert list(log.phase(0).collectives.events) == [event for _, event in ends]
    assert log.phase(0).collectives.events[3:6] == [event for _, event in ends[3:6]]
    assert list(log.phase(0).collectives.index) == [position for position, _ in ends]


def test_a_frame_shows_each_ranks_latest_call_read_from_the_grouped_events():
    log = EventLog(TWO_GROUPS)
    for cursor in range(len(TWO_GROUPS) + 1):
        shown = [view.collective for view in view_at(log, cursor).ranks]
        latest = [next((event for position, event in reversed(CALLS[rank]) if position < cursor), None)
                  for rank in range(8)]
        assert shown == latest, cursor


def test_a_grouped_event_read_per_rank_is_each_ranks_begins_then_ends_in_its_columns_order():
    assert per_rank_events(PAIR_FIRST) == [
        PHASES[5][0][1], CALLS[5][0][1], PHASES[1][0][1], CALLS[1][0][1], PHASES[7][0][1], CALLS[7][0][1],
        PHASES[3][0][1], CALLS[3][0][1], CALLS[3][1][1], PHASES[3][1][1], CALLS[5][1][1], PHASES[5][1][1]]
