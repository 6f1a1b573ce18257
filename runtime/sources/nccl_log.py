"""An ``NCCL_DEBUG=INFO`` log: the rings and trees NCCL built, its transport, its init times, and
each call's algorithm and protocol.

One file holds every rank's lines (or one file per process, ``NCCL_DEBUG_FILE=nccl.%h.%p.log``);
each line starts ``host:pid:tid [device] NCCL INFO``. What is read:

- ``comm 0x… rank R nranks N …`` (``nRanks`` in newer versions, ``commId 0x…`` where printed):
  which process is which rank of which communicator; a process's largest communicator is taken as
  the world, its rank as the process's global rank;
- ``Ring 00 : 3 -> 0 -> 1`` (previous → this rank → next) and, where no ring lines are printed,
  ``Channel 00/02 :    0   1   2   3`` (the ring's order); ``Trees [0] 1/2/-1->0->-1 …`` (children →
  this rank → parent); ``Channel 00/0 : 0[0] -> 1[1] via P2P/IPC`` (the transport of each link);
  ``Using network Socket``; ``Init timings - ncclCommInitRank: rank 0 nranks 4 total 0.53 (…)``;
- per call (``NCCL_DEBUG_SUBSYS=COLL``) ``AllReduce: opCount 3 sendbuff … count 262144 datatype 7
  op 0 root 0 comm 0x… [nranks=4] …``, and its tuning line ``AllReduce: 1048576 Bytes -> Algo
  RING proto LL128 …`` (read by :func:`~..reports.nccl_log.nccl_choice`).

The rings and trees become steps of ``p2p`` Transfer events, drawn as collviz draws its own
``--algo ring|tree`` hops (a ring: every rank sends to the next; a tree: up level by level, then
down), each labelled as NCCL's reported topology, not observed data; the log gives no byte counts
for them (0). Each call is a step with NCCL's algorithm and protocol in its narration, labelled as
NCCL's own report. The log has no clock, so steps go in log order and no call has a duration. GPU
only: these machines have none, so this is read from the format NCCL prints (see the tests'
fixture) and labelled *not verified here (no GPU)*.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import UsageError
from ..observation.rank_lists import ranks_text
from ..reports.nccl_log import NCCL_LABEL, NCCL_OPS, NcclChoice, nccl_choice
from .names import itemsize, nccl_dtype_name
from .run import (
    Call,
    Hop,
    ImportedRun,
    Origin,
    Progress,
    Step,
    build_run,
    no_progress,
    order_steps,
)

__all__ = ["TOPOLOGY_LABEL", "is_nccl_log", "import_nccl_log"]

TOPOLOGY_LABEL = "NCCL's reported topology, not observed data"
"""How every ring and tree hop is labelled."""

_MARK = re.compile(r"NCCL (?:INFO|WARN) ")
_PREFIX = re.compile(r"(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) \[[^\]]*\] NCCL (?:INFO|WARN) (?P<msg>.*)")
_COMM = re.compile(r"comm (?P<ptr>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nr?anks (?P<n>\d+)(?:.*commId (?P<id>0x[0-9a-fA-F]+))?",
                   re.IGNORECASE)
_RING = re.compile(r"^Ring (?P<ch>\d+) : (?P<prev>-?\d+) -> (?P<me>\d+) -> (?P<next>-?\d+)\s*$")
_TREES = re.compile(r"\[(?P<ch>\d+)\] (?P<down>-?\d+(?:/-?\d+)*)->(?P<me>\d+)->(?P<up>-?\d+)")
_ORDER = re.compile(r"^Channel (?P<ch>\d+)/\d+ :(?P<ranks>(?:\s+\d+)+)\s*$")
_LINK = re.compile(r"^Channel (?P<ch>\d+)(?:/\d+)? : (?P<src>\d+)\[[^\]]*\] -> (?P<dst>\d+)\[[^\]]*\]"
                   r"(?: \[(?:send|receive)\])? via (?P<via>\S+)")
_NETWORK = re.compile(r"Using network (?P<net>\S+)")
_TIMINGS = re.compile(r"Init timings(?: - \w+)?: rank (?P<rank>\d+) nranks (?P<n>\d+) total (?P<total>[\d.]+)(?: \((?P<parts>[^)]*)\))?")
_CALL = re.compile(r"^(?P<op>\w+): opCount (?P<count_op>[0-9a-fA-F]+) sendbuff \S+ recvbuff \S+ count (?P<count>\d+) "
                   r"datatype (?P<dtype>\d+) op \d+ root (?P<root>-?\d+) comm (?P<ptr>0x[0-9a-fA-F]+)")
_VERSION = re.compile(r"NCCL version (?P<version>\S+)")


def is_nccl_log(text: str) -> bool:
    """Whether ``text`` has NCCL's debug lines."""
    return _MARK.search(text) is not None


