"""Reading an ``NCCL_DEBUG=INFO`` log line by line: what each rank of each communicator printed.

A record is ``host:pid:tid [dev] NCCL INFO message`` after whatever a launcher put before it —
mpirun's ``[1,0]<stdout>:``, torchrun's ``[default0]:`` or ``[rank0]:``, srun's ``0: ``, a
``[155] `` or a timestamp — which is skipped, so every launcher's log reads the same; a line may
hold several (:mod:`.nccl_records` splits them). ``NCCL WARN`` and ``NCCL ERROR`` records are kept
for :mod:`.nccl_failures`. What NCCL printed in each version from 2.4 to 2.28:

- a rank of a communicator: ``comm 0x… rank R nranks N cudaDev D busId B`` (``nRanks`` since
  2.19, ``commId`` where printed; ``… - Init START`` first since 2.14, ``… - Init COMPLETE``
  last; a ``Destroy`` line is not a new one);
- its rings: the order (``Ring 00 : 0 1 2 3`` up to 2.3, ``Channel 00 :    0   1`` in 2.4,
  ``Channel 00/02 :    0   1   2   3`` since; at most 20 ranks up to 2.22, a line cut at 128
  characters ending ``...`` since 2.23) or this rank's neighbours (``Ring 00 : 3 -> 0 -> 1``);
- its trees: ``Trees [0] 22->23->-1/-1/-1`` (2.4: parent → rank → children), ``Trees [0]
  -1/-1/-1->3->2|2->3->-1/-1/-1`` (2.5: the same tree both ways), ``Trees [0] 3/-1/-1->2->1``
  (2.7 on: children → rank → parent), ``Tree 12 : -1 -> 0 -> -1/-1/-1`` (2.4's other form);
- the transport of each link (``Channel 00/0 : 0[0] -> 1[1] via P2P/IPC``, ``Ring 00 : 7 -> 8
  [receive] via NET/AWS Libfabric/0``), the network (``Using network AWS Libfabric``), the init
  time (``Init timings - ncclCommInitRank: rank 0 nranks 4 total 0.53 (…)``);
- per call (``NCCL_DEBUG_SUBSYS=COLL``): ``AllReduce: opCount 1a sendbuff … count 64 datatype 7 op 0
  root 0 comm 0x… [nranks=2] …`` and its tuning line (:func:`~..reports.nccl_log.nccl_choice`).

Lines come in any order. A thread prints its communicator's rings and trees after announcing it
(since 2.14) or before its ``Init COMPLETE`` line (up to 2.18, where nothing else names it first):
so a thread's lines wait for the next communicator line it prints, or go to the communicator it
is still setting up; whatever is left at the end goes to its process's latest communicator on that
device. A thread whose communicator line is not in the log (an excerpt, a partial log) is the
rank its own lines say — the middle of its ``Trees`` or ``Ring a -> r -> b`` line, the sending
end of a link it prints (the receiving end of one marked ``[receive]``); a ``Destroy`` line names
its rank too. A process may drive several ranks (one thread per GPU, as nccl-tests does): a rank is a
(host, process, device), never a process alone. A log of per-call lines only (no init) still
names each call's communicator and its size.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import cast

from ..reports.nccl_log import NCCL_OPS, NcclChoice, nccl_choice
from .names import nccl_dtype_name
from .nccl_records import Record, device_number, records
from .plausible import MAX_RANKS, rank_ok
from .reading import MAX_LINE_CHARS

__all__ = ["Comm", "LoggedCall", "LogReader", "has_nccl_lines", "MAX_WARNINGS_KEPT"]

MAX_WARNINGS_KEPT = 1000
"""The most WARN and ERROR records a reader keeps (it counts every one)."""

_COMM = re.compile(r"\bcomm (?P<ptr>0x[0-9a-fA-F]+) rank (?P<rank>\d{1,12}) nr?anks (?P<n>\d{1,12})", re.IGNORECASE)
_FIELDS = re.compile(r"\b(?:(?P<key>cudaDev|busId) (?P<value>\S+)|commId (?P<id>0x[0-9a-fA-F]+)\b)")
_ORDER = re.compile(r"^(?:Ring|Channel) (?P<ch>\d{1,12})(?:/\d{1,12})? :(?P<ranks>(?:\s+\d{1,12})+)(?P<cut>\s*\.\.\.)?\s*$")
_NEIGHBOURS = re.compile(r"^Ring (?P<ch>\d{1,12}) : (?P<prev>-?\d{1,12}) -> (?P<me>\d{1,12}) -> (?P<next>-?\d{1,12})\s*$")
_LINK = re.compile(r"^(?:Ring|Channel) (?P<ch>\d{1,12})(?:/\d{1,12})? : (?P<src>\d{1,12})(?:\[[^\]]*\])? -> (?P<dst>\d{1,12})(?:\[[^\]]*\])?"
                   r"(?: \[(?P<way>send|receive)\])? via (?P<via>.+?)\s*$")
_TREE_ENDS = r"(?:-?\d{1,12}/)*-?\d{1,12}"
_TREES = re.compile(rf"\[(?P<ch>\d{{1,12}})\] (?P<left>{_TREE_ENDS})->(?P<me>\d{{1,12}})->(?P<right>{_TREE_ENDS})")
_TREE_OLD = re.compile(rf"^Tree (?P<ch>\d{{1,12}}) : (?P<up>-?\d{{1,12}}) -> (?P<me>\d{{1,12}}) -> (?P<down>{_TREE_ENDS})\s*$")
_NETWORK = re.compile(r"Using network (?P<net>.+?)\s*$")
_TIMINGS = re.compile(r"Init timings(?: - \w+)?: rank (?P<rank>\d{1,12}) nranks (?P<n>\d{1,12}) total (?P<total>\d{1,9}(?:\.\d{1,9})?)"
                      r"(?: \((?P<parts>[^)]*)\))?")
_CALL = re.compile(r"^(?P<op>\w+): opCount (?P<number>[0-9a-fA-F]{1,16}) sendbuff \S+ recvbuff \S+ count (?P<count>\d{1,20}) "
                   r"datatype (?P<dtype>\d{1,12}) op \d{1,12} root (?P<root>-?\d{1,12}) comm (?P<ptr>0x[0-9a-fA-F]+)"
                   r"(?: \[nranks=(?P<n>\d{1,12})\])?")
_VERSION = re.compile(r"NCCL version (?P<version>\d[\w.+-]*)")
_P2P_OPS = ("Send", "Recv")


def has_nccl_lines(text: str) -> bool:
    """Whether ``text`` holds lines NCCL's debug output prints (``host:pid:tid [dev] NCCL INFO``, or
    a ``NCCL WARN`` of any prefix)."""
    return any(records(line) for line in text.splitlines() if "NCCL" in line)


@dataclass
class LoggedCall:
    """One call a rank logged on one communicator, with NCCL's choice where it printed one.
    ``number``: NCCL's opCount on that communicator (from 0), or None (a tuning line alone)."""

    op: str
    number: int | None
    count: int | None
    dtype: str
    root: int | None
    choice: NcclChoice | None = None


