"""What every live reader gives: one :class:`Reading` of a running job (each rank's calls, or why
it could not be read), the :class:`Reader` protocol, and the waits a reading shows, keyed by the
call they wait in — its group's identity and number (:attr:`~..sources.run.Call.key`), never by
how the call or its group is worded.

A reader reads its source once per :meth:`Reader.read` (a job's worker servers, a run's own ranks,
a folder of NCCL Inspector files, each rank's stack by pid): adding a source is one more reader,
and the feed (:mod:`.feed`), the loop (:mod:`.loop`) and the session stay as they are.

A reader of stacks knows a call only by the function a rank is in and where the rank called it: no
stack holds its group or number. Its calls are keyed by that place (``all_reduce at job.py:14 in
main``) and a number the reader counts (each time ranks are seen entering it anew), and worded by
the reader (:attr:`Reading.call_texts`), never with that number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..sources.run import Call, Hop

__all__ = ["CallKey", "End", "RankRead", "Reader", "Reading", "Wait", "call_text", "waits_of"]

CallKey = tuple[str, int]
"""A call across its ranks: (its group's identity, its sequence number on that group)."""


def call_text(op: str, group: str, seq: int) -> str:
    """How call ``seq`` of ``op`` on the group labelled ``group`` is worded for the user
    (``all_reduce #6 on group 0 (default_pg)``): shown, never a key."""
    return f"{op} #{seq} on group {group}"


@dataclass(frozen=True)
class RankRead:
    """One rank as read, or why it could not be (``error``; ``slow`` when its source did not
    answer within the reading's deadline, rather than refused), and the host it runs on where the
    source says (a debug server's address, a relay's host; empty: not said)."""

    rank: int
    error: str = ""
    slow: bool = False
    host: str = ""
    ended: bool = False
    """Whether the rank will never be read (it ended and left nothing to read); any other rank not
    read now may be read later."""


@dataclass(frozen=True)
class End:
    """How a source says the job is over: ``ok`` or ``failed``, and why in one line."""

    status: str
    detail: str


@dataclass(frozen=True)
class Reading:
    """Every rank as one look at the source found it, the calls read (in step order: each rank's
    own order kept; a call a rank is still inside is not ``completed``), and what the source says
    of the job: its world size, backend and NCCL version where known; ``texts``: a step's name and
    narration for calls the source words itself (an Inspector record's NCCL figures; else the
    feed words them)."""

    ranks: Mapping[int, RankRead]
    calls: Sequence[Call] = ()
    world_size: int = 0
    backend: str = "unknown"
    nccl_version: str = ""
    texts: Mapping[CallKey, tuple[str, str]] = field(default_factory=dict)
    hops: Mapping[CallKey, Sequence[Hop]] = field(default_factory=dict)
    """Transfers the source reports for a call (an Inspector send's or receive's), by call."""
    whole: bool = True
    """Whether the reading holds every call still in flight on each rank read (a recorder's tail),
    so that a call it no longer holds is over for the ranks read; False: it holds only what is new
    since the reading before (a growing file), and a call is over once every member completed it."""
    call_texts: Mapping[CallKey, str] = field(default_factory=dict)
    """How the reader words a call :func:`call_text` cannot (one read from stacks: see the module)."""
    places: Mapping[int, str] = field(default_factory=dict)
    """Where each rank is beyond the call it is in, for a reader that reads every rank's stack at
    every reading (by pid): a rank in no collective, the line of its own code; one inside a call,
    the innermost native frame where C++ frames were read (else nothing). A snapshot of such a
    reading says where each rank is, not what it completed (a stack holds no history)."""

    @property
    def answered(self) -> list[int]:
        """The ranks read, in order."""
        return sorted(rank for rank, read in self.ranks.items() if not read.error)

    @property
    def gone(self) -> bool:
        """Whether no rank answered (the job ended, or every server is gone)."""
        return bool(self.ranks) and not self.answered


@dataclass(frozen=True)
class Wait:
    """Ranks waiting inside one call for others: the call (``key``, ``op``), who waits, who is
    missing (read, and not yet at the call), and when the first waiter issued it (ns since the
    epoch, the source's clock)."""

    key: CallKey
    op: str
    waiting: tuple[int, ...]
    missing: tuple[int, ...]
    issued_ns: int
    worded: str = ""
    """The reader's words for the call, where :func:`call_text` cannot word it."""
    group: str = ""
    """The label of the call's group, as the reading words it (empty: the key's identity is the label)."""

    @property
    def text(self) -> str:
        """The call as the user reads it."""
        return self.worded or call_text(self.op, self.group or self.key[0], self.key[1])


def waits_of(reading: Reading) -> dict[CallKey, Wait]:
    """The calls some ranks are inside while other members, read, have not issued them (their
    latest call on the group is earlier): who waits, who is missing. A member not read is unknown,
    never missing; a call every member read is inside is in flight, not a wait."""
    calls = reading.calls
    latest: dict[tuple[int, str], int] = {}
    for call in calls:
        group = call.key[0]
        latest[call.rank, group] = max(latest.get((call.rank, group), 0), call.group_seq)
    inside: dict[CallKey, list[Call]] = {}
    for call in calls:
        if not call.completed:
            inside.setdefault(call.key, []).append(call)
    answered = set(reading.answered)
    waits = {}
    for key, waiting in inside.items():
        members = waiting[0].group_ranks
        missing = tuple(rank for rank in members if rank in answered and latest.get((rank, key[0]), 0) < key[1])
        if missing:
            waits[key] = Wait(key, waiting[0].op, tuple(sorted(call.rank for call in waiting)), missing,
                              min(call.t_ns for call in waiting), reading.call_texts.get(key, ""), waiting[0].group)
    return waits


class Reader(Protocol):
    """One kind of running job, read again and again (see the module)."""

    def read(self) -> Reading:
        """Read the source once: every rank's calls (or why not), each request within its deadline."""

    def stacks(self, ranks: Sequence[int]) -> dict[int, str]:
        """rank → the line of its own code each of ``ranks`` is at, where the source has stacks
        (asked only for ranks others wait on); empty where it has none."""

    def run_start(self, reading: Reading) -> dict[str, Any] | None:
        """The RunStart's fields once ``reading`` holds a call (None: a launcher emits its own)."""

    def rank_start(self, rank: int, reading: Reading) -> dict[str, Any]:
        """A rank's RankStart fields (device, backend, host, pid), the first time it is read."""

    def ended(self, reading: Reading) -> End | None:
        """Whether the job is over after ``reading`` (None: read on)."""
