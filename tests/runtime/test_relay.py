"""Per-host relays (``collviz attach --relay``) and the viewer listening for them (``--listen``):
what a relay sends (each entry once, again only when it changed), the signed sockets between
them, and a 4-rank job on two hosts read through two relays — a default group and a subgroup of
ranks 2 and 3 — whose missing rank is named with its host and its own line of code.

Expected values are written by hand from the hand-made Flight Recorder answers below."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator

import pytest
import zmq

from collviz.app.cli import main
from collviz.runtime.live.recorder_reader import RECORDERS
from collviz.runtime.live.reading import waits_of
from collviz.runtime.live.relay import NewsMaker
from collviz.runtime.live.relayed_reader import RelayedReader
from collviz.runtime.live.snapshot import take_snapshot
from collviz.runtime.live.workers import Answer
from collviz.runtime.wire.relay_link import RelayLink, RelayListener
from collviz.runtime.wire.relay_news import RelayNews
from support.processes import free_port

SECRET = b"relay-test-secret-0123"
GROUPS = {"0": [0, 1, 2, 3], "1": [2, 3]}
HOSTS = {0: "hosta", 1: "hosta", 2: "hostb", 3: "hostb"}


def _entry(group: str, seq: int, retired: bool) -> dict:
    return {"collective_seq_id": seq, "profiling_name": "gloo:all_reduce", "process_group": [group, "x"],
            "input_sizes": [[4]], "output_sizes": [[4]], "input_dtypes": ["Float"], "output_dtypes": ["Float"],
            "time_created_ns": 1000 * seq + (0 if group == "0" else 500), "retired": retired, "state": "scheduled",
            "is_p2p": False}


def _answer(rank: int, default_calls: int, inside: bool) -> bytes:
    """``default_calls`` all_reduces on the default group (the last not retired when ``inside``),
    each followed, on ranks 2 and 3, by one on the subgroup."""
    entries = []
    for seq in range(1, default_calls + 1):
        entries.append(_entry("0", seq, not (inside and seq == default_calls)))
        if rank in GROUPS["1"] and not (inside and seq == default_calls):
            entries.append(_entry("1", seq, True))
    config = {name: {"name": name, "desc": "x", "ranks": json.dumps(ranks)} for name, ranks in GROUPS.items()}
    return json.dumps({"version": "2.10", "pg_config": config, "pg_status": {}, "entries": entries}).encode()


def _answers(bodies: dict[int, bytes]) -> dict[str, dict[int, Answer]]:
    nccl_absent = {rank: Answer(rank, None, "dump_nccl_trace_json answered 404", status=404) for rank in bodies}
    return {RECORDERS[0]: {rank: Answer(rank, body, status=200) for rank, body in bodies.items()},
            RECORDERS[1]: nccl_absent}


def _sent(news: list) -> dict[int, int]:
    return {rank.rank: sum(len(recorder.entries) for recorder in rank.recorders) for rank in news}


def test_a_relay_sends_each_entry_once_and_again_only_when_it_changed():
    maker = NewsMaker()
    first = maker.news(_answers({0: _answer(0, 3, True), 2: _answer(2, 3, True)}), [0, 2])
    assert _sent(first) == {0: 3, 2: 3 + 2}  # rank 2 also holds subgroup calls #1 and #2
    assert all(recorder.header for rank in first for recorder in rank.recorders)
    again = maker.news(_answers({0: _answer(0, 3, True), 2: _answer(2, 3, True)}), [0, 2])
    assert _sent(again) == {0: 0, 2: 0} and not any(rank.recorders for rank in again), "the same answers: nothing"
    later = maker.news(_answers({0: _answer(0, 4, True), 2: _answer(2, 4, False)}), [0, 2])
    # rank 0: #3 now retired, #4 new; rank 2: #3 retired, subgroup #3, #4 and subgroup #4
    assert _sent(later) == {0: 2, 2: 4}
    assert not any(recorder.header for rank in later for recorder in rank.recorders), "the header did not change"


def test_every_sixtieth_reading_sends_all_again_for_a_viewer_that_came_later():
    maker = NewsMaker(full_every=3)
    counts = [_sent(maker.news(_answers({1: _answer(1, 2, False)}), [1]))[1] for _ in range(4)]
    assert counts == [2, 0, 0, 2]


def _relay(link: RelayLink, host: str, bodies: dict[int, bytes], stop: threading.Event) -> None:
    """A relay of ``bodies``' ranks: one reading's news, then the stack of any rank asked for."""
    link.send(RelayNews(relay=f"{host}:1", host=host, number=0, every_s=1.0,
                        ranks=NewsMaker().news(_answers(bodies), sorted(bodies))))
    while not stop.is_set():
        asked = [rank for rank in link.requests(0.05) if rank in bodies]
        if asked:
            link.send(RelayNews(relay=f"{host}:1", host=host, number=1, every_s=1.0,
                                stacks={rank: f"train.py:{40 + rank} in load_batch" for rank in asked}))


@contextlib.contextmanager
def _two_relays() -> Iterator[RelayListener]:
    """A listener with two relays behind it (threads): ranks 0 and 1 on hosta, 2 and 3 on hostb;
    ranks 0-2 are inside default all_reduce #5, rank 3 completed #4 and has not issued #5."""
    port = free_port()
    listener = RelayListener("127.0.0.1", port, SECRET)
    links = [RelayLink("127.0.0.1", port, SECRET) for _ in range(2)]
    stop = threading.Event()
    hosts = [{0: _answer(0, 5, True), 1: _answer(1, 5, True)}, {2: _answer(2, 5, True), 3: _answer(3, 4, False)}]
    relays = [threading.Thread(target=_relay, args=(link, name, bodies, stop))
              for link, name, bodies in zip(links, ["hosta", "hostb"], hosts)]
    for relay in relays:
        relay.start()
    try:
        yield listener
    finally:
        stop.set()
        for relay in relays:
            relay.join()
        for link in links:
            link.close()
        listener.close()