@dataclass
class Comm:
    """One rank's view of one communicator: who it is there and what it printed about it.

    ``rank`` is None for a communicator known only from per-call lines (which do not say it).
    """

    host: str
    pid: int
    ptr: str
    rank: int | None
    size: int
    device: int | None
    order: int
    bus: str = ""
    comm_id: str = ""
    rings: dict[int, int] = field(default_factory=dict)
    """channel → the next rank (communicator ranks)."""
    orders: dict[int, list[int]] = field(default_factory=dict)
    """channel → the ring's order, as far as the log prints it."""
    cut: dict[int, str] = field(default_factory=dict)
    """channel → who cut its order line: ``nccl`` (it ends ``...``, NCCL 2.23 on) or ``reader`` (the
    line was longer than the longest one read, :data:`~.reading.MAX_LINE_CHARS`)."""
    trees: dict[int, int] = field(default_factory=dict)
    """channel → the parent rank (-1: this rank is the root)."""
    children: dict[int, list[int]] = field(default_factory=dict)
    """channel → the children this rank printed (its ``Trees`` line names both ends)."""
    links: dict[tuple[int, int], str] = field(default_factory=dict)
    init_s: float | None = None
    init_parts: str = ""
    calls: list[LoggedCall] = field(default_factory=list)
    inferred: bool = False
    """Whether no line announced it: its rank is the one its thread's ring, tree and link lines say
    it is, its size unknown (0)."""

    @property
    def agent(self) -> tuple[str, int, int | None]:
        """The rank's place: (host, process, device) — one process may drive several ranks."""
        return (self.host, self.pid, self.device)


