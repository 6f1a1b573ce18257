"""NCCL Inspector output followed while the job writes it: each batch of new lines becomes the
events no batch before gave (``collviz replay --follow``; the session is
:class:`~collviz.runtime.sessions.followed.FollowedSession`).

Lines are decoded and checked as the import does (:mod:`.inspector_records`: one record a line, or
v4.3's header once per ``dump_stats`` marker; a pretty-printed file is read by the import only); a
call is one step per (communicator, operation, ``coll_sn``), numbered from #1, its step created when
its first record arrives (a send's or receive's with its transfer). Each rank's record of it gives that rank's Phase and Collective begin and end once: a
record of a call already shown for its rank (the dump thread writes a communicator's last call
again while no new one completes) is dropped. A rank's record that arrives after other ranks'
joins the step already shown, as an attached job's late ranks do. The step's narration is its
first record's, NCCL's algbw and busbw labelled as NCCL's.

The job's world is the largest communicator of the first batch holding records (its size is the
RunStart's; a process is placed in it by its own records of it). A record of another
communicator waits until every one of its ranks' processes is placed, and a record of a larger
communicator than the world is left out (counted). Times are NCCL's (µs since the epoch), moved
onto the monotonic clock of collviz's own events.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..wire.protocol import NOT_RECORDED_OPTION, UNTIMED_OPTION, AnyEvent, RankEnd, RankStart
from .inspector_records import Header, Record, decode_line
from .nccl_inspector import (
    INSPECTOR_LABEL,
    NOT_RECORDED,
    OPS,
    REASON,
    UNTIMED,
    Comm,
    call_of,
    figures,
    hop_of,
    step_text,
)
from .run import Stamper, Step, emit_rank_step

__all__ = ["InspectorFollower"]

LIVE_NOTE = (" Followed live: the step's narration is its first record's; other ranks join it as their "
             "files grow.")
"""How a followed step's narration ends."""

_Key = tuple[str, str, int]
"""A call: (communicator, operation, coll_sn)."""


@dataclass
class _Shown:
    """A call's step as shown so far: its index, its text and the ranks whose record it has."""

    index: int
    step: Step
    ranks: set[int] = field(default_factory=set)


