"""The view model: (event log, cursor) → view state, tested on synthetic protocol events."""

from __future__ import annotations

import time

from collviz.app.model import sources
from collviz.app.model import (
    EventLog,
    ViewAhead,
    faster,
    load_trace,
    next_boundary,
    previous_boundary,
    pump_session,
    seek_step,
    slower,
    step_at,
    view_at,
)
from collviz.app.widgets.rank_panel import rank_lines
from collviz.runtime.wire.protocol import Buffer, Freed, Gate, Memory, Phase, Stall

from support.synthetic import PHASES, all_gather_events, write_trace


def _buffers(view, rank):
    return {b.name: b for b in view.ranks[rank].buffers}


def test_each_step_shows_exactly_that_steps_buffers():
    events = all_gather_events()
    log = EventLog(events)
    assert len(log.step_ends) == len(PHASES)
    for step, end in enumerate(log.step_ends):
        view = view_at(log, end)
        assert view.step == step
        assert view.phase_name == PHASES[step]
        for rank in range(4):
            expected: dict[str, Buffer] = {}
            for event in events[:end]:
                if isinstance(event, Buffer) and event.rank == rank and event.phase <= step:
                    expected[event.name] = event
            assert _buffers(view, rank) == expected


def test_setup_then_gathered_values_and_provenance():
    log = EventLog(all_gather_events())
    before = view_at(log, log.step_ends[0])
    out = _buffers(before, 2)["output"]
    assert out.moment == "before" and all(run.ranks == [] for run in out.provenance)
    assert _buffers(before, 2)["input"].values == [20.0, 21.0]
    assert before.transfers == ()
    after = view_at(log, log.step_ends[1])
    out = _buffers(after, 2)["output"]
    assert out.values == [0.0, 1.0, 10.0, 11.0, 20.0, 21.0, 30.0, 31.0]
    assert [run.ranks for run in out.provenance] == [[0], [1], [2], [3]]
    assert len(after.transfers) == 4 * 3 and {t.kind for t in after.transfers} == {"logical"}
    assert after.ranks[0].collective is not None and after.ranks[0].collective.op == "all_gather"


def test_later_phases_are_hidden_even_when_interleaved():
    events = all_gather_events()
    log = EventLog(events)
    end0 = log.step_ends[0]
    # a rank racing ahead into phase 1 before the cursor does not leak into step 0's view
    racing = Buffer(run="x", rank=0, seq=999, t_ns=1, phase=1, name="input", role="shard", moment="after",
                    shape=[2], dtype="float32", values=[9.0, 9.0])
    log2 = EventLog([*events[: end0 - 1], racing, *events[end0 - 1 :]])
    view = view_at(log2, log2.step_ends[0])
    assert view.step == 0
    assert _buffers(view, 0)["input"].values == [0.0, 1.0]


def test_a_step_has_ended_on_every_rank_only_after_the_last_ranks_end_of_it():
    events = all_gather_events()
    log = EventLog()
    for event in events:
        log.append(event)
        for phase in range(len(PHASES)):
            ended = {e.rank for e in log.events if isinstance(e, Phase) and e.edge == "end" and e.index >= phase}
            assert log.ended_on_every_rank(phase) == (ended == {0, 1, 2, 3}), (len(log), phase)
    assert log.ended_on_every_rank(len(PHASES) - 1)


def test_step_navigation_and_seek():
    log = EventLog(all_gather_events())
    stops = [0, *log.step_ends, len(log)]
    cursor = 0
    visited = [cursor]
    while cursor < len(log):
        cursor = next_boundary(log, cursor)
        visited.append(cursor)
    assert visited == sorted(set(stops))
    assert previous_boundary(log, log.step_ends[1]) == log.step_ends[0]
    assert previous_boundary(log, 0) == 0
    assert next_boundary(log, len(log)) == len(log)
    assert seek_step(log, 2) == log.step_ends[1]
    assert seek_step(log, 99) == len(log)
    assert seek_step(log, 0) == 0


