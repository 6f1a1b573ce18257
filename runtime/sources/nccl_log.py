"""An ``NCCL_DEBUG=INFO`` log: the job's ranks and devices, the rings and trees NCCL built for every
communicator, its transport, its init times, and each call's algorithm and protocol.

One file holds every rank's lines (or one file per process, ``NCCL_DEBUG_FILE=nccl.%h.%p.log``),
from any NCCL 2.4–2.28 and any launcher: :mod:`.nccl_lines` reads the lines, in whatever order
they come. Here each rank — a (host, process, device), so a process driving several GPUs is
several ranks — gets its global rank (its rank in its largest communicator); communicators are
matched across ranks by ``commId`` where printed, else by size and creation order; the job's rank
count is the largest ``nranks`` printed, and ranks the log has no line of are said absent. A log of
per-call lines only numbers its ranks in the order it shows them, and says so.

The rings and trees become steps of ``p2p`` Transfer events, drawn as collviz draws its own
``--algo ring|tree`` hops (a ring: every rank sends to the next; a tree: up level by level, then
down), each labelled as NCCL's reported topology, not observed data; the log gives no byte counts
for them (0). Each call is a step numbered by its opCount from #1, with NCCL's algorithm and
protocol in its narration, labelled as NCCL's own report. The log has no clock, so steps go in log
order and no call has a duration. The tests read excerpts of real logs posted in public issues
(``tests/fixtures/nccl/real/``); these machines have no GPU to make one.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import UsageError
from ..observation.rank_lists import ranks_text
from ..reports.nccl_log import NCCL_LABEL, NcclChoice
from .names import itemsize
from .nccl_lines import Comm, LoggedCall, LogReader, has_nccl_lines
from .plausible import bytes_ok
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

_Agent = tuple[str, int, int | None]
"""Where a rank runs: (host, process, device) — one process may drive several GPUs."""


def is_nccl_log(text: str) -> bool:
    """Whether ``text`` has NCCL's debug lines (behind whatever prefix a launcher gave them)."""
    return has_nccl_lines(text)


@dataclass
class _Group:
    """One communicator across ranks: its size (``nranks``), its members (communicator rank →
    global rank) and each member's view of it."""

    label: str
    size: int
    members: dict[int, int]
    comms: dict[int, Comm]
    """global rank → that rank's view of it."""
    world: bool = False

    @property
    def ranks(self) -> tuple[int, ...]:
        """Its ranks: the whole job's for the world (the log may not show every rank), else those seen."""
        if self.world:
            return tuple(range(max(self.size, max(self.members.values()) + 1)))
        return tuple(sorted(self.members.values()))

    def global_rank(self, local: int) -> int | None:
        """The global rank of communicator rank ``local`` (the world's ranks are the job's)."""
        return self.members.get(local, local if self.world and 0 <= local < len(self.ranks) else None)


def _agents(comms: Sequence[Comm]) -> dict[_Agent, list[Comm]]:
    agents: dict[_Agent, list[Comm]] = defaultdict(list)
    for comm in comms:
        agents[comm.agent].append(comm)
    return agents


def _global_ranks(agents: dict[_Agent, list[Comm]], warnings: list[str]) -> dict[_Agent, int]:
    """Each rank's place → its global rank: its rank in its largest communicator; where the log
    names no rank at all (per-call lines only), numbered by host and device."""
    rank_of: dict[_Agent, int] = {}
    claimed: dict[int, _Agent] = {}
    for agent, found in agents.items():
        known = [(c.size, -c.order, c.rank) for c in found if c.rank is not None]
        if not known:
            continue
        rank = max(known)[2]
        if rank in claimed:
            warnings.append(f"two processes say they are rank {rank} (one is {agent[0]}:{agent[1]}): the log "
                            "holds more than one job; the second is left out")
            continue
        claimed[rank] = agent
        rank_of[agent] = rank
    unnamed = [a for a in agents if a not in rank_of and all(c.rank is None for c in agents[a])]
    if unnamed and not rank_of:
        ordered = sorted(unnamed, key=lambda a: (a[0], -1 if a[2] is None else a[2], a[1]))
        rank_of = {agent: number for number, agent in enumerate(ordered)}
        warnings.append("the log has per-call lines but no init lines (comm … rank R nranks N): its ranks are "
                        "numbered by host and device, not as the job numbered them")
    elif unnamed:
        warnings.append(f"{len(unnamed)} ranks print calls but never their rank (their init lines are not in the "
                        "log): left out")
    return rank_of


