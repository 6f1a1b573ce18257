"""Hang and desync detection: match collectives across ranks by (process group, sequence number).

Every rank numbers the collectives it issues on each group (``Collective.group_seq``). When some
ranks have entered collective #k of a group and others have not within the timeout, the watch
says precisely who waits where — "all_reduce #1 on world: ranks 0, 1, 3 waiting 6 s; rank 2 is in
all_gather #1" — or that a rank never arrived, naming the phase it was last seen in.

A log with no clock for the wait (a Flight Recorder dump records when each call was issued, not
when the dump was taken) is checked once, at its end, by :meth:`CollectiveWatch.check_at_end`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..wire.protocol import AnyEvent, CallRanks, Collective, Phase, ProcessExit, RankEnd
from .rank_lists import ranks_text

__all__ = ["Stalled", "CollectiveWatch"]


@dataclass(frozen=True)
class Stalled:
    """A collective some ranks entered and others did not, with its one-line explanation.

    ``waited_s``: how long the first rank inside had waited, or None where the log cannot say.
    """

    group: str
    group_seq: int
    op: str
    waiting: list[int]
    elsewhere: dict[int, str]
    waited_s: float | None
    text: str


@dataclass
class _Entered:
    op: str
    group_seq: int
    group_ranks: list[int]
    t_ns: int


def _phase_text(index: int, name: str) -> str:
    """How a rank's last step is named where it never arrived: ``phase 3 'all_reduce #2'``."""
    return f"phase {index} '{name}'"


@dataclass
class CollectiveWatch:
    """Follows the event stream; :meth:`check` reports each stalled collective once."""

    timeout_s: float
    _inside: dict[int, dict[str, _Entered]] = field(default_factory=dict)
    _phase: dict[int, str] = field(default_factory=dict)
    _gone: set[int] = field(default_factory=set)
    _unknown: dict[int, str] = field(default_factory=dict)
    _reported: set[tuple[str, int]] = field(default_factory=set)

    def observe(self, event: AnyEvent) -> None:
        """Update what each rank is doing from one event (a ``CallRanks``: each of its ranks')."""
        if type(event) is CallRanks:
            self._call_ranks(event)
        elif isinstance(event, Collective):
            if event.edge == "begin" and event.iteration == 0:
                self._inside.setdefault(event.rank, {})[event.group] = _Entered(
                    event.op, event.group_seq, event.group_ranks, event.t_ns)
            elif event.edge == "end":
                self._left(event.rank, event.group, event.group_seq)
        elif isinstance(event, Phase) and event.edge == "begin":
            self._phase[event.rank] = _phase_text(event.index, event.name)
        elif isinstance(event, RankEnd):
            self._gone.add(event.rank)
        elif isinstance(event, ProcessExit):
            self._gone.add(event.target)

    def _call_ranks(self, event: CallRanks) -> None:
        """Each rank's begin (in the call, in its step) then each rank's end, as its own Phase and
        Collective events would say them."""
        phase = _phase_text(event.phase, event.name)
        for rank, t_ns in zip(event.issued, event.issued_ns):
            self._inside.setdefault(rank, {})[event.group] = _Entered(event.op, event.group_seq, event.group_ranks, t_ns)
            self._phase[rank] = phase
        for rank in event.ended:
            self._left(rank, event.group, event.group_seq)

    def _left(self, rank: int, group: str, group_seq: int) -> None:
        """``rank`` completed call ``group_seq`` of ``group``: no longer inside it."""
        groups = self._inside.get(rank, {})
        entered = groups.get(group)
        if entered is not None and entered.group_seq == group_seq:
            del groups[group]

    def unknown(self, rank: int, why: str) -> None:
        """Say what is known of a rank that left no events (``why``: "no dump of rank 3"), so a
        stall names it so rather than as a rank that never arrived."""
        self._unknown[rank] = why

    def check(self, now_ns: int) -> list[Stalled]:
        """Collectives that have waited longer than the timeout for missing ranks, each once.

        Per group only the root cause is reported: the lowest sequence number some ranks wait
        in, and among ranks that disagree about what collective #k is, the largest party.
        """
        return self._stalled(now_ns)

    def check_at_end(self) -> list[Stalled]:
        """Every collective some ranks were inside and others were not when the log ended, each
        once and as :meth:`check` picks them, for a log with no clock for the wait: the timeout
        does not apply, ``waited_s`` is None and the text says only that the ranks wait."""
        return self._stalled(None)

    def _stalled(self, now_ns: int | None) -> list[Stalled]:
        stalled = []
        for group, parties in self._parties_by_group().items():
            seq = min(key[0] for key in parties)
            (_, op), (entered, waiting) = max(
                ((key, party) for key, party in parties.items() if key[0] == seq), key=lambda kv: len(kv[1][1])
            )
            waited_s = None if now_ns is None else (now_ns - entered.t_ns) / 1e9
            missing = [r for r in entered.group_ranks if r not in waiting]
            overdue = waited_s is None or waited_s >= self.timeout_s
            if not missing or not overdue or (group, seq) in self._reported:
                continue
            self._reported.add((group, seq))
            stalled.append(self._describe(group, entered, waiting, missing, waited_s))
        return stalled

    def _parties_by_group(self) -> dict[str, dict[tuple[int, str], tuple[_Entered, list[int]]]]:
        """group → (seq, op) → (earliest entry, ranks inside it), from each rank's current call."""
        found: dict[str, dict[tuple[int, str], tuple[_Entered, list[int]]]] = {}
        for rank, groups in sorted(self._inside.items()):
            for group, entered in groups.items():
                parties = found.setdefault(group, {})
                key = (entered.group_seq, entered.op)
                first, ranks = parties.get(key, (entered, []))
                parties[key] = (first if first.t_ns <= entered.t_ns else entered, [*ranks, rank])
        return found

    def _describe(self, group: str, entered: _Entered, waiting: list[int], missing: list[int],
                  waited_s: float | None) -> Stalled:
        seq, op = entered.group_seq, entered.op
        elsewhere = {}
        for rank in missing:
            there = self._inside.get(rank, {}).get(group)
            if there is not None:
                elsewhere[rank] = f"rank {rank} is in {there.op} #{there.group_seq}"
            elif rank in self._gone:
                elsewhere[rank] = f"rank {rank} has exited"
            elif rank in self._unknown:
                elsewhere[rank] = f"rank {rank}: {self._unknown[rank]}"
            elif rank in self._phase:
                elsewhere[rank] = f"rank {rank} never arrived (last seen in {self._phase[rank]})"
            else:
                elsewhere[rank] = f"rank {rank} never arrived (before its first phase)"
        ranks = ranks_text(waiting)
        plural = "ranks" if len(waiting) > 1 else "rank"
        how_long = "" if waited_s is None else f" {waited_s:.0f} s"
        text = (f"{op} #{seq} on group {group}: {plural} {ranks} waiting{how_long}; "
                + "; ".join(elsewhere[r] for r in missing))
        return Stalled(group, seq, op, waiting, elsewhere, waited_s, text)