@dataclass
class _Comm:
    """One process's view of one communicator: its rank there and what it printed about it."""

    ptr: str
    rank: int
    size: int
    comm_id: str
    order: int
    rings: dict[int, int] = field(default_factory=dict)
    """channel → the next rank (communicator ranks)."""
    trees: dict[int, int] = field(default_factory=dict)
    """channel → the parent rank (-1: this rank is the root)."""
    orders: dict[int, list[int]] = field(default_factory=dict)
    links: dict[tuple[int, int], str] = field(default_factory=dict)
    init_s: float | None = None
    init_parts: str = ""


@dataclass
class _LoggedCall:
    """One call a process logged, on one communicator, with NCCL's choice where it printed one."""

    ptr: str
    op: str
    number: int | None
    count: int | None
    dtype: str
    root: int | None
    choice: NcclChoice | None = None


@dataclass
class _Process:
    """Everything one process (host:pid) printed."""

    key: tuple[str, int]
    comms: dict[str, _Comm] = field(default_factory=dict)
    current: dict[int, str] = field(default_factory=dict)
    """thread → the communicator it announced last."""
    calls: list[_LoggedCall] = field(default_factory=list)
    last_call: dict[int, _LoggedCall] = field(default_factory=dict)
    network: str = ""

    def comm(self, tid: int, rank: int | None = None) -> _Comm | None:
        """The communicator a line of thread ``tid`` is about: the thread's last announced one, else
        the process's latest in which it has ``rank``."""
        found = self.comms.get(self.current.get(tid, ""))
        if found is not None and (rank is None or found.rank == rank):
            return found
        fitting = [c for c in self.comms.values() if rank is None or c.rank == rank]
        return max(fitting, key=lambda c: c.order) if fitting else None


def _parse(lines: Sequence[str], processes: dict[tuple[str, int], _Process], versions: set[str]) -> int:
    """Read every NCCL line into ``processes``; returns how many NCCL lines there were."""
    seen = 0
    for line in lines:
        match = _PREFIX.search(line)
        if match is None:
            continue
        seen += 1
        process = processes.setdefault((match["host"], int(match["pid"])), _Process((match["host"], int(match["pid"]))))
        _read_line(process, int(match["tid"]), line, match["msg"].strip(), versions)
    return seen


def _read_line(process: _Process, tid: int, line: str, msg: str, versions: set[str]) -> None:
    """One NCCL line (``msg``: the part after ``NCCL INFO``) into what ``process`` printed."""
    if (found := _VERSION.search(msg)) is not None:
        versions.add(found["version"])
    if (found := _CALL.match(msg)) is not None:
        comm = process.comms.get(found["ptr"])
        call = _LoggedCall(found["ptr"], NCCL_OPS.get(found["op"], found["op"].lower()), int(found["count_op"], 16),
                           int(found["count"]), nccl_dtype_name(int(found["dtype"])),
                           int(found["root"]) if found["op"] in ("Broadcast", "Reduce") else None)
        if comm is not None:
            process.calls.append(call)
            process.last_call[tid] = call
        return
    if (choice := nccl_choice(line)) is not None:
        last = process.last_call.pop(tid, None)
        if last is not None and last.op == choice.op and last.choice is None:
            last.choice = choice
        elif (comm := process.comm(tid)) is not None:
            process.calls.append(_LoggedCall(comm.ptr, choice.op, None, None, "unknown", None, choice))
        return
    if (found := _COMM.search(msg)) is not None and "Init timings" not in msg:
        ptr = found["ptr"]
        if ptr not in process.comms:
            process.comms[ptr] = _Comm(ptr, int(found["rank"]), int(found["n"]), found["id"] or "", len(process.comms))
        elif found["id"]:
            process.comms[ptr].comm_id = found["id"]
        process.current[tid] = ptr
        return
    _read_topology(process, tid, msg)