def test_four_ranks_behind_two_relays_name_the_missing_rank_its_host_and_line():
    with _two_relays() as listener:
        snapshot = take_snapshot(RelayedReader(listener, timeout_s=5.0, from_first=False), 0.01)
    assert snapshot.text().splitlines() == [
        "rank 0 on hosta: last completed all_reduce #4 on group 0 (x); now in all_reduce #5 on group 0 (x)",
        "rank 1 on hosta: last completed all_reduce #4 on group 0 (x); now in all_reduce #5 on group 0 (x)",
        "rank 2 on hostb: last completed all_reduce #4 on group 1 (x); now in all_reduce #5 on group 0 (x)",
        "rank 3 on hostb: last completed all_reduce #4 on group 1 (x); in no collective",
        "waiting: all_reduce #5 on group 0 (x): ranks 0–2 wait for rank 3",
        "  rank 3 is missing from the call, at train.py:43 in load_batch"]
    assert snapshot.exit_status == 1
    assert listener.dropped == {}


def test_news_not_signed_with_the_secret_is_dropped_and_counted():
    port = free_port()
    listener = RelayListener("127.0.0.1", port, SECRET)
    forger = RelayLink("127.0.0.1", port, b"another-secret-0123456")
    context = zmq.Context()
    unsigned = context.socket(zmq.PUSH)
    unsigned.connect(f"tcp://127.0.0.1:{port}")
    try:
        forger.send(RelayNews(relay="x:1", host="x", number=0, every_s=1.0))
        unsigned.send_multipart([b"collviz-relay/1", b"\x80"])
        deadline = time.monotonic() + 10
        while sum(listener.dropped.values()) < 2 and time.monotonic() < deadline:
            assert listener.receive(0.1) == []
    finally:
        unsigned.close(linger=0)
        context.term()
        forger.close()
        listener.close()
    assert listener.dropped == {"unauthenticated": 2}


ONE_SOURCE = ("attach reads one of: TARGET (the job's sockets or store), --pid PID … (a job that prepared nothing), "
              "--listen HOST:PORT (its relays)")