def test_step_back_restores_the_earlier_view():
    log = EventLog(all_gather_events())
    first = view_at(log, log.step_ends[0])
    view_at(log, len(log))
    again = view_at(log, previous_boundary(log, log.step_ends[1]))
    assert again == first


def test_run_states():
    log = EventLog(all_gather_events())
    assert view_at(log, 0).state.kind in {"starting", "empty"}
    assert view_at(log, 1).state.text == "starting"
    assert view_at(log, log.step_ends[0]).state.kind == "running"
    end = view_at(log, len(log))
    assert end.state.kind == "finished"
    assert all(r.state == "done" for r in end.ranks)


def test_failure_is_shown_with_rank_and_error():
    log = EventLog(all_gather_events(fail_rank=2))
    view = view_at(log, len(log))
    assert view.state.kind == "failed"
    assert "rank 2" in view.state.text and "boom" in view.state.text
    assert view.ranks[2].state == "error"
    assert view.ranks[1].state == "done" or view.ranks[1].state == "running"


def test_gates_in_step_mode():
    events = all_gather_events(step=True)
    log = EventLog(events)
    # cursor just after every rank waits at gate 1 (before the Go)
    waits = [i for i, e in enumerate(events) if type(e).__name__ == "Go" and e.index == 1][0]
    view = view_at(log, waits)
    assert view.state.kind == "waiting"
    assert view.state.gate == 1 and view.state.waiting == (0, 1, 2, 3)
    assert view.last_go == 0
    assert view_at(log, waits + 1).last_go == 1


def test_memory_series_current_and_peak():
    log = EventLog(all_gather_events())
    mid = view_at(log, log.step_ends[1]).ranks[0].memory
    assert mid.upto == 2 and mid.current == 40 and mid.peak == 48
    end = view_at(log, len(log)).ranks[0].memory
    assert end.upto == 3 and end.current == 0 and end.peak == 48
    assert list(end.phases) == [0, 1, 2]


def test_narration_follows_the_step():
    log = EventLog(all_gather_events())
    assert view_at(log, log.step_ends[1]).narration == "narration of all_gather"
    assert view_at(log, 0).narration == "Every rank gathers every shard."


def test_speeds():
    assert faster(1.0) == 2.0 and slower(1.0) == 0.5
    assert slower(slower(slower(0.5))) == 0.25
    assert faster(16.0) == 16.0