def _read_topology(process: _Process, tid: int, msg: str) -> None:
    if (found := _RING.match(msg)) is not None:
        if (comm := process.comm(tid, int(found["me"]))) is not None:
            comm.rings[int(found["ch"])] = int(found["next"])
    elif msg.startswith("Trees"):
        for found in _TREES.finditer(msg):
            if (comm := process.comm(tid, int(found["me"]))) is not None:
                comm.trees[int(found["ch"])] = int(found["up"])
    elif (found := _ORDER.match(msg)) is not None:
        if (comm := process.comm(tid)) is not None:
            comm.orders[int(found["ch"])] = [int(r) for r in found["ranks"].split()]
    elif (found := _LINK.match(msg)) is not None:
        if (comm := process.comm(tid)) is not None:
            comm.links[(int(found["src"]), int(found["dst"]))] = found["via"]
    elif (found := _NETWORK.search(msg)) is not None:
        process.network = found["net"]
    elif (found := _TIMINGS.search(msg)) is not None:
        if (comm := process.comm(tid, int(found["rank"]))) is not None:
            comm.init_s, comm.init_parts = float(found["total"]), found["parts"] or ""


@dataclass
class _Group:
    """One communicator across processes: its members (communicator rank → global rank)."""

    label: str
    members: dict[int, int]
    comms: dict[int, _Comm]
    """global rank → that process's view of it."""

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(sorted(self.members.values()))

    def global_rank(self, local: int) -> int | None:
        return self.members.get(local)


def _groups(processes: dict[tuple[str, int], _Process], warnings: list[str]) -> tuple[dict[tuple[str, int], int], list[_Group]]:
    """Each process's global rank (its rank in its largest communicator) and every communicator
    across processes (by commId where printed, else by size and creation order)."""
    rank_of: dict[tuple[str, int], int] = {}
    for key, process in processes.items():
        if process.comms:
            world = max(process.comms.values(), key=lambda c: (c.size, -c.order))
            if world.rank in rank_of.values():
                warnings.append(f"two processes say they are rank {world.rank} (one is {key[0]}:{key[1]}): "
                                "the log holds more than one job; the second is left out")
                continue
            rank_of[key] = world.rank
    found: dict[tuple, _Group] = {}
    for key, rank in sorted(rank_of.items(), key=lambda kv: kv[1]):
        sizes: Counter[int] = Counter()
        for comm in sorted(processes[key].comms.values(), key=lambda c: c.order):
            identity = ("id", comm.comm_id) if comm.comm_id else ("size", comm.size, sizes[comm.size])
            sizes[comm.size] += 1
            group = found.setdefault(identity, _Group("", {}, {}))
            group.members[comm.rank] = rank
            group.comms[rank] = comm
    groups = sorted(found.values(), key=lambda g: (-len(g.members), min(g.members.values())))
    for number, group in enumerate(groups):
        group.label = "world" if number == 0 else f"nccl comm {number}"
    return rank_of, groups


def _ring_hops(group: _Group) -> list[tuple[list[int], list[Hop]]]:
    """Each distinct ring: the channels that use it and its links (step 1: every rank sends to its next)."""
    by_channel: dict[int, dict[int, int]] = defaultdict(dict)
    for rank, comm in group.comms.items():
        for channel, after in comm.rings.items():
            if (dst := group.global_rank(after)) is not None:
                by_channel[channel][rank] = dst
    if not by_channel:  # older logs print only the ring's order
        for comm in group.comms.values():
            for channel, order in comm.orders.items():
                ranks = [known for r in order if (known := group.global_rank(r)) is not None]
                if len(ranks) == len(order) > 1:  # every member known
                    by_channel[channel] = {ranks[i]: ranks[(i + 1) % len(ranks)] for i in range(len(ranks))}
    return _distinct(by_channel, lambda edges: [Hop(src, dst, 1, _label("ring", group, src, dst))
                                                for src, dst in sorted(edges.items())])


def _tree_hops(group: _Group) -> list[tuple[list[int], list[Hop]]]:
    """Each distinct tree: up from the deepest level to the root, then down again, one level a hop."""
    by_channel: dict[int, dict[int, int]] = defaultdict(dict)
    for rank, comm in group.comms.items():
        for channel, up in comm.trees.items():
            if up >= 0 and (parent := group.global_rank(up)) is not None:
                by_channel[channel][rank] = parent
    return _distinct(by_channel, lambda parents: _tree_levels(group, parents))


def _tree_levels(group: _Group, parents: dict[int, int]) -> list[Hop]:
    depth: dict[int, int] = {}
    for rank in parents:
        seen, node, steps = set(), rank, 0
        while node in parents and node not in seen:
            seen.add(node)
            node, steps = parents[node], steps + 1
        depth[rank] = steps
    deepest = max(depth.values(), default=0)
    hops = [Hop(rank, parent, deepest - depth[rank] + 1, _label("tree", group, rank, parent))
            for rank, parent in parents.items()]
    hops += [Hop(parent, rank, deepest + depth[rank], _label("tree", group, parent, rank)) for rank, parent in parents.items()]
    return sorted(hops, key=lambda h: (h.step, h.src, h.dst))


