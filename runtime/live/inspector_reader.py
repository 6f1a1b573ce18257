"""A running job's NCCL Inspector folder, read as its files grow (``collviz replay --follow DIR``):
one more live reader, whose readings the feed shows as any other's.

Each reading takes what the folder's files gained (:class:`~..sources.growing.GrowingFiles`: whole
lines only, a cut last line kept for the next reading, at most ``budget`` bytes a reading). Lines
are decoded and checked as the import does (:mod:`~..sources.inspector_records`: one record a
line, or v4.3's header once per ``dump_stats`` marker, whose counts of records NCCL dropped are
announced and said at the end; ``proxy_trace`` records are counted as not drawn, not as damage); a
call is one step per (communicator, operation, ``coll_sn``), numbered from #1, worded by its first
record (NCCL's algbw and busbw labelled as NCCL's; a send's or receive's transfer with it). A record
of a call already read for its rank (the dump thread writes a communicator's last call again while
no new one completes) is dropped.

The job's world is the largest communicator of the first reading holding records (its size is the
RunStart's; a process is placed in it by its own records of it). A record of another communicator
waits until every one of its ranks' processes is placed, and a record of a larger communicator
than the world is left out (counted). Times are NCCL's (µs since the epoch). The job is over once
the folder has not grown for ``idle_s`` seconds (failed, where no record ever came).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..sources.growing import GrowingFiles
from ..sources.inspector_records import Header, Marker, Record, Undrawn, decode_line, dropped_warning, undrawn_warning
from ..sources.nccl_inspector import (
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
from ..sources.run import Call, Hop
from ..wire.protocol import NOT_RECORDED_OPTION, UNTIMED_OPTION
from .reading import CallKey, End, RankRead, Reading

__all__ = ["InspectorReader"]

LIVE_NOTE = (" Followed live: the step's narration is its first record's; other ranks join it as their "
             "files grow.")
"""How a followed step's narration ends."""