def _groups(comms: Sequence[Comm], warnings: list[str]) -> tuple[dict[_Agent, int], list[_Group]]:
    """Each rank's global rank and every communicator across ranks (by commId where printed, else
    by size and the order each rank created it)."""
    agents = _agents(comms)
    rank_of = _global_ranks(agents, warnings)
    found: dict[tuple, _Group] = {}
    for agent, rank in sorted(rank_of.items(), key=lambda kv: kv[1]):
        sizes: Counter[int] = Counter()
        for comm in agents[agent]:
            identity = ("id", comm.comm_id) if comm.comm_id else ("size", comm.size, sizes[comm.size])
            sizes[comm.size] += 1
            group = found.setdefault(identity, _Group("", comm.size, {}, {}))
            local = comm.rank if comm.rank is not None else len(group.members)
            if local not in group.members:
                group.members[local] = rank
                group.comms[rank] = comm
    groups = sorted(found.values(), key=lambda g: (-max(g.size, len(g.members)), min(g.members.values())))
    for number, group in enumerate(groups):
        group.label = "world" if number == 0 else f"nccl comm {number}"
        group.world = number == 0
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
            for child in comm.children.get(channel, []):  # a rank's line names its children too
                if (known := group.global_rank(child)) is not None:
                    by_channel[channel].setdefault(known, rank)
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
    return sorted(hops, key=lambda h: (h.number, h.src, h.dst))


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


def _init_step(group: _Group, reader: LogReader) -> Step:
    networks = sorted({reader.network(c.host, c.pid) for c in group.comms.values()} - {""})
    lines = [f"NCCL set up {group.label}: {group.size or len(group.members)} ranks"
             + (f", {len(group.members)} of them in the log ({ranks_text(sorted(group.members.values()))})"
                if len(group.members) < group.size else f" ({ranks_text(sorted(group.members.values()))})")
             + (f", NCCL {', '.join(sorted(reader.versions))}" if reader.versions else "") + "."]
    if networks:
        lines.append(f"network transport: {', '.join(networks)}")
    took = {}
    for rank, comm in sorted(group.comms.items()):
        if comm.init_s is not None:
            took[rank] = int(comm.init_s * 1e9)
            lines.append(f"r{rank}: init {comm.init_s:g} s" + (f" ({comm.init_parts})" if comm.init_parts else ""))
    lines.append(f"As {NCCL_LABEL}.")
    return Step(name=f"NCCL init of {group.label}", narration="\n".join(lines), took_ns=took or dict.fromkeys(group.comms, 0))


def _sizes(logged: LoggedCall, n: int) -> tuple[int, int, int]:
    """(bytes in, bytes out, input elements) of a logged call. NCCL's ``count`` is an all-gather's
    send count and a reduce-scatter's receive count."""
    size = itemsize(logged.dtype) or 0
    count = (logged.count or 0) * n if logged.op == "reduce_scatter" else logged.count or 0
    out = (logged.count or 0) * n if logged.op == "all_gather" else logged.count or 0
    return count * size, out * size, count


def _call_steps(groups: list[_Group], warnings: list[str]) -> list[Step]:
    """One step per call, matched across ranks by communicator and opCount (numbered from #1, as
    every source numbers calls), or by order where the log printed no opCount."""
    sequences: dict[int, list[tuple[str, int]]] = defaultdict(list)
    by_key: dict[tuple[str, int], list[tuple[Call, NcclChoice | None]]] = defaultdict(list)
    first_seen: dict[tuple[str, int], int] = {}
    damaged = 0
    for group in groups:
        n = group.size or len(group.members)
        for rank, comm in group.comms.items():
            for position, logged in enumerate(comm.calls, start=1):
                number = logged.number + 1 if logged.number is not None else position
                bytes_in, bytes_out, count = _sizes(logged, n)
                if not (bytes_ok(bytes_in) and bytes_ok(bytes_out)):
                    damaged += 1
                    continue
                call = Call(rank=rank, group=group.label, group_ranks=group.ranks, group_seq=number, op=logged.op,
                            dtype=logged.dtype, count=count, bytes_in=bytes_in, bytes_out=bytes_out, t_ns=0,
                            root=group.global_rank(logged.root) if logged.root is not None else None)
                key = (group.label, number)
                sequences[rank].append(key)
                by_key[key].append((call, logged.choice))
                first_seen.setdefault(key, (comm.order, position))  # type: ignore[arg-type]
    if damaged:
        warnings.append(f"{damaged} calls with a size beyond any device: damaged input, left out")
    steps = []
    for key in order_steps(dict(sequences), first_seen):
        found = by_key[key]
        op = Counter(c.op for c, _ in found).most_common(1)[0][0]
        chosen: dict[str, list[int]] = defaultdict(list)
        for call, choice in found:
            chosen[f"{choice.algo}/{choice.protocol}" if choice else "not printed"].append(call.rank)
        first = found[0][0]
        size = f"{first.dtype} ×{first.count:,}, " if first.count else ""
        narration = (f"NCCL log: {op} #{key[1]} on {key[0]} ({size}{first.bytes_in:,} B). "
                     + "; ".join(f"algorithm/protocol {text} on ranks {ranks_text(sorted(ranks))}"
                                 for text, ranks in chosen.items())
                     + f" — as {NCCL_LABEL}. The log holds no values, no provenance and no times.")
        steps.append(Step(name=f"{op} #{key[1]} on {key[0]}", narration=narration, calls=[c for c, _ in found]))
    return steps