def _distinct(by_channel: dict[int, dict[int, int]], hops) -> list[tuple[list[int], list[Hop]]]:
    shapes: dict[tuple, list[int]] = defaultdict(list)
    for channel, edges in sorted(by_channel.items()):
        shapes[tuple(sorted(edges.items()))].append(channel)
    return [(channels, hops(dict(edges))) for edges, channels in shapes.items()]


def _label(kind: str, group: _Group, src: int, dst: int) -> str:
    """``NCCL ring via P2P/IPC (…)``: the transport is the one either end printed for that link."""
    local = {g: l for l, g in group.members.items()}
    link = (local.get(src, -1), local.get(dst, -1))
    via = next((group.comms[end].links[link] for end in (src, dst) if end in group.comms and link in group.comms[end].links), "")
    return f"NCCL {kind}{' via ' + via if via else ''} ({TOPOLOGY_LABEL})"


def _channels(channels: list[int]) -> str:
    names = [f"{c:02d}" for c in channels]
    return f"channel {names[0]}" if len(names) == 1 else f"channels {', '.join(names[:8])}{' …' if len(names) > 8 else ''}"


def _topology_steps(group: _Group) -> list[Step]:
    steps = []
    for kind, shapes in (("ring", _ring_hops(group)), ("tree", _tree_hops(group))):
        for channels, hops in shapes:
            how = ("every rank sends to the next; each of a ring algorithm's hops uses these links" if kind == "ring" else
                   "up the tree level by level (a reduce), then down again (a broadcast)")
            steps.append(Step(name=f"NCCL {kind}, {_channels(channels)} on {group.label}",
                              narration=(f"The {kind} NCCL built for {group.label} (ranks "
                                         f"{ranks_text(group.ranks)}) on {_channels(channels)}: {how}. "
                                         f"{TOPOLOGY_LABEL[0].upper()}{TOPOLOGY_LABEL[1:]}: the log gives no bytes "
                                         "per hop (shown as 0)."), hops=hops))
    return steps


def _init_step(group: _Group, processes: dict, rank_of: dict, versions: set[str]) -> Step:
    networks = sorted({processes[k].network for k, r in rank_of.items() if r in group.comms and processes[k].network})
    lines = [f"NCCL set up {group.label}: {len(group.members)} ranks ({ranks_text(group.ranks)})"
             + (f", NCCL {', '.join(sorted(versions))}" if versions else "") + "."]
    if networks:
        lines.append(f"network transport: {', '.join(networks)}")
    took = {}
    for rank, comm in sorted(group.comms.items()):
        if comm.init_s is not None:
            took[rank] = int(comm.init_s * 1e9)
            lines.append(f"r{rank}: init {comm.init_s:g} s" + (f" ({comm.init_parts})" if comm.init_parts else ""))
    lines.append(f"As {NCCL_LABEL}.")
    return Step(name=f"NCCL init of {group.label}", narration="\n".join(lines), took_ns=took or dict.fromkeys(group.comms, 0))


def _sizes(logged: _LoggedCall, n: int) -> tuple[int, int, int]:
    """(bytes in, bytes out, input elements) of a logged call. NCCL's ``count`` is an all-gather's
    send count and a reduce-scatter's receive count; a call known only from its tuning line has
    NCCL's byte count, and no element count."""
    size = itemsize(logged.dtype)
    if logged.count is None or not size:
        nbytes = logged.choice.size if logged.choice else 0
        return nbytes, nbytes, 0
    count = logged.count * n if logged.op == "reduce_scatter" else logged.count
    out = logged.count * n if logged.op == "all_gather" else logged.count
    return count * size, out * size, count


