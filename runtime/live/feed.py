"""A running job as collviz events, reading after reading: what the live viewer, the trace and
export read. :class:`Feed` takes each :class:`~.reading.Reading` (each rank's calls, from any
reader) and passes on only what no earlier reading showed:

- ``RunStart`` once the job has issued a call (or when the session ends), from the reader (a
  launcher's job has its launcher's); ``RankStart`` for each rank the first time it answers.
- One viewer step per call, numbered in the order calls are first seen: per rank a ``Phase`` and
  ``Collective`` begin once the rank has issued the call, their ends once it completed it (op,
  group, sequence number, element type and count, bytes; a duration where the source kept one).
  Times are the source's (when the call was issued), on the monotonic clock of collviz's events.
  A ``grouped`` feed (a job read through relays: a thousand ranks and more) says the same once per
  call and reading: one ``CallRanks`` event per call (per party of its ranks that agree on its
  sizes) carrying the ranks that issued or completed it since the reading before, and when, as
  columns — 24 events a reading where per-rank events were 40,960 at 1,024 ranks. Each rank's
  events it stands for are numbered in the rank's own sequence, so that a trace, which holds them
  rather than the event, reads as a per-rank feed's.
- ``Stall`` for each wait (:func:`~.reading.waits_of`, keyed by ``(group, seq)``) that the next
  reading confirms — the same ranks waiting in the same call — once its waiters have waited
  ``stall_after_s``: the call, who waits and how long, who is missing and the line of its own code
  each missing rank is at (the reader's stacks, asked once per wait). Again at every reading while
  the wait lasts, its waiting time counting up (a stall of a minute never reads "7 s").
- ``RankEnd`` (``error``) for a rank whose source stops answering while others still answer,
  after :data:`SILENT_READINGS` readings in a row (one may be a slow answer): named, never waited
  for again. A rank that never answered is named so too, unless the feed is ``patient`` (a
  launcher's job that is starting); a launcher that follows its ranks' processes names none.

A call's state is dropped once every member the reader reads (answering or not: a rank slow or
not started yet still counts) completed it and the reading no longer holds it,
so a long watch holds no more than the calls still in flight; a later reading that starts earlier
again shows no call up to the last dropped in its group again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..observation.rank_lists import ranks_text
from ..sources.reading import collector_paused
from ..sources.run import Call, Hop
from ..sources.call_table import algo_bytes_of
from ..wire.protocol import LAUNCHER_RANK, AnyEvent, CallRanks, Collective, Phase, RankEnd, RankStart, RunStart, Stall, Transfer
from .reading import CallKey, Reader, Reading, Wait, call_text, waits_of

__all__ = ["SILENT_READINGS", "Feed", "Sink"]

SILENT_READINGS = 2
"""Readings in a row a rank must not answer, while others do, before it is named."""


class Sink(Protocol):
    """Where the feed's events go (the session's :class:`~collviz.runtime.sessions.intake.Intake`)."""

    def take(self, event: AnyEvent) -> None:
        """Take in an event stamped for one of the job's ranks."""

    def emit(self, event_type: type[AnyEvent], **fields: Any) -> None:
        """Take in an event of the session's own (rank ``LAUNCHER_RANK``), stamped by the sink."""


@dataclass
class _Shown:
    """One call as shown so far: its step, its group's label and members, when each rank issued it
    (the source's clock) and which ranks completed it."""

    index: int
    group: str
    members: tuple[int, ...]
    name: str
    narration: str
    """The step's narration where the source worded it (else each rank's own: :func:`_narration`)."""
    hops: Sequence[Hop] = ()
    """Transfers the source reported for the call: each shown on its receiving rank."""
    group_ranks: list[int] = field(default_factory=list)
    """The members as every event of the call carries them: one list, shared (not one per rank)."""
    members_text: str = ""
    """The members as the narration words them (``0–1023``): worded once per call, not per rank."""
    issued: dict[int, int] = field(default_factory=dict)
    ended: set[int] = field(default_factory=set)