def test_seek_in_a_million_events_is_fast():
    events = []
    seq = 0
    for phase in range(10):
        for rank in range(8):
            events.append(Phase(run="r", rank=rank, seq=seq, t_ns=seq, index=phase, name=f"p{phase}", edge="begin"))
            seq += 1
        for _ in range(100_000 // 8):
            for rank in range(8):
                events.append(Memory(run="r", rank=rank, seq=seq, t_ns=seq, phase=phase, label="m",
                                     live_bytes=seq, peak_bytes=seq))
                seq += 1
        for rank in range(8):
            events.append(Phase(run="r", rank=rank, seq=seq, t_ns=seq, index=phase, name=f"p{phase}", edge="end"))
            seq += 1
    log = EventLog(events)
    assert len(log) > 1_000_000
    started = time.perf_counter()
    for step in range(1, 11):
        view = view_at(log, seek_step(log, step))
        assert step_at(log, view.cursor) == step - 1
    assert (time.perf_counter() - started) / 10 < 0.05


class _ListSession:
    """A session handing out prepared batches, one per poll."""

    step = False

    def __init__(self, batches):
        self.batches = list(batches)
        self.finished = False

    def poll(self, timeout):
        if not self.batches:
            self.finished = True
            return []
        return self.batches.pop(0)


def test_pump_coalesces_batches_and_loses_nothing():
    events = all_gather_events()
    session = _ListSession([[e] for e in events])
    emitted = []
    pump_session(session, emitted.append, lambda: False)
    assert [e for batch in emitted for e in batch] == events
    assert len(emitted) < len(events) / 4


def test_pump_holds_batches_back_until_the_consumer_has_taken_the_last(monkeypatch):
    monkeypatch.setattr(sources, "MAX_BATCH", 40)
    monkeypatch.setattr(sources, "READY_POLL_SECONDS", 0.0)
    monkeypatch.setattr(sources, "COALESCE_SECONDS", 0.0)  # without flow control: a batch per poll
    events = all_gather_events()  # one per poll
    session = _ListSession([[e] for e in events])
    emitted: list[list] = []
    asked = {"since_emit": 100}

    def emit(batch):
        emitted.append(batch)
        asked["since_emit"] = 0

    def ready():  # the consumer takes a batch once it has been asked about it 25 times
        asked["since_emit"] += 1
        return asked["since_emit"] > 25

    pump_session(session, emit, lambda: False, ready)
    assert [e for batch in emitted for e in batch] == events
    sizes = [len(batch) for batch in emitted]
    assert sizes[0] == 1  # ready at first: the first event goes at once
    assert all(1 < size <= 40 for size in sizes[1:-1]), sizes  # then events gather while the consumer is busy


def test_pump_stops_when_asked():
    session = _ListSession([[e] for e in all_gather_events()])
    emitted = []
    pump_session(session, emitted.append, lambda: True)
    assert emitted == []


def test_load_trace_indexes_and_reports_a_truncated_tail(tmp_path):
    events = all_gather_events()
    path = write_trace(tmp_path / "t.cvz", events)
    log, warning = load_trace(path, lambda stage, done, total: None)
    assert len(log) == len(events) and warning == ""
    path.write_bytes(path.read_bytes()[:-3])
    log, warning = load_trace(path, lambda stage, done, total: None)
    assert len(log) == len(events) - 1 and "truncated" in warning


def test_a_stall_is_shown_until_the_run_ends():
    events = all_gather_events()
    log = EventLog(events)
    at = log.step_ends[0]
    stall = Stall(run="synthetic", rank=-1, seq=99, t_ns=1, group="world", group_seq=0, op="all_gather",
                  waiting=[0, 1, 2], elsewhere=["rank 3 never arrived"], waited_s=5.0,
                  text="ranks 0, 1, 2 wait in all_gather #0; rank 3 never arrived")
    log = EventLog([*events[:at], stall, *events[at:]])
    view = view_at(log, at + 1)
    assert view.state.kind == "stalled" and "rank 3 never arrived" in view.state.text
    assert view_at(log, at).state.kind == "running"
    assert view_at(log, len(log)).state.kind == "finished"


def test_stepping_back_from_the_end_leaves_the_last_step_and_each_step_is_one_frame():
    log = EventLog(all_gather_events())
    last = len(log.step_ends) - 1
    assert step_at(log, len(log)) == last
    back = previous_boundary(log, len(log))
    assert back == log.step_ends[last - 1] and step_at(log, back) == last - 1
    for k in range(1, last + 1):  # → then ← from a step's frame returns to the same event
        assert previous_boundary(log, next_boundary(log, log.step_ends[k - 1])) == log.step_ends[k - 1]
    middle = (log.step_ends[0] + log.step_ends[1]) // 2  # mid-step 1: ← goes to step 0's frame
    assert previous_boundary(log, middle) == log.step_ends[0]


def test_step_through_stepping_lands_where_every_rank_waits_at_the_gate():
    events = all_gather_events(step=True, staggered=True)
    log = EventLog(events)
    for step, end in enumerate(log.step_ends[:-1]):
        # computed from the events: each rank's last gate event before the boundary is its wait at gate step+1
        last_gate = {}
        for event in events[:end]:
            if isinstance(event, Gate):
                last_gate[event.rank] = (event.index, event.edge)
        assert last_gate == {rank: (step + 1, "wait") for rank in range(4)}
        state = view_at(log, end).state
        assert state.kind == "waiting" and state.text == f"waiting at gate {step + 2} before step {step + 2} (all 4 ranks)"
        assert view_at(log, end).step == step


def _arrivals(events: list, world: int = 4) -> list[int]:
    """The cursors just after the last rank came to each gate or ended (in that order), found
    by walking the events: where a step-through run's followed frames should land."""
    came: dict[int, int] = {}
    cursors = []
    for position, event in enumerate(events):
        if isinstance(event, Gate) and event.edge == "wait":
            came[event.rank] = event.index
        elif type(event).__name__ == "RankEnd":
            came[event.rank] = 10**9
        else:
            continue
        if len(came) == world and (not cursors or min(came.values()) > cursors[-1][0]):
            cursors.append((min(came.values()), position + 1))
    return [cursor for _, cursor in cursors]


def test_a_step_through_frame_lands_only_when_every_rank_has_arrived():
    """Ranks arrive at each gate one by one (each right after its own end of the step): at every
    moment, the log's arrival cursor is just after the last rank's arrival at the latest gate all
    have reached, and the frame there has every rank waiting (or the run over), never some ranks
    still in the step."""
    events = all_gather_events(step=True, staggered=True)
    expected = _arrivals(events)
    assert len(expected) == 3  # gate 1, gate 2, every rank ended
    seen = set()
    for upto in range(1, len(events) + 1):
        log = EventLog(events[:upto])
        cursor = log.arrival_cursor
        assert cursor == max([c for c in expected if c <= upto], default=0)
        seen.add(cursor)
        state = view_at(log, cursor).state
        if 0 < cursor < expected[-1]:
            assert state.kind == "waiting" and state.waiting == (0, 1, 2, 3), (upto, state)
    assert seen == {0, *expected}
    log = EventLog(events)
    assert [view_at(log, cursor).state.text for cursor in expected[:2]] == [
        "waiting at gate 2 before step 2 (all 4 ranks)", "waiting at gate 3 before step 3 (all 4 ranks)"]
    assert view_at(log, expected[0]).step == 0  # the setup, done on every rank: what each holds at the first gate
    assert all(_buffers(view_at(log, expected[0]), rank)["input"].values for rank in range(4))


def test_the_gate_released_next_is_the_lowest_a_rank_waits_at():
    """The setup has no gate: the first gate released is 1, where the ranks wait; with no rank
    waiting past the last released gate, the next number."""
    events = all_gather_events(step=True, staggered=True)
    first_wait = next(i for i, e in enumerate(events) if isinstance(e, Gate))
    assert EventLog(events[:first_wait]).next_gate(-1) == 0  # nobody waits yet
    assert EventLog(events[:first_wait + 1]).next_gate(-1) == 1
    assert EventLog(events[:first_wait + 1]).next_gate(1) == 2
    log = EventLog(events)
    assert log.next_gate(2) == 3 and log.gate_reached > 2  # every rank ended: past every gate


def test_gates_are_numbered_like_steps():
    log = EventLog(all_gather_events(step=True))
    gate_wait = next(i for i, e in enumerate(log.events) if type(e).__name__ == "Go" and e.index == 1)
    state = view_at(log, gate_wait).state
    assert state.kind == "waiting" and state.text == "waiting at gate 2 before step 2 (all 4 ranks)"


def test_rank_lists_shorten_runs_of_three_or_more():
    from collviz.app.model.view import rank_list

    assert rank_list([0, 1, 3]) == "0, 1, 3"
    assert rank_list([*range(32), *range(33, 64)]) == "0–31, 33–63"
    assert rank_list([2, 4, 5, 6, 9]) == "2, 4–6, 9"
    assert rank_list([]) == ""


def test_a_freed_buffer_leaves_the_live_buffers_and_says_when():
    events = all_gather_events()
    run = events[0].run
    ended = max(i for i, e in enumerate(events) if isinstance(e, Phase) and e.rank == 0 and e.index == 2)
    freed = Freed(run=run, rank=0, seq=10_000, t_ns=events[ended].t_ns, phase=2, name="output", bytes=64)
    log = EventLog([*events[:ended], freed, *events[ended:]])
    before, after = view_at(log, ended), view_at(log, len(log))
    assert "output" in _buffers(before, 0) and not before.ranks[0].freed
    assert "output" not in _buffers(after, 0) and after.ranks[0].freed == (freed,)
    assert "output" in _buffers(after, 1)  # only rank 0 freed it
    assert previous_boundary(log, len(log)) < len(log) and "output" in _buffers(view_at(log, log.step_ends[1]), 0)
    text = "".join(segment.text for line in rank_lines(after.ranks[0], 60) for segment in line)
    assert "output freed in step 3 (64 B)" in text


def test_a_64_rank_step_lists_the_first_transfers_of_all_in_order_not_of_the_first_to_arrive():
    from collviz.app.model.view import MAX_TRANSFERS
    from collviz.runtime.wire.protocol import Transfer
    from support.synthetic import all_gather_events

    events = list(all_gather_events(64))
    # the highest ranks' transfers arrive first (each rank's own order kept), as a busy run may
    # deliver them: the first to arrive are then not the first in order
    moves = [i for i, e in enumerate(events) if isinstance(e, Transfer)]
    arrived = sorted((events[i] for i in moves), key=lambda t: -t.rank)
    for i, event in zip(moves, arrived):
        events[i] = event
    log = EventLog(events)
    view = view_at(log, len(log))
    step = view.step
    for number, phase in log.phases.items():
        if phase.transfers.count_upto(len(log)):
            step = number
            break
    view = view_at(log, log.step_ends[step])
    everything = [e for e in events if isinstance(e, Transfer) and e.phase == step]
    assert len(everything) == 64 * 63 > MAX_TRANSFERS
    key = lambda t: (t.dst, t.hop, t.src, t.start)  # noqa: E731
    assert [key(t) for t in view.transfers] == sorted(key(t) for t in everything)[:MAX_TRANSFERS]


def test_a_flood_of_transfers_is_listed_in_order_of_all_and_out_of_range_fields_say_so():
    """5,000 transfers into rank 0 arriving in reverse order: the first 256 of all of them in
    (dst, hop, src, start) order, from the keys kept beside the series. A transfer whose start is
    beyond what the key packs makes the step sort its first 4,096 arrivals, and the pane says so."""
    from collviz.app.model.view import MAX_TRANSFERS, SORT_LIMIT
    from collviz.app.model.panes import TransferFields
    from collviz.app.widgets.transfers import transfers_title
    from collviz.runtime.wire.protocol import Transfer
    from support.synthetic import all_gather_events

    def flood(far: bool) -> tuple[EventLog, list[Transfer]]:
        events = list(all_gather_events(4))
        moved = [Transfer(run="synthetic", rank=0, seq=10_000 + i, t_ns=1, phase=1, src=1 + i % 3, dst=0, bytes=4,
                          buffer="x", start=(2**40 if far and i == 0 else 5_000 - i), length=1, kind="logical",
                          hop=i % 2) for i in range(5_000)]
        at = next(i for i, e in enumerate(events) if isinstance(e, Phase) and e.index == 1 and e.edge == "end")
        log = EventLog([*events[:at], *moved, *events[at:]])
        return log, [e for e in log.events[: log.step_ends[1]] if isinstance(e, Transfer) and e.phase == 1]

    key = lambda t: (t.dst, t.hop, t.src, t.start)  # noqa: E731
    log, moved = flood(far=False)
    view = view_at(log, log.step_ends[1])
    assert view.transfer_count == len(moved) == 5_000 + 4 * 3 and view.transfers_sorted_among == len(moved)
    assert [key(t) for t in view.transfers] == sorted(key(t) for t in moved)[:MAX_TRANSFERS]
    assert transfers_title(TransferFields.of(view)) == f"transfers · {len(moved)}"
    log, moved = flood(far=True)
    view = view_at(log, log.step_ends[1])
    assert view.transfers_sorted_among == SORT_LIMIT
    assert [key(t) for t in view.transfers] == sorted(key(t) for t in moved[:SORT_LIMIT])[:MAX_TRANSFERS]
    assert f"listed in order among the first {SORT_LIMIT:,} to arrive" in transfers_title(TransferFields.of(view))


def test_the_first_transfers_in_order_are_those_of_a_full_stable_sort():
    """Chosen among a step's lowest destinations and keys only, the first transfers are those a
    full stable sort of every (destination, key) puts first: ties (a destination's repeated rounds,
    equal keys) in arrival order, whether the lowest destination holds enough of them or not."""
    import numpy as np

    from collviz.app.model.view import _first_in_order

    rng = np.random.default_rng(23)
    for case in range(200):
        size = int(rng.integers(1, 3_000))
        dsts = rng.integers(0, 1 + case % 70, size).astype(np.int64)  # from one destination to 70
        orders = rng.integers(0, 1 + case % 9, size).astype(np.int64) << 32  # few keys: many ties
        for count in (1, 5, 64):
            expected = [(int(dsts[i]), int(orders[i]), int(i)) for i in range(size)]
            expected.sort()  # (destination, key, arrival): the stable order, computed without numpy
            got = _first_in_order(dsts, orders, count).tolist()
            assert got == [i for _, _, i in expected[:count]], (case, count)


def test_a_rank_s_status_names_a_phase_only_other_than_the_step_shown():
    """The header and the narration name the step; a rank in it says just done or running, a
    rank elsewhere (behind, in a live run) names where it is."""
    events = all_gather_events(4)
    log = EventLog(events)
    assert {rank.status for rank in view_at(log, log.step_ends[1]).ranks} == {"done"}
    begun = next(i for i, e in enumerate(events) if isinstance(e, Phase) and e.index == 1 and e.rank == 0)
    live = view_at(EventLog(events[:begun + 1]), begun + 1)  # rank 0 has begun step 2, the rest not yet
    assert live.step == 1
    assert [rank.status for rank in live.ranks] == ["running"] + [f"done {PHASES[0]}"] * 3


def test_a_failed_nccl_logs_header_names_its_warning_and_its_rank():
    """DeepEP#106's log (tests/fixtures/nccl/real/): the header's run state is the RunEnd's account of
    the first WARN line, and rank 0 — whose proxy thread printed it — is in error, the others not."""
    from collviz.runtime.sources import open_artifacts

    from support.paths import FIXTURES

    run = open_artifacts([FIXTURES / "nccl" / "real" / "deepep-106-init-records-glued-on-one-line-ib-warn.log"])
    log = EventLog(run.events)
    view = view_at(log, len(log))
    assert (view.state.kind, view.state.text) == (
        "failed", "failed: NCCL WARN NET/IB : Got completion from peer 172.21.17.89<38536> with error 12, opcode 32715, "
        "len 0, vendor err 129 (ib_plugin.c:1075) on rank 0 (VM-17-82-centos) "
        "(10 of 16 ranks unknown: ranks 3, 7–15, not in the log)")  # the glued records are ranks 0-2, 4-6 of 16
    present = {r.rank: r.state for r in view.ranks if r.rank in (0, 1, 2, 4, 5, 6)}
    assert present == {0: "error", 1: "done", 2: "done", 4: "done", 5: "done", 6: "done"}


def test_the_view_built_ahead_is_the_next_steps_and_only_while_the_log_is_as_it_was():
    events = all_gather_events(world=4)
    log = EventLog(events[:-1])  # a run whose RunEnd has not arrived yet
    ends = log.step_ends
    ahead = ViewAhead()
    ahead.prepare(log, ends[0], tail=0)
    assert ahead.take(log, ends[1], tail=0) == view_at(log, ends[1], tail=0)  # step 2 ends at the next boundary
    assert ahead.take(log, ends[0], tail=0) is None and ahead.take(log, ends[1], tail=5) is None
    assert ahead.take(EventLog(events[:-1]), ends[1], tail=0) is None  # another log
    log.append(events[-1])  # the log grew: what was built for it shorter is never shown
    assert ahead.take(log, ends[1], tail=0) is None
    ahead.prepare(log, len(log), tail=0)  # nothing after the end: the view built before stays
    assert ahead.take(log, len(log), tail=0) is None