def _call_steps(groups: list[_Group], processes: dict, rank_of: dict) -> list[Step]:
    """One step per call, matched across ranks by communicator and opCount (or order)."""
    group_of = {(rank, comm.ptr): group for group in groups for rank, comm in group.comms.items()}
    sequences: dict[int, list[tuple[str, int]]] = {}
    by_key: dict[tuple[str, int], list[tuple[Call, NcclChoice | None]]] = defaultdict(list)
    first_seen: dict[tuple[str, int], int] = {}
    position = 0
    for key, rank in rank_of.items():
        counters: Counter[str] = Counter()
        sequences[rank] = []
        for logged in processes[key].calls:
            group = group_of.get((rank, logged.ptr))
            if group is None:
                continue
            number = logged.number if logged.number is not None else counters[group.label]
            counters[group.label] += 1
            bytes_in, bytes_out, count = _sizes(logged, len(group.members))
            call = Call(rank=rank, group=group.label, group_ranks=group.ranks, group_seq=number, op=logged.op,
                        dtype=logged.dtype, count=count, bytes_in=bytes_in, bytes_out=bytes_out, t_ns=0,
                        root=group.global_rank(logged.root) if logged.root is not None else None)
            step_key = (group.label, number)
            sequences[rank].append(step_key)
            by_key[step_key].append((call, logged.choice))
            position += 1
            first_seen.setdefault(step_key, position)
    steps = []
    for step_key in order_steps(sequences, first_seen):
        found = by_key[step_key]
        op = Counter(c.op for c, _ in found).most_common(1)[0][0]
        chosen: dict[str, list[int]] = defaultdict(list)
        for call, choice in found:
            chosen[f"{choice.algo}/{choice.protocol}" if choice else "not printed"].append(call.rank)
        first = found[0][0]
        size = f"{first.dtype} ×{first.count:,}, " if first.count else ""
        narration = (f"NCCL log: {op} #{step_key[1]} on {step_key[0]} ({size}{first.bytes_in:,} B). "
                     + "; ".join(f"algorithm/protocol {text} on ranks {ranks_text(ranks)}"
                                 for text, ranks in chosen.items())
                     + f" — as {NCCL_LABEL}. The log holds no values, no provenance and no times.")
        steps.append(Step(name=f"{op} #{step_key[1]} on {step_key[0]}", narration=narration,
                          calls=[c for c, _ in found]))
    return steps


def _clocked(steps: list[Step]) -> list[Step]:
    """Steps placed on an ordinal clock (the log has none): each starts after the previous ends."""
    placed, t = [], 0
    for step in steps:
        placed.append(replace(step, t_ns=t, calls=[replace(c, t_ns=t) for c in step.calls]))
        t += max(step.took_ns.values(), default=0) + 1
    return placed


def import_nccl_log(files: Sequence[tuple[Path, str]], warnings: list[str],
                    progress: Progress = no_progress) -> ImportedRun:
    """The run an NCCL debug log describes (one file of several ranks' lines, or one per process;
    ``progress`` is told each step built)."""
    processes: dict[tuple[str, int], _Process] = {}
    versions: set[str] = set()
    lines = sum(_parse(text.splitlines(), processes, versions) for _, text in files)
    rank_of, groups = _groups(processes, warnings)
    if not groups:
        raise UsageError(f"{files[0][0]}: {lines} NCCL lines but no communicator (no 'comm 0x… rank R nranks N' line): "
                         "log with NCCL_DEBUG=INFO from the job's start")
    steps = [_init_step(g, processes, rank_of, versions) for g in groups]
    for group in groups:
        steps += _topology_steps(group)
    steps += _call_steps(groups, processes, rank_of)
    world = max(len(g.members) for g in groups)
    ranks = sorted(rank_of.values())
    missing = {r: "not in the log" for r in range(world) if r not in ranks}
    if missing:
        warnings.append(f"the log has no lines of rank{'s' if len(missing) > 1 else ''} {ranks_text(sorted(missing))}")
    if not any(s.calls for s in steps):
        warnings.append("the log has no per-call lines (NCCL_DEBUG_SUBSYS=COLL,TUNING prints them): topology only")
    origin = Origin(
        scenario="nccl-log",
        description=(f"An NCCL_DEBUG=INFO log of {len(ranks)} ranks: NCCL's init, the rings and trees it built "
                     f"({TOPOLOGY_LABEL}), then one step per call with the algorithm and protocol NCCL chose. The log "
                     "has no clock (steps are in log order, none timed), no values and no provenance. Read from the "
                     "format NCCL prints: not verified here (no GPU)."),
        reason="nccl, imported from an NCCL_DEBUG=INFO log: topology and choices as NCCL reported them",
        backend="nccl", device_kind="cuda", world_size=world, device="cuda", untimed="an NCCL log has no clock",
        not_recorded="an NCCL log holds the links NCCL built and its choices: no values, provenance or data moved",
        nccl_version=", ".join(sorted(versions)))
    return build_run(origin, _clocked(steps), warnings, ranks, missing, progress)