@dataclass(frozen=True)
class _Record:
    """A line about a communicator: the ranks of it the line names, one of which must be the
    communicator's own (empty: any), what the line sets on it, and which setting that is (``key``:
    a later line of the same key sets the same fields, so it replaces an earlier one still
    waiting for its communicator — a log repeating its channel lines stays a few records)."""

    ranks: tuple[int, ...]
    sets: Callable[[Comm], None]
    key: Hashable
    me: int | None = None
    """The rank of the thread that printed the line, where the line says it (a tree's or a ring
    neighbour's middle rank, a link's sending end, or its receiving end when marked ``[receive]``)."""

    def fits(self, comm: Comm) -> bool:
        """Whether the line can be about ``comm``: it names ``comm``'s rank, within its size."""
        if not self.ranks or comm.rank is None:
            return True
        return comm.rank in self.ranks and (not comm.size or max(self.ranks) < comm.size)


@dataclass
class _Thread:
    open: Comm | None = None
    """The communicator the thread announced and has not yet completed."""
    pending: dict[Hashable, _Record] = field(default_factory=dict)
    """The lines read before their communicator was announced, by :attr:`_Record.key`, in the order
    last read (a repeat moves to the end, as applying every line in turn would leave it)."""
    last_call: LoggedCall | None = None
    device: int | None = None