def _clocked(steps: list[Step]) -> list[Step]:
    """Steps placed on an ordinal clock (the log has none): each starts after the previous ends."""
    placed, t = [], 0
    for step in steps:
        placed.append(replace(step, t_ns=t, calls=[replace(c, t_ns=t) for c in step.calls]))
        t += max(step.took_ns.values(), default=0) + 1
    return placed


def _devices(rank_of: dict[_Agent, int], comms: Sequence[Comm]) -> dict[int, str]:
    """Each rank's device as the log names it: ``cuda:1 (busId 7000) on como``."""
    bus = {c.agent: c.bus for c in comms if c.bus}
    return {rank: (f"cuda:{agent[2]}" if agent[2] is not None else "cuda") + (f" (busId {bus[agent]})" if agent in bus else "")
            + f" on {agent[0]}" for agent, rank in rank_of.items()}


def import_nccl_log(files: Sequence[tuple[Path, Iterable[str]]], warnings: list[str],
                    progress: Progress = no_progress) -> ImportedRun:
    """The run an NCCL debug log describes (one file of several ranks' lines, or one per process,
    each file's lines read once, in order, so a log too large to hold is streamed; ``progress``
    is told each step built)."""
    reader = LogReader()
    for _, lines in files:
        for line in lines:
            reader.feed(line)
    comms = reader.comms()
    rank_of, groups = _groups(comms, warnings)
    if not groups:
        damaged = f", {reader.damaged} lines with impossible ranks or opCounts (damaged input)" if reader.damaged else ""
        raise UsageError(f"{files[0][0]}: {reader.lines} NCCL lines but no communicator (no 'comm 0x… rank R nranks N' "
                         f"line, no per-call line{damaged}): log with NCCL_DEBUG=INFO from the job's start")
    steps = [_init_step(g, reader) for g in groups if any(c.rank is not None for c in g.comms.values())]
    for group in groups:
        steps += _topology_steps(group)
    steps += _call_steps(groups, warnings)
    world = len(groups[0].ranks)
    ranks = sorted(rank_of.values())
    missing = {r: "not in the log" for r in range(world) if r not in rank_of.values()}
    if missing:
        warnings.append(f"the log has no lines of rank{'s' if len(missing) > 1 else ''} {ranks_text(sorted(missing))} "
                        f"(the job has {world} ranks)")
    if reader.damaged:
        warnings.append(f"{reader.damaged} lines name a rank or an opCount that cannot be (rank ≥ nranks, more ranks "
                        f"than any job): damaged input, left out")
    if reader.p2p:
        warnings.append(f"{reader.p2p} point-to-point calls (Send/Recv) are not shown")
    if not any(s.calls for s in steps):
        warnings.append("the log has no per-call lines (NCCL_DEBUG_SUBSYS=COLL,TUNING prints them): topology only")
    origin = Origin(
        scenario="nccl-log",
        description=(f"An NCCL_DEBUG=INFO log of {len(ranks)} of a job's {world} ranks: NCCL's init, the rings and trees it "
                     f"built ({TOPOLOGY_LABEL}), then one step per call with the algorithm and protocol NCCL chose. The log "
                     "has no clock (steps are in log order, none timed), no values and no provenance."),
        reason="nccl, imported from an NCCL_DEBUG=INFO log: topology and choices as NCCL reported them",
        backend="nccl", device_kind="cuda", world_size=world, device="cuda", untimed="an NCCL log has no clock",
        not_recorded="an NCCL log holds the links NCCL built and its choices: no values, provenance or data moved",
        nccl_version=", ".join(sorted(reader.versions)), devices=_devices(rank_of, comms))
    return build_run(origin, _clocked(steps), warnings, ranks, missing, progress)