@dataclass
class InspectorReader:
    """Reads the Inspector ``folder`` (see the module): at most ``budget`` bytes a reading, over
    once it has not grown for ``idle_s``; ``announce`` is told each new step's one-line summary."""

    folder: Path
    idle_s: float = 60.0
    budget: int = 4 << 20
    announce: Callable[[str], None] | None = None
    world: Comm | None = None
    """The job's world communicator, once a reading held a record."""
    damaged: Counter[str] = field(default_factory=Counter)
    """Lines left out, by why (damaged input, operations collviz does not draw, larger communicators)."""
    dropped: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Records NCCL dropped before writing them, by (file name, kind), as its ``dump_stats`` markers count them."""
    undrawn: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Records of sections collviz does not draw (``proxy_trace``), by (file name, section): not damage."""
    _files: GrowingFiles = field(init=False)
    _grew_at: float = field(default_factory=time.monotonic)
    _error: str = ""
    _comms: dict[str, Comm] = field(default_factory=dict)
    _process_rank: dict[Path, int] = field(default_factory=dict)
    _members: dict[str, dict[int, int]] = field(default_factory=dict)
    """Each communicator's ranks placed so far: its rank → the job's."""
    _headers: dict[Path, Header] = field(default_factory=dict)
    """Each file's last v4.3 ``dump_stats`` marker: the header of its payloads after it."""
    _held: list[Record] = field(default_factory=list)
    _keys: dict[tuple[str, str, int], CallKey] = field(default_factory=dict)
    _read: set[tuple[tuple[str, str, int], int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not self.folder.is_dir():
            raise UsageError(f"{self.folder}: --follow reads a folder of NCCL Inspector files (NCCL_INSPECTOR_DUMP_DIR)")
        self._files = GrowingFiles(self.folder, budget=self.budget)

    def read(self) -> Reading:
        """What the folder gained since the last reading, as calls."""
        try:
            batch = self._files.read()
        except OSError as exc:
            self._error = f"{self.folder}: cannot be read ({exc.strerror or exc})"
            return Reading({})
        if batch:
            self._grew_at = time.monotonic()
        calls: list[Call] = []
        texts: dict[CallKey, tuple[str, str]] = {}
        hops: dict[CallKey, list[Hop]] = {}
        for record in self._records(batch):
            found = self._place(record, texts, hops)
            if found is not None:
                calls.append(found)
        ranks = {} if self.world is None else {rank: RankRead(rank) for rank in sorted(set(self._process_rank.values()))}
        return Reading(ranks, calls, self.world.nranks if self.world else 0, "nccl", "", texts, hops, whole=False)

    def stacks(self, ranks: Sequence[int]) -> dict[int, str]:
        """An Inspector folder holds no stacks."""
        return {}

    def run_start(self, reading: Reading) -> dict[str, Any] | None:
        """The RunStart of the followed job (its size: the world communicator's)."""
        return dict(scenario="nccl-inspector", world_size=self.world.nranks if self.world else 0, backend="nccl",
                    device_kind="cuda", backend_reason=REASON, mode="live",
                    options={UNTIMED_OPTION: UNTIMED, NOT_RECORDED_OPTION: NOT_RECORDED},
                    description=(f"NCCL Inspector output followed live as its files grow: one step per call written, "
                                 f"with NCCL's own execution time, algbw and busbw ({INSPECTOR_LABEL}). The Inspector "
                                 "samples calls; it records no values, datatype or provenance."),
                    torch_version="not recorded", nccl_version="")

    def rank_start(self, rank: int, reading: Reading) -> dict[str, Any]:
        """A process of the job: on CUDA, with NCCL, where NCCL does not say."""
        return dict(device="cuda", backend="nccl", host="", pid=0)

    def ended(self, reading: Reading) -> End | None:
        """Over once the folder cannot be read, or has not grown for ``idle_s`` (see the module)."""
        if self._error:
            return End("failed", self._error)
        if time.monotonic() - self._grew_at < self.idle_s:
            return None
        if self.world is None:
            return End("failed", f"{self.folder}: no NCCL Inspector record in {self.idle_s:g} s (is it the job's "
                       "NCCL_INSPECTOR_DUMP_DIR, with NCCL_INSPECTOR_ENABLE=1?)" + self._left_out())
        return End("ok", f"{self.folder} has not grown for {self.idle_s:g} s: followed to its end" + self._left_out())

    def _records(self, batch: Sequence[tuple[Path, Sequence[str]]]) -> list[Record]:
        """The records of ``batch``'s whole lines, and those held before, in time order; the world
        chosen and processes placed by them."""
        records = self._held
        self._held = []
        for path, lines in batch:
            for line in lines:
                if not line.strip():
                    continue
                found = decode_line(path, line, self._headers.get(path))
                if isinstance(found, Marker):
                    self._marked(path, found)
                elif isinstance(found, Undrawn):
                    self.undrawn[path.name, found.section] += 1
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
        return sorted(records, key=lambda r: (r.start_us or r.dump_us, r.sn))

    def _marked(self, path: Path, marker: Marker) -> None:
        """A ``dump_stats`` marker of ``path`` read: its header kept for the file's next (v4.3)
        payloads, and the records NCCL dropped counted and announced."""
        if isinstance(marker.header, Header):
            self._headers[path] = marker.header
        else:
            self._headers.pop(path, None)
            self.damaged[f"with {marker.header}"] += 1
        for kind, n in marker.dropped.items():
            if n:
                self.dropped[path.name, kind] += n
                if self.announce is not None:
                    self.announce(dropped_warning(path.name, kind, n))

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

    def _place(self, record: Record, texts: dict[CallKey, tuple[str, str]], hops: dict[CallKey, list[Hop]]) -> Call | None:
        """``record``'s call, or None where it is held until its communicator is placed, left out,
        or read before for its rank; the call's step worded in ``texts`` and its transfer in
        ``hops`` (a send's or receive's) when it is new."""
        assert self.world is not None  # a record exists, so the world was chosen
        if record.nranks > self.world.nranks:
            self.damaged[f"of a communicator larger than the job's first ({self.world.nranks} ranks)"] += 1
            return None
        comm = self._comm(record)
        if comm is None or record.rank not in comm.members:
            self._held.append(record)
            return None
        call = call_of(record, comm)
        place = (record.comm, record.op, record.sn)
        key = self._keys.get(place)
        if key is None:
            key = self._keys[place] = call.key
            texts[key] = step_text(comm, record.sn, [(record, call)], LIVE_NOTE)
            hop = hop_of(record, comm)
            if hop is not None:
                hops[key] = [hop]
            if self.announce is not None:
                self.announce(f"step {len(self._keys)}  {texts[key][0]}: {record.size:,} B per rank; "
                              f"NCCL's own figures: {figures(record, call.rank)}")
        if (place, call.rank) in self._read:
            return None  # written again by a later dump: already read
        self._read.add((place, call.rank))
        return call

    def _left_out(self) -> str:
        """What the run's end says of lines not shown, and of records NCCL dropped before writing them."""
        parts = [f"{n} line{'s' if n > 1 else ''} {why}" for why, n in sorted(self.damaged.items())]
        parts += [undrawn_warning(name, section, n) for (name, section), n in sorted(self.undrawn.items())]
        if self._held:
            parts.append(f"{len(self._held)} records of communicators whose ranks' processes were never placed")
        if self._files.cut_lines:
            parts.append(f"a cut last line in {len(self._files.cut_lines)} files")
        sampled = [dropped_warning(name, kind, n) for (name, kind), n in sorted(self.dropped.items())]
        return ((f" (left out: {'; '.join(parts)})" if parts else "")
                + (f" ({'; '.join(sampled)})" if sampled else ""))