class LogReader:
    """Reads a log's lines (:meth:`feed`), then gives every communicator rank found (:meth:`comms`)."""

    def __init__(self) -> None:
        self._comms: dict[tuple[str, int, str], Comm] = {}
        self._threads: dict[tuple[str, int, int], _Thread] = {}
        self.versions: set[str] = set()
        self.networks: dict[tuple[str, int], str] = {}
        self.lines = 0
        """NCCL lines read."""
        self.p2p = 0
        """Point-to-point calls (Send/Recv) left out."""
        self.damaged = 0
        """Lines whose numbers cannot be (rank ≥ nranks, more ranks than any job, an opCount past 2⁶²)."""
        self.warnings: list[Record] = []
        """The first :data:`MAX_WARNINGS_KEPT` ``NCCL WARN`` and ``NCCL ERROR`` records, in log order."""
        self.warning_count = 0
        """Every ``NCCL WARN`` and ``NCCL ERROR`` record read."""
        self._calls: Counter[tuple[str, int] | None] = Counter()
        """Call lines read so far, by process (host, pid), and in all (None)."""
        self._calls_at_warning: list[int] = []
        """For each kept warning, the calls its process (all processes, where it names none) had
        logged when it was printed."""
        self.loose = Comm("", 0, "", None, 0, None, -1)
        """The ring orders (:attr:`Comm.orders`, :attr:`Comm.cut`) printed by threads the log never
        names a rank of."""
        self.unplaced = 0
        """Ring, tree and link lines of threads whose rank the log never says: not drawn."""
        self.long_lines = 0
        """Lines of NCCL records cut at :data:`~.reading.MAX_LINE_CHARS` (their rest is not read)."""
        self.nuls = 0
        """NUL bytes passed over (a crash leaves them in a log where it was writing)."""

    def feed(self, line: str) -> None:
        """Read one line of the log (anything that is not an NCCL record is passed over; records
        glued on one line are read one by one)."""
        if "\x00" in line:  # what a crash leaves where it was writing
            self.nuls += line.count("\x00")
            line = line.replace("\x00", "")
        if "NCCL" not in line:
            return
        if (version := _VERSION.search(line)) is not None:
            self.versions.add(version["version"])
        cut = len(line) >= MAX_LINE_CHARS  # the file's reader kept this much of a longer line
        self.long_lines += cut
        for record in records(line):
            self.lines += 1
            if record.level != "INFO":
                self.warning_count += 1
                if len(self.warnings) < MAX_WARNINGS_KEPT:
                    self.warnings.append(record)
                    self._calls_at_warning.append(self._calls[_process(record)])
            elif record.host is not None:
                self._read(record, cut)

    def calls_after(self, index: int) -> int:
        """How many call lines the process of kept warning ``index`` (every process, where its
        prefix names none) logged after it: whether the job went on past it."""
        return self._calls[_process(self.warnings[index])] - self._calls_at_warning[index]

    def _read(self, record: Record, cut: bool) -> None:
        host, pid, msg = cast(str, record.host), record.pid, record.message
        thread = self._threads.setdefault((host, pid, record.tid), _Thread())
        thread.device = record.device
        if (found := _CALL.match(msg)) is not None:
            self._calls[host, pid] += 1
            self._calls[None] += 1
            self._call(host, pid, thread, found)
        elif " Bytes -> Algo " in msg and (choice := nccl_choice(f"NCCL INFO {msg}")) is not None:
            self._choice(thread, choice)
        elif (found := _COMM.search(msg)) is not None and "Init timings" not in msg:
            self._announce(host, pid, thread, found, msg, closing="Destroy" in msg or "Abort" in msg)
        elif (found := _NETWORK.search(msg)) is not None:
            self.networks[(host, pid)] = found["net"]
        elif (topology := _record(msg, cut)) is not None:
            if thread.open is not None:
                _apply(thread.open, topology)
            else:
                thread.pending.pop(topology.key, None)
                thread.pending[topology.key] = topology

    def network(self, host: str, pid: int) -> str:
        """The network a process said it uses, else one another process of its host said ("")."""
        return self.networks.get((host, pid)) or next((n for (h, _), n in self.networks.items() if h == host), "")

    def comms(self) -> list[Comm]:
        """Every communicator rank the log names, in the order it first named them; lines still
        waiting for their communicator go to their process's latest one on the same device, else
        to one their thread's own lines name (:attr:`Comm.inferred`); a ring order no rank can
        take is kept in :attr:`loose`, any other line counted in :attr:`unplaced`."""
        by_process: dict[tuple[str, int], list[Comm]] = defaultdict(list)
        for comm in self._comms.values():
            by_process[(comm.host, comm.pid)].append(comm)
        for (host, pid, _), thread in self._threads.items():
            left = []
            for record in thread.pending.values():
                fitting = [c for c in by_process[(host, pid)] if c.device in (thread.device, None) and record.fits(c)]
                if fitting:
                    _apply(max(fitting, key=lambda c: c.order), record)
                else:
                    left.append(record)
            thread.pending.clear()
            if left:
                self._infer(host, pid, thread.device, left, by_process[(host, pid)])
        return sorted(self._comms.values(), key=lambda c: c.order)

    def _infer(self, host: str, pid: int, device: int | None, left: list[_Record], known: list[Comm]) -> None:
        """Place the lines of a thread no communicator line names: on the rank they say it is."""
        said = {record.me for record in left if record.me is not None}
        comm = None
        if len(said) == 1:
            comm = self._comm(host, pid, f"inferred:{device}", said.pop(), 0, device)
            comm.inferred = True
            known.append(comm)
        for record in left:
            if comm is not None and record.fits(comm):
                record.sets(comm)
            elif not record.ranks:  # a ring order, the same on every rank: the communicator's, not this thread's
                record.sets(self.loose)
            else:
                self.unplaced += 1

    def _comm(self, host: str, pid: int, ptr: str, rank: int | None, size: int, device: int | None) -> Comm:
        key = (host, pid, ptr)
        if key not in self._comms:
            self._comms[key] = Comm(host, pid, ptr, rank, size, device, len(self._comms))
        return self._comms[key]

    def _announce(self, host: str, pid: int, thread: _Thread, found: re.Match[str], msg: str, closing: bool) -> None:
        """A communicator line: a new rank of one, or (``closing``: a ``Destroy`` or ``Abort`` line)
        one whose lines are over — which still says the rank, its size and device, so a log of
        only those reads as the ranks they name."""
        rank, size = int(found["rank"]), int(found["n"])
        if not (rank_ok(rank, size) and size <= MAX_RANKS):
            self.damaged += 1
            return
        fields = {m["key"] or "commId": m["value"] or m["id"] for m in _FIELDS.finditer(msg)}
        device = device_number(fields.get("cudaDev", "")) if "cudaDev" in fields else thread.device
        comm = self._comm(host, pid, found["ptr"], int(found["rank"]), int(found["n"]), device)
        comm.rank, comm.size = int(found["rank"]), int(found["n"])
        comm.device = device if device is not None else comm.device
        comm.bus = fields.get("busId", comm.bus)
        comm.comm_id = fields.get("commId", comm.comm_id)
        if closing:
            return
        for record in thread.pending.values():
            _apply(comm, record)
        thread.pending.clear()
        thread.open = None if msg.rstrip().endswith("COMPLETE") else comm

    def _call(self, host: str, pid: int, thread: _Thread, found: re.Match[str]) -> None:
        if found["op"] in _P2P_OPS:
            self.p2p += 1
            thread.last_call = None
            return
        size = int(found["n"]) if found["n"] else 0
        if size > MAX_RANKS or int(found["number"], 16) >= 1 << 62:
            self.damaged += 1
            return
        comm = self._comm(host, pid, found["ptr"], None, size, thread.device)
        comm.size = comm.size or size
        root = int(found["root"]) if found["op"] in ("Broadcast", "Reduce") else None
        call = LoggedCall(NCCL_OPS.get(found["op"], found["op"].lower()), int(found["number"], 16),
                          int(found["count"]), nccl_dtype_name(int(found["dtype"])), root)
        comm.calls.append(call)
        thread.last_call = call

    def _choice(self, thread: _Thread, choice: NcclChoice) -> None:
        last, thread.last_call = thread.last_call, None
        if last is not None and last.op == choice.op and last.choice is None:
            last.choice = choice