@dataclass
class _Party:
    """The ranks of one call, agreeing on its sizes, whose news one reading of a grouped feed
    brings: who issued it and when, who completed it, when and in how long (``CallRanks``'s columns)."""

    shown: _Shown
    call: Call
    """The call as the party's first rank read it (its fields are every member's)."""
    issued: list[int] = field(default_factory=list)
    issued_ns: list[int] = field(default_factory=list)
    ended: list[int] = field(default_factory=list)
    ended_ns: list[int] = field(default_factory=list)
    durations_ns: list[int | None] = field(default_factory=list)


def _narration(call: Call, group: str, members_text: str, on: Sequence[int]) -> str:
    """How a step read live is narrated: the call, its group, its sizes ``on`` these ranks."""
    out = f" → {call.bytes_out:,} B out" if call.bytes_out != call.bytes_in else ""
    return (f"{call_text(call.op, group, call.group_seq)} (ranks {members_text}): "
            f"{call.dtype} ×{call.count:,}, {call.bytes_in:,} B in{out} on rank{'s' if len(on) > 1 else ''} "
            f"{ranks_text(on)}.\n"
            "Read live from the job's Flight Recorder: sizes and state, no values or provenance"
            + ("." if call.duration_ns else ", no duration."))


@dataclass
class Feed:
    """Turns each reading of ``reader`` into the events no reading before showed, into ``sink``;
    ``run`` is the run id of the ranks' events; see the module for ``patient`` and ``names_silent``."""

    sink: Sink
    run: str
    reader: Reader
    patient: bool = False
    """Whether a rank that never answered is left unnamed (it may not have started yet)."""
    names_silent: bool = True
    """Whether a rank that stops answering is named (False: a launcher follows its processes)."""
    grouped: bool = False
    """Whether each call's news is one ``CallRanks`` event per reading rather than each rank's
    Phase and Collective events (see the module)."""
    started: bool = False
    """Whether the RunStart was emitted."""
    now_ns: Callable[[], int] = time.time_ns
    """The wall clock a wait's time is measured on (the sources' calls are stamped on it)."""
    _clock_ns: int = field(default_factory=lambda: time.monotonic_ns() - time.time_ns())
    _seq: dict[int, int] = field(default_factory=dict)
    _shown: dict[CallKey, _Shown] = field(default_factory=dict)
    _done_up_to: dict[str, int] = field(default_factory=dict)
    """Per group (its identity), the last call dropped: it and those before it are never shown again."""
    _labels: dict[str, str] = field(default_factory=dict)
    """Per group (its identity), the label its events carry: the first one read, kept (see :meth:`_label`)."""
    _answered: set[int] = field(default_factory=set)
    _silent: dict[int, int] = field(default_factory=dict)
    _named: set[int] = field(default_factory=set)
    _last_waits: dict[CallKey, Wait] = field(default_factory=dict)
    _stacks: dict[CallKey, dict[int, str]] = field(default_factory=dict)
    _stalled_s: dict[CallKey, int] = field(default_factory=dict)
    _last: Reading | None = None
    confirmed: dict[CallKey, Wait] = field(default_factory=dict)
    """The waits the last reading confirmed (see the module), by call."""
    _next_index: int = 0

    def take(self, reading: Reading, stall_after_s: float = 0.0, final: bool = False,
             excused: Collection[int] = ()) -> int:
        """Pass on what ``reading`` shows that no reading before did; its waits, confirmed by the
        reading before (or ``final``: the last reading, every wait in it final), become Stalls once
        waited ``stall_after_s`` — but a wait on a rank of ``excused`` (one that raised or died:
        its peers wait because it failed) never. The number of events passed on."""
        passed = 0
        self._last = reading
        if not self.started and reading.calls:
            passed += self.begin()
        if self.started:
            passed += self._new_ranks(reading)
            with collector_paused():  # 40,960 events at 1,024 ranks, none cyclic: not walked as they are made
                passed += self._calls_of(reading)
        waits = waits_of(reading)
        passed += self._stalls({key: wait for key, wait in waits.items() if not set(wait.missing) & set(excused)},
                               stall_after_s, final)
        self._last_waits = waits
        if self.names_silent:
            passed += self._silences(reading)
        return passed

    def begin(self) -> int:
        """Emit the RunStart (once): at the first call seen, or as the session ends without one."""
        if self.started:
            return 0
        self.started = True
        fields = self.reader.run_start(self._last or Reading({}))
        if fields is None:
            return 0
        self.sink.emit(RunStart, **fields)
        return 1

    def stamp(self, event_type: type[Any], rank: int, t_ns: int, **fields: Any) -> None:
        """Pass on an event of ``rank`` (its next sequence number: a launcher's RankEnd included)."""
        seq = self._seq.get(rank, 0)
        self._seq[rank] = seq + 1
        self.sink.take(event_type(run=self.run, rank=rank, seq=seq, t_ns=t_ns, **fields))

    def close(self) -> None:
        """Each rank's RankEnd (ok, at its last step), for a source whose end is the session's."""
        last: dict[int, int] = {}
        for shown in self._shown.values():
            for rank in shown.issued:
                last[rank] = max(last.get(rank, -1), shown.index)
        for rank in sorted(self._answered - self._named):
            self.stamp(RankEnd, rank, time.monotonic_ns(), status="ok", phase=last.get(rank))

    def _new_ranks(self, reading: Reading) -> int:
        news = [rank for rank in reading.answered if rank not in self._answered and rank not in self._named]
        for rank in news:
            self._answered.add(rank)
            self.stamp(RankStart, rank, time.monotonic_ns(), **self.reader.rank_start(rank, reading))
        return len(news)

    def _calls_of(self, reading: Reading) -> int:
        """Each rank's calls newly issued or completed, as step events; then drop what is done."""
        seen: set[CallKey] = set()
        passed = 0
        parties: dict[tuple[Any, ...], _Party] | None = {} if self.grouped else None
        for call in reading.calls:
            key = call.key
            if call.rank in self._named or call.group_seq <= self._done_up_to.get(key[0], 0):
                continue  # a rank given up, or a call already shown and dropped
            seen.add(key)
            shown = self._shown.get(key)
            if shown is None:
                group = self._label(call)
                name, narration = reading.texts.get(
                    key, (reading.call_texts.get(key) or call_text(call.op, group, call.group_seq), ""))
                shown = self._shown[key] = _Shown(self._next_index, group, call.group_ranks, name, narration,
                                                  reading.hops.get(key, ()), list(call.group_ranks),
                                                  ranks_text(call.group_ranks))
                self._next_index += 1
            if parties is None:
                passed += self._rank_step(shown, call)
            else:
                passed += self._note_step(shown, call, parties)
        if parties:
            passed += self._grouped_steps(parties)
        read = set(reading.ranks) - self._named  # a rank not answering this time (slow, starting) still counts
        over = [key for key, shown in self._shown.items() if key not in seen and shown.ended >= (
            read.intersection(shown.members) if reading.whole else set(shown.members) - self._named)]
        for key in over:
            del self._shown[key]
            self._done_up_to[key[0]] = max(self._done_up_to.get(key[0], 0), key[1])
        return passed

    def _label(self, call: Call) -> str:
        """The label ``call``'s group is shown by: the first one read for its identity, so that one
        group keeps one name in every event (a reading may word it with ``on <backend>`` and the
        next not); where that label is another group's already, it gains the call's backend."""
        identity = call.key[0]
        label = self._labels.get(identity)
        if label is None:
            label = call.group
            if label in self._labels.values():
                label = f"{label} on {call.backend}" if call.backend else f"{label} ({identity})"
            self._labels[identity] = label
        return label

    def _rank_step(self, shown: _Shown, call: Call) -> int:
        """``call``'s begin events the first time its rank is seen in it, its end events the first
        time it is seen completed."""
        name = shown.name
        at = call.t_ns + self._clock_ns
        shared = call.group_ranks == shown.members  # a rank naming other members keeps its own list
        fields = dict(op=call.op, group=shown.group, group_seq=call.group_seq,
                      group_ranks=shown.group_ranks if shared else list(call.group_ranks),
                      dtype=call.dtype, count=call.count, bytes_in=call.bytes_in, bytes_out=call.bytes_out,
                      algo_bytes=algo_bytes_of(call.op, len(call.group_ranks), call.bytes_in, call.bytes_out),
                      root=call.root)
        passed = 0
        if call.rank not in shown.issued:
            shown.issued[call.rank] = call.t_ns
            members = shown.members_text if shared else ranks_text(call.group_ranks)
            self.stamp(Phase, call.rank, at, index=shown.index, name=name, edge="begin",
                       narration=shown.narration or _narration(call, shown.group, members, (call.rank,)))
            self.stamp(Collective, call.rank, at, phase=shown.index, edge="begin", duration_ns=None, **fields)
            for hop in (hop for hop in shown.hops if hop.dst == call.rank):
                self.stamp(Transfer, call.rank, at, phase=shown.index, src=hop.src, dst=hop.dst, bytes=hop.bytes,
                           buffer=hop.label, start=0, length=0, kind="p2p", hop=hop.number)
                passed += 1
            passed += 2
        if call.completed and call.rank not in shown.ended:
            shown.ended.add(call.rank)
            end = at + (call.duration_ns or 0)
            self.stamp(Collective, call.rank, end, phase=shown.index, edge="end", duration_ns=call.duration_ns, **fields)
            self.stamp(Phase, call.rank, end, index=shown.index, name=name, edge="end")
            passed += 2
        return passed

    def _note_step(self, shown: _Shown, call: Call, parties: dict[tuple[Any, ...], _Party]) -> int:
        """Note ``call``'s news in its party (a grouped feed: :meth:`_grouped_steps` emits it); its
        transfers are its rank's own events. The number of events passed on."""
        begins = call.rank not in shown.issued
        ends = call.completed and call.rank not in shown.ended
        if not begins and not ends:
            return 0
        party_key = (id(shown), call.op, call.dtype, call.count, call.bytes_in, call.bytes_out, call.root,
                     id(call.group_ranks))  # one _Shown per call, and a reading's calls share their group's member
        # tuple: neither hashed per call
        party = parties.get(party_key)
        if party is None:
            party = parties[party_key] = _Party(shown, call)
        at = call.t_ns + self._clock_ns
        passed = 0
        if begins:
            shown.issued[call.rank] = call.t_ns
            party.issued.append(call.rank)
            party.issued_ns.append(at)
            if shown.hops:
                passed += sum(hop.dst == call.rank for hop in shown.hops)
        if ends:
            shown.ended.add(call.rank)
            party.ended.append(call.rank)
            party.ended_ns.append(at + (call.duration_ns or 0))
            party.durations_ns.append(call.duration_ns)
        return passed

    def _grouped_steps(self, parties: dict[tuple[Any, ...], _Party]) -> int:
        """One ``CallRanks`` event per party noted (see :meth:`_note_step`), its ranks' begins and
        ends numbered in each rank's own sequence as :meth:`_rank_step` numbers them; then the
        transfers each issuing rank received, its own events."""
        seq = self._seq
        for party in parties.values():
            shown, call = party.shown, party.call
            issued_seq = [seq.get(rank, 0) for rank in party.issued]
            seq.update((rank, first + 2) for rank, first in zip(party.issued, issued_seq))
            ended_seq = [seq.get(rank, 0) for rank in party.ended]
            seq.update((rank, first + 2) for rank, first in zip(party.ended, ended_seq))
            shared = call.group_ranks == shown.members
            narration = shown.narration or (_narration(call, shown.group, shown.members_text if shared else
                                                       ranks_text(call.group_ranks), sorted(party.issued))
                                             if party.issued else "")
            self.sink.take(CallRanks(
                run=self.run, rank=LAUNCHER_RANK, seq=0, t_ns=time.monotonic_ns(), phase=shown.index, name=shown.name,
                narration=narration, op=call.op, group=shown.group,
                group_ranks=shown.group_ranks if shared else list(call.group_ranks), group_seq=call.group_seq,
                dtype=call.dtype, count=call.count, bytes_in=call.bytes_in, bytes_out=call.bytes_out, root=call.root,
                algo_bytes=algo_bytes_of(call.op, len(call.group_ranks), call.bytes_in, call.bytes_out),
                issued=party.issued, issued_ns=party.issued_ns, ended=party.ended, ended_ns=party.ended_ns,
                durations_ns=party.durations_ns, issued_seq=issued_seq, ended_seq=ended_seq))
            for rank, at in zip(party.issued, party.issued_ns):
                for hop in (hop for hop in shown.hops if hop.dst == rank):
                    self.stamp(Transfer, rank, at, phase=shown.index, src=hop.src, dst=hop.dst, bytes=hop.bytes,
                               buffer=hop.label, start=0, length=0, kind="p2p", hop=hop.number)
        return len(parties)

    def _stalls(self, waits: dict[CallKey, Wait], after_s: float, final: bool) -> int:
        """A Stall for each wait confirmed (see the module), waited ``after_s`` at least; again at
        each reading while it lasts, once its waiting time has grown by a second."""
        passed = 0
        self.confirmed = {key: replace(wait, group=self._labels.get(key[0], wait.group)) for key, wait in waits.items()
                          if final or (key in self._last_waits and self._last_waits[key].waiting == wait.waiting)}
        for key, wait in self.confirmed.items():
            waited_s = max(0.0, (self.now_ns() - wait.issued_ns) / 1e9)
            if waited_s < after_s or int(waited_s) <= self._stalled_s.get(key, -1):
                continue
            self._stalled_s[key] = int(waited_s)
            stacks = self.stacks_of(wait)
            elsewhere = [f"rank {rank} is missing from the call, at {stacks.get(rank) or '(stack not read)'}"
                         for rank in wait.missing]
            plural = len(wait.waiting) > 1
            text = (f"{wait.text}: rank{'s' if plural else ''} {ranks_text(wait.waiting)} waiting {waited_s:.0f} s; "
                    + "; ".join(elsewhere))
            self.sink.emit(Stall, group=wait.group or key[0], group_seq=key[1], op=wait.op, waiting=list(wait.waiting),
                           elsewhere=elsewhere, waited_s=waited_s, text=text)
            passed += 1
        return passed

    def stacks_of(self, wait: Wait) -> dict[int, str]:
        """rank → the line of its own code each rank ``wait`` waits for is at (asked of the reader
        once per wait: a stack is read only for ranks others wait on)."""
        stacks = self._stacks.get(wait.key)
        if stacks is None:
            stacks = self._stacks[wait.key] = self.reader.stacks(wait.missing)
        return stacks

    def _silences(self, reading: Reading) -> int:
        """Name each rank that did not answer :data:`SILENT_READINGS` readings in a row while others did."""
        if reading.gone:
            return 0  # the job has ended (or every server is gone): the session's end, not a rank's
        named = 0
        for rank, read in sorted(reading.ranks.items()):
            if not read.error:
                self._silent.pop(rank, None)
                continue
            self._silent[rank] = self._silent.get(rank, 0) + 1
            unstarted = rank not in self._answered
            if (self._silent[rank] >= SILENT_READINGS and rank not in self._named and self.started
                    and not (unstarted and self.patient)):
                self._named.add(rank)
                what = "never answered" if unstarted else "stopped answering"
                self.stamp(RankEnd, rank, time.monotonic_ns(), status="error",
                           error=f"it {what} ({read.error}): ended or stuck; no longer read")
                named += 1
        return named