"""What attach says when it is given no source, or more than one."""


@pytest.mark.parametrize(("options", "expected"), [
    (["--listen", "127.0.0.1:5555", "/tmp/job"], ONE_SOURCE),
    ([], ONE_SOURCE),
    (["--relay", "127.0.0.1:5555", "--pid", "1"], "--relay reads TARGET, this node's ranks"),
    (["--listen", "127.0.0.1:5555"], "--listen: the relays sign what they send with the job's shared secret"),
    (["--listen", "nowhere"], "--listen 'nowhere': expected HOST:PORT"),
])
def test_relay_options_misused_are_one_line_and_exit_2(options, expected, capsys, monkeypatch):
    monkeypatch.delenv("COLLVIZ_SECRET", raising=False)
    assert main(["attach", "--headless", *options]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("collviz: error: ") and expected in err, err


def test_a_large_reading_goes_as_messages_under_the_limit_each_entry_whole_and_in_order():
    from collviz.runtime.live.relay import split_news
    from collviz.runtime.wire.relay_news import RankNews, RecorderNews

    entries = {rank: [bytes([65 + rank]) * 40 for _ in range(5)] for rank in range(3)}  # 3 ranks × 5 entries of 40 B
    news = RelayNews(relay="a:1", host="a", number=7, every_s=1.0, ranks=[
        RankNews(rank=rank, recorders=[RecorderNews(recorder=0, header=b"{}", entries=entries[rank])])
        for rank in range(3)] + [RankNews(rank=3, error="gone")])
    parts = split_news(news, limit=100)  # two entries (80 B) per message at most
    assert all(sum(len(e) for r in part.ranks for c in r.recorders for e in c.entries) <= 100 for part in parts)
    # each rank's 5 entries in parts of 80, 80 and 40 B; a part joins the message before only where both fit in
    # 100 B (none here: 40 + 80); rank 3's error (no entry) joins the last
    assert len(parts) == 9
    assert all(part.number == 7 and part.host == "a" for part in parts)
    sent = [(r.rank, e) for part in parts for r in part.ranks for c in r.recorders for e in c.entries]
    assert sent == [(rank, entry) for rank in range(3) for entry in entries[rank]]
    headers = [(r.rank, c.header) for part in parts for r in part.ranks for c in r.recorders if c.header]
    assert headers == [(0, b"{}"), (1, b"{}"), (2, b"{}")], "each header once, with its rank's first entries"
    assert parts[-1].ranks[-1] == RankNews(rank=3, error="gone")


def test_the_viewers_session_on_two_relays_starts_each_rank_on_its_host_and_reports_the_stall():
    from collviz.runtime.live.pace import Pace
    from collviz.runtime.sessions.live import attached_reader_session
    from collviz.runtime.wire.protocol import RankStart, Stall

    events: list = []
    with _two_relays() as listener:
        session = attached_reader_session(RelayedReader(listener, timeout_s=5.0), pace=Pace(0.05, 0.05))
        session.start()
        deadline = time.monotonic() + 90  # the loop's stall threshold first: a condition, not a pause
        while not any(isinstance(event, Stall) for event in events) and time.monotonic() < deadline:
            events += session.poll(0.1)
        session.stop()
        events += session.poll(0.1)
    assert {event.rank: event.host for event in events if isinstance(event, RankStart)} == HOSTS
    stall = next(event for event in events if isinstance(event, Stall))
    assert (stall.group, stall.group_seq, stall.waiting) == ("0 (x)", 5, [0, 1, 2])  # a group: its name (desc)
    assert stall.elsewhere == ["rank 3 is missing from the call, at train.py:43 in load_batch"]


class _Arrivals:
    """A listener without sockets: each relay's news arrives at its moment of a clock it moves
    (waiting in ``receive`` moves the clock on to the next arrival, or by the timeout)."""

    def __init__(self, arrivals: list[tuple[float, RelayNews]]) -> None:
        self.now = 0.0
        self.arrivals = sorted(arrivals, key=lambda arrival: arrival[0])

    def clock(self) -> float:
        return self.now

    def receive(self, timeout_s: float) -> list[RelayNews]:
        if not self.arrivals or self.arrivals[0][0] > self.now:
            self.now = min(self.now + timeout_s, self.arrivals[0][0]) if self.arrivals else self.now + timeout_s
        due = [news for at, news in self.arrivals if at <= self.now]
        self.arrivals = self.arrivals[len(due):]
        return due

    def ask_stacks(self, ranks: list[int]) -> None:
        pass


def _every_second(host: str, bodies: dict[int, bytes], first_s: float) -> list[tuple[float, RelayNews]]:
    """A relay reading every second from ``first_s`` on, its first news whole, the others its
    ranks' status only (nothing changed)."""
    maker = NewsMaker()
    return [(first_s + second, RelayNews(relay=f"{host}:1", host=host, number=second, every_s=1.0,
                                         ranks=maker.news(_answers(bodies), sorted(bodies))))
            for second in range(60)]


def test_the_first_reading_shows_the_ranks_reported_and_the_rest_join_as_their_relay_reports():
    # hosta's relay reads from second 0, hostb's (a slow first reading) from second 30
    listener = _Arrivals(_every_second("hosta", {0: _answer(0, 5, True), 1: _answer(1, 5, True)}, 0.0)
                         + _every_second("hostb", {2: _answer(2, 5, True), 3: _answer(3, 4, False)}, 30.0))
    reader = RelayedReader(listener, timeout_s=2.0, first_wait_s=10.0, from_first=False, clock=listener.clock)
    first = reader.read()
    assert listener.now <= 1.0, "no longer than one of hosta's readings after its first news"
    assert (first.answered, sorted(first.ranks), first.world_size) == ([0, 1], [0, 1], 4)
    assert waits_of(first) == {}, "ranks 2 and 3 are not read yet: neither waiting nor waited for"
    listener.now = 12.0  # first_wait_s after the first reading: ranks 2 and 3 are named as not read
    named = reader.read()
    assert named.answered == [0, 1]
    assert {rank: named.ranks[rank].error for rank in (2, 3)} == {2: "no relay reported it within 10 s",
                                                                   3: "no relay reported it within 10 s"}
    listener.now = 30.0  # hostb's first news: every rank read, rank 3 missing from all_reduce #5
    whole = reader.read()
    assert whole.answered == [0, 1, 2, 3]
    assert [(wait.text, wait.waiting, wait.missing) for wait in waits_of(whole).values()] == [
        ("all_reduce #5 on group 0 (x)", (0, 1, 2), (3,))]


def test_a_snapshots_first_reading_waits_for_every_rank_and_names_those_still_unreported():
    """``whole_first`` (``attach --listen --headless``): hostb's relay first reports at second 5
    (within the 10 s), then a job whose hostb never reports: its ranks are named at once."""
    listener = _Arrivals(_every_second("hosta", {0: _answer(0, 5, True), 1: _answer(1, 5, True)}, 0.0)
                         + _every_second("hostb", {2: _answer(2, 5, True), 3: _answer(3, 4, False)}, 5.0))
    reader = RelayedReader(listener, timeout_s=2.0, first_wait_s=10.0, whole_first=True, clock=listener.clock)
    whole = reader.read()
    assert 5.0 <= listener.now < 10.0 and whole.answered == [0, 1, 2, 3]
    assert [(wait.text, wait.waiting, wait.missing) for wait in waits_of(whole).values()] == [
        ("all_reduce #5 on group 0 (x)", (0, 1, 2), (3,))]
    alone = _Arrivals(_every_second("hosta", {0: _answer(0, 5, True), 1: _answer(1, 5, True)}, 0.0))
    reader = RelayedReader(alone, timeout_s=2.0, first_wait_s=10.0, whole_first=True, clock=alone.clock)
    first = reader.read()
    assert alone.now >= 10.0 and first.answered == [0, 1] and first.world_size == 4
    assert {rank: first.ranks[rank].error for rank in (2, 3)} == {2: "no relay reported it within 10 s",
                                                                   3: "no relay reported it within 10 s"}