def _process(record: Record) -> tuple[str, int] | None:
    """The (host, pid) that printed ``record``, or None where its prefix is cut off."""
    return None if record.host is None else (record.host, record.pid)


def _apply(comm: Comm, record: _Record) -> None:
    if record.fits(comm):
        record.sets(comm)


def _record(msg: str, cut: bool = False) -> _Record | None:
    """What a topology or timing line sets on its communicator, or None for any other line
    (``cut``: the line is the first part of a longer one, its last number perhaps cut too)."""
    if (found := _NEIGHBOURS.match(msg)) is not None:
        channel, after = int(found["ch"]), int(found["next"])
        me = int(found["me"])
        return _Record((me,), lambda c: c.rings.__setitem__(channel, after), ("ring", channel, me), me)
    if (found := _ORDER.match(msg)) is not None:
        channel, order = int(found["ch"]), [int(r) for r in found["ranks"].split()]
        by = "nccl" if found["cut"] is not None else "reader" if cut else ""
        shown = order[:-1] if by == "reader" else order  # a line the reader cut may end in part of a number
        return _Record((), lambda c: _set_order(c, channel, shown, by), ("order", channel))
    if (found := _LINK.match(msg)) is not None:
        link, via = (int(found["src"]), int(found["dst"])), found["via"]
        return _Record(link, lambda c: c.links.__setitem__(link, via), ("link", link),
                       link[1] if found["way"] == "receive" else link[0])
    if msg.startswith("Trees"):
        ends: dict[int, tuple[int, int, list[int]]] = {}
        for part in _TREES.finditer(msg):
            if int(part["ch"]) not in ends:  # 2.5 prints each tree both ways: its first reading
                ends[int(part["ch"])] = (int(part["me"]), *_tree_ends(part["left"], part["right"]))
        if not ends:
            return None
        me = next(iter(ends.values()))[0]
        return _Record((me,), lambda c: _set_tree(c, ends), ("tree", me, tuple(ends)), me)
    if (found := _TREE_OLD.match(msg)) is not None:
        tree = {int(found["ch"]): (int(found["me"]), int(found["up"]), _ranks(found["down"]))}
        me = int(found["me"])
        return _Record((me,), lambda c: _set_tree(c, tree), ("tree", me, tuple(tree)), me)
    if (found := _TIMINGS.search(msg)) is not None:
        total, parts = float(found["total"]), found["parts"] or ""
        rank = int(found["rank"])
        return _Record((rank,), lambda c: _set_init(c, total, parts), ("init", rank))
    return None


def _ranks(text: str) -> list[int]:
    return [int(r) for r in text.split("/") if int(r) >= 0]


def _tree_ends(left: str, right: str) -> tuple[int, list[int]]:
    """(parent, children) of ``left->me->right``: the children are the end with slashes (2.7 on:
    children on the left; 2.4: on the right)."""
    if "/" in right and "/" not in left:
        return int(left), _ranks(right)
    return int(right.split("/")[0]), _ranks(left)


def _set_order(comm: Comm, channel: int, order: list[int], by: str) -> None:
    comm.orders[channel] = order
    if by:
        comm.cut[channel] = by
    else:
        comm.cut.pop(channel, None)


def _set_init(comm: Comm, total: float, parts: str) -> None:
    comm.init_s, comm.init_parts = total, parts


def _set_tree(comm: Comm, ends: dict[int, tuple[int, int, list[int]]]) -> None:
    for channel, (_, parent, children) in ends.items():
        comm.trees[channel] = parent
        comm.children[channel] = children