@dataclass
class InspectorFollower:
    """Turns the lines an Inspector folder gains into events (:meth:`take`), stamped for ``run``;
    ``announce`` is told each new step's one-line summary."""

    run: str
    announce: Callable[[str], None] | None = None
    world: Comm | None = None
    """The job's world communicator, once a batch held a record."""
    damaged: Counter[str] = field(default_factory=Counter)
    """Lines left out, by why (damaged input, operations collviz does not draw, larger communicators)."""
    _stamp: Stamper = field(init=False)
    _clock_ns: int = field(default_factory=lambda: time.monotonic_ns() - time.time_ns())
    _comms: dict[str, Comm] = field(default_factory=dict)
    _process_rank: dict[Path, int] = field(default_factory=dict)
    _members: dict[str, dict[int, int]] = field(default_factory=dict)
    """Each communicator's ranks placed so far: its rank → the job's."""
    _headers: dict[Path, Header] = field(default_factory=dict)
    """Each file's last v4.3 ``dump_stats`` marker: the header of its payloads after it."""
    _held: list[Record] = field(default_factory=list)
    _shown: dict[_Key, _Shown] = field(default_factory=dict)
    _last: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._stamp = Stamper(self.run)

    @property
    def held(self) -> int:
        """Records waiting for their communicator's ranks to be placed."""
        return len(self._held)

    def run_start(self) -> dict[str, Any]:
        """The RunStart's fields, once :attr:`world` is known."""
        if self.world is None:
            raise RuntimeError("no record has arrived: the job's size is not known")
        return dict(scenario="nccl-inspector", world_size=self.world.nranks, backend="nccl", device_kind="cuda",
                    backend_reason=REASON, mode="live", options={UNTIMED_OPTION: UNTIMED, NOT_RECORDED_OPTION: NOT_RECORDED},
                    description=(f"NCCL Inspector output followed live as its files grow: one step per call written, "
                                 f"with NCCL's own execution time, algbw and busbw ({INSPECTOR_LABEL}). The Inspector "
                                 "samples calls; it records no values, datatype or provenance."),
                    torch_version="not recorded", nccl_version="")

    def take(self, batch: Sequence[tuple[Path, Sequence[str]]]) -> list[AnyEvent]:
        """The events of the whole lines ``batch`` holds (per file), and of held records now placed."""
        records = self._held
        self._held = []
        for path, lines in batch:
            for line in lines:
                if not line.strip():
                    continue
                found = decode_line(path, line, self._headers.get(path))
                if isinstance(found, Header):
                    self._headers[path] = found  # a v4.3 marker: the header of the file's next payloads
                elif isinstance(found, str):
                    self.damaged[f"with {found}"] += 1
                elif found.op not in OPS:
                    self.damaged[f"of {found.op} calls (not drawn)"] += 1
                else:
                    records.append(found)
        if records and self.world is None:
            nranks = max(r.nranks for r in records)
            world = min(r.comm for r in records if r.nranks == nranks)
            self.world = self._comms[world] = Comm(world, nranks, {i: i for i in range(nranks)})
        for record in records:
            if self.world is not None and record.comm == self.world.id:
                self._process_rank.setdefault(record.file, record.rank)
        for record in records:
            if record.file in self._process_rank:
                self._members.setdefault(record.comm, {})[record.rank] = self._process_rank[record.file]
        for record in sorted(records, key=lambda r: (r.start_us or r.dump_us, r.sn)):
            self._place(record)
        events, self._stamp.events = self._stamp.events, []
        return events

    def finish(self) -> list[AnyEvent]:
        """Each rank's RankEnd (ok, at its last step), as the session ends."""
        for rank, last in sorted(self._last.items()):
            self._stamp(RankEnd, rank, time.monotonic_ns(), status="ok", phase=last)
        events, self._stamp.events = self._stamp.events, []
        return events

    def _comm(self, record: Record) -> Comm | None:
        """``record``'s communicator where every one of its ranks is placed in the job."""
        comm = self._comms.get(record.comm)
        if comm is not None:
            return comm
        members = self._members.get(record.comm, {})
        if len(members) < record.nranks:
            return None
        comm = self._comms[record.comm] = Comm(record.comm, record.nranks, members)
        return comm

    def _place(self, record: Record) -> None:
        """``record``'s events, or held until its communicator is placed, or counted as left out."""
        assert self.world is not None  # a record exists, so the world was chosen
        if record.nranks > self.world.nranks:
            self.damaged[f"of a communicator larger than the job's first ({self.world.nranks} ranks)"] += 1
            return
        comm = self._comm(record)
        if comm is None or record.rank not in comm.members:
            self._held.append(record)
            return
        call = call_of(record, comm)
        key = (record.comm, record.op, record.sn)
        shown = self._shown.get(key)
        if shown is None:
            name, narration = step_text(comm, record.sn, [(record, call)], LIVE_NOTE)
            hop = hop_of(record, comm)
            shown = self._shown[key] = _Shown(len(self._shown), Step(name=name, narration=narration, t_ns=call.t_ns,
                                                                     hops=[hop] if hop is not None else []))
            if self.announce is not None:
                self.announce(f"step {shown.index + 1}  {name}: {record.size:,} B per rank; "
                              f"NCCL's own figures: {figures(record, call.rank)}")
        if call.rank in shown.ranks:
            return  # written again by a later dump: already shown
        shown.ranks.add(call.rank)
        if call.rank not in self._last:
            self._stamp(RankStart, call.rank, call.t_ns + self._clock_ns, device="cuda", backend="nccl", host="", pid=0)
        emit_rank_step(self._stamp, shown.index, shown.step, call.rank, replace(call, t_ns=call.t_ns + self._clock_ns))
        self._last[call.rank] = max(self._last.get(call.rank, -1), shown.index)
