"""An ``NCCL_DEBUG=INFO`` log: the job's ranks and devices, the rings and trees NCCL built for every
communicator, its transport, its init times, and each call's algorithm and protocol.

One file holds every rank's lines (or one file per process, ``NCCL_DEBUG_FILE=nccl.%h.%p.log``),
from any NCCL 2.4–2.28 and any launcher: :mod:`.nccl_lines` reads the lines, in whatever order
they come. Here each rank — a (host, process, device), so a process driving several GPUs is
several ranks — gets its global rank (its rank in its largest communicator); communicators are
matched across ranks by ``commId`` where printed, else by size and creation order; the job's rank
count is the largest ``nranks`` printed (where none is, "at least" the highest rank a line names),
and ranks the log has no line of are said absent. A log of per-call lines only, or of WARN lines
only, numbers its ranks by host and device, and says so.

The rings and trees become steps of ``p2p`` Transfer events, drawn as collviz draws its own
``--algo ring|tree`` hops (a ring: every rank sends to the next; a tree: up level by level, then
down), each labelled as NCCL's reported topology, not observed data; the log gives no byte counts
for them (0). Each call is a step numbered by its opCount from #1, with NCCL's algorithm and
protocol in its narration, labelled as NCCL's own report. The log has no clock, so steps go in log
order and no call has a duration. A ring order NCCL cut (20 ranks of a larger communicator, or a
line ending ``...``) is drawn as the path it prints, never closed, with a warning. Every ``NCCL
WARN`` or ``NCCL ERROR`` line fails the run on its rank (:mod:`.nccl_failures`), the last step
quoting them — except a notice NCCL goes on after, followed by calls of its process, which is
said as ``job went on: …``. The tests read excerpts of real logs posted in public issues
(``tests/fixtures/nccl/real/``); these machines have no GPU to make one.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import msgspec

from ..errors import UsageError
from ..observation.rank_lists import ranks_text
from ..reports.nccl_log import NCCL_LABEL, NcclChoice
from .names import itemsize
from .nccl_failures import Attributed, attribute, failed, went_on, went_on_text, warning_text
from .nccl_lines import Comm, LoggedCall, LogReader, has_nccl_lines
from .nccl_records import Record
from .plausible import bytes_ok
from .reading import MAX_LINE_CHARS
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

MAX_WARNINGS_SHOWN = 20
"""The most WARN lines the last step quotes (the run's account names the first, and counts all)."""

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
    """Its ``nranks`` as printed; 0 where no line prints it (a partial log)."""
    members: dict[int, int]
    comms: dict[int, Comm]
    """global rank → that rank's view of it."""
    world: bool = False
    named: int = 0
    """One past the highest rank its ring, tree and link lines name (what a size not printed is at least)."""
    extra: list[Comm] = field(default_factory=list)
    """Ring orders of it printed by threads no rank of it is known of (the world's only)."""

    @cached_property
    def ranks(self) -> tuple[int, ...]:
        """Its ranks: the whole job's for the world (the log may not show every rank), else those seen."""
        if self.world:
            return tuple(range(self.count))
        return tuple(sorted(self.members.values()))

    @cached_property
    def ranks_text(self) -> str:
        """Its ranks as a sentence says them (``0–1023``: the world's, without listing a million)."""
        return f"0–{self.count - 1}" if self.world and self.count > 2 else ranks_text(self.ranks)

    @property
    def count(self) -> int:
        """How many ranks it has: its printed size, else as many as its lines name (at least)."""
        return self.size or max(self.named, max(self.members.values(), default=-1) + 1)

    @cached_property
    def local(self) -> dict[int, int]:
        """global rank → its rank in this communicator."""
        return {g: l for l, g in self.members.items()}

    def global_rank(self, local: int) -> int | None:
        """The global rank of communicator rank ``local`` (the world's ranks are the job's)."""
        return self.members.get(local, local if self.world and 0 <= local < self.count else None)


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


def _groups(comms: Sequence[Comm], loose: Comm, warnings: list[str]) -> tuple[dict[_Agent, int], list[_Group]]:
    """Each rank's global rank and every communicator across ranks (by commId where printed, else
    by size and the order each rank created it; a line that printed none — its id cut off — joins
    the one communicator of its size that printed one). A rank no communicator line names (its lines
    say who it is: :attr:`~.nccl_lines.Comm.inferred`) joins the largest communicator printed, or
    one of unknown size; ``loose`` holds the ring orders no rank took, the largest one's."""
    agents = _agents(comms)
    rank_of = _global_ranks(agents, warnings)
    found: dict[tuple, _Group] = {}
    inferred: list[tuple[int, Comm]] = []
    ranked = sorted(rank_of.items(), key=lambda kv: kv[1])
    for agent, rank in ranked:
        for comm in agents[agent]:
            if comm.comm_id and not comm.inferred:
                _join(found.setdefault(("id", comm.comm_id), _Group("", comm.size, {}, {})), rank, comm)
    with_id = Counter(group.size for group in found.values())
    for agent, rank in ranked:
        sizes: Counter[int] = Counter()
        for comm in agents[agent]:
            if comm.inferred:
                inferred.append((rank, comm))
            elif not comm.comm_id:  # the only communicator of its size that printed an id, where one did
                only = [i for i, g in found.items() if i[0] == "id" and g.size == comm.size] if with_id[comm.size] == 1 else []
                identity = only[0] if only else ("size", comm.size, sizes[comm.size])
                sizes[comm.size] += 1
                _join(found.setdefault(identity, _Group("", comm.size, {}, {})), rank, comm)
    largest = max(found.values(), key=lambda g: g.size, default=None)
    for rank, comm in inferred:
        fits = largest is not None and comm.rank not in largest.members and (comm.rank or 0) < largest.size
        _join(largest if fits and largest is not None else found.setdefault(("unknown size",), _Group("", 0, {}, {})),
              rank, comm)
    groups = sorted(found.values(), key=lambda g: (-max(g.size, len(g.members)), min(g.members.values())))
    for number, group in enumerate(groups):
        group.label = "world" if number == 0 else f"nccl comm {number}"
        group.world = number == 0
        group.extra = [loose] if number == 0 else []
        group.named = max((rank + 1 for c in [*group.comms.values(), *group.extra] for rank in _named(c)), default=0)
    return rank_of, groups


def _join(group: _Group, rank: int, comm: Comm) -> None:
    """``comm`` as global rank ``rank``'s view of ``group`` (a rank already there keeps its first)."""
    local = comm.rank if comm.rank is not None else len(group.members)
    if local not in group.members:
        group.members[local] = rank
        group.comms[rank] = comm


def _named(comm: Comm) -> Iterable[int]:
    """Every communicator rank ``comm``'s ring, tree and link lines name."""
    for order in comm.orders.values():
        yield from order
    yield from comm.rings.values()
    yield from comm.trees.values()
    for children in comm.children.values():
        yield from children
    for link in comm.links:
        yield from link


NCCL_RING_LINE_RANKS = 20
"""The most ranks NCCL up to 2.22 prints on one ``Channel xx/yy :`` line, without a mark that it stopped."""


def _ring_hops(group: _Group, cut: dict[int, str]) -> list[tuple[list[int], list[Hop]]]:
    """Each distinct ring: the channels that use it and its links (step 1: every rank sends to its
    next). A ring known only from its order line, where NCCL cut that line, is the path it prints,
    never closed: ``cut`` gains each such channel → why it is taken as cut."""
    by_channel: dict[int, dict[int, int]] = defaultdict(dict)
    for rank, comm in group.comms.items():
        for channel, after in comm.rings.items():
            if (dst := group.global_rank(after)) is not None:
                by_channel[channel][rank] = dst
    if not by_channel:  # older logs, and partial ones, print only the ring's order
        for comm in [*group.comms.values(), *group.extra]:
            for channel, order in comm.orders.items():
                ranks = [known for r in order if (known := group.global_rank(r)) is not None]
                if len(ranks) != len(order) or len(ranks) < 2 or channel in by_channel:  # every member known
                    continue
                why = _order_cut(group, comm, channel, order)
                if comm in group.extra and why is None and group.size and len(order) != group.size:
                    continue  # a ring no rank printed, of another size: another communicator's
                if why is not None:
                    cut[channel] = why
                    by_channel[channel] = dict(zip(ranks, ranks[1:]))
                else:
                    by_channel[channel] = {ranks[i]: ranks[(i + 1) % len(ranks)] for i in range(len(ranks))}
    return _distinct(by_channel, lambda edges: [Hop(src, dst, 1, _label("ring", group, src, dst))
                                                for src, dst in sorted(edges.items())])


def _order_cut(group: _Group, comm: Comm, channel: int, order: list[int]) -> str | None:
    """Why the ring order ``comm`` printed for ``channel`` is only its start, or None if it is whole."""
    if comm.cut.get(channel) == "nccl":
        return f"the line ends cut after {len(order)} ranks (NCCL 2.23 on ends a long line with '...')"
    if comm.cut.get(channel) == "reader":
        return (f"the line is longer than the {MAX_LINE_CHARS:,} characters read of one: its first {len(order):,} "
                "ranks are shown")
    if len(order) == NCCL_RING_LINE_RANKS and group.count > NCCL_RING_LINE_RANKS:
        return (f"the line names {NCCL_RING_LINE_RANKS} of {group.count}{'' if group.size else ' or more'} ranks "
                f"(NCCL up to 2.22 prints at most {NCCL_RING_LINE_RANKS})")
    if len(order) == NCCL_RING_LINE_RANKS and not group.size:
        return (f"the line names {NCCL_RING_LINE_RANKS} ranks, the most NCCL up to 2.22 prints, and no line says "
                "how many the communicator has")
    return None


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
    link = (group.local.get(src, -1), group.local.get(dst, -1))
    via = next((group.comms[end].links[link] for end in (src, dst) if end in group.comms and link in group.comms[end].links), "")
    return f"NCCL {kind}{' via ' + via if via else ''} ({TOPOLOGY_LABEL})"


def _channels(channels: list[int]) -> str:
    names = [f"{c:02d}" for c in channels]
    return f"channel {names[0]}" if len(names) == 1 else f"channels {', '.join(names[:8])}{' …' if len(names) > 8 else ''}"


def _topology_steps(group: _Group, warnings: list[str]) -> list[Step]:
    steps = []
    cut: dict[int, str] = {}
    for kind, shapes in (("ring", _ring_hops(group, cut)), ("tree", _tree_hops(group))):
        for channels, hops in shapes:
            how = ("every rank sends to the next; each of a ring algorithm's hops uses these links" if kind == "ring" else
                   "up the tree level by level (a reduce), then down again (a broadcast)")
            partial = kind == "ring" and any(c in cut for c in channels)
            if partial:
                how = f"every rank shown sends to the next, as far as NCCL printed the ring ({cut[channels[0]]})"
            steps.append(Step(name=f"NCCL {kind}{' (cut)' if partial else ''}, {_channels(channels)} on {group.label}",
                              narration=(f"The {kind} NCCL built for {group.label} (ranks "
                                         f"{group.ranks_text}) on {_channels(channels)}: {how}. "
                                         f"{TOPOLOGY_LABEL[0].upper()}{TOPOLOGY_LABEL[1:]}: the log gives no bytes "
                                         "per hop (shown as 0)."), hops=hops))
    for why in sorted(set(cut.values())):
        channels = sorted(c for c, said in cut.items() if said == why)
        warnings.append(f"the ring of {_channels(channels)} on {group.label} is cut in the log: {why}; drawn as far "
                        "as printed, not closed")
    return steps


def _init_step(group: _Group, reader: LogReader) -> Step:
    networks = sorted({reader.network(c.host, c.pid) for c in group.comms.values()} - {""})
    count = f"{group.size} ranks" if group.size else f"at least {group.count} ranks (no line prints nranks)"
    lines = [f"NCCL set up {group.label}: {count}"
             + (f", {len(group.members)} of them in the log ({ranks_text(sorted(group.members.values()))})"
                if len(group.members) < group.count else f" ({ranks_text(sorted(group.members.values()))})")
             + (f", NCCL {', '.join(sorted(reader.versions))}" if reader.versions else "") + "."]
    hosts: dict[str, list[int]] = defaultdict(list)
    for rank, comm in sorted(group.comms.items()):
        hosts[comm.host].append(rank)
    lines.append("hosts: " + "; ".join(f"{host} (rank{'s' if len(ranks) > 1 else ''} {ranks_text(ranks)})"
                                       for host, ranks in hosts.items()))
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
        placed.append(replace(step, t_ns=t, calls=[msgspec.structs.replace(c, t_ns=t) for c in step.calls]))
        t += max(step.took_ns.values(), default=0) + 1
    return placed


def _devices(rank_of: dict[_Agent, int], comms: Sequence[Comm]) -> dict[int, str]:
    """Each rank's device as the log names it: ``cuda:1 (busId 7000) on como``."""
    bus = {c.agent: c.bus for c in comms if c.bus}
    return {rank: (f"cuda:{agent[2]}" if agent[2] is not None else "cuda") + (f" (busId {bus[agent]})" if agent in bus else "")
            + (f" on {agent[0]}" if agent[0] else "") for agent, rank in rank_of.items()}


def import_nccl_log(files: Sequence[tuple[Path, Iterable[str]]], warnings: list[str],
                    progress: Progress = no_progress) -> ImportedRun:
    """The run an NCCL debug log describes (one file of several ranks' lines, or one per process,
    each file's lines read once, in order, so a log too large to hold is streamed; ``progress``
    is told each step built). A log with an ``NCCL WARN`` or ``NCCL ERROR`` line is a failed run."""
    reader = LogReader()
    for _, lines in files:
        for line in lines:
            reader.feed(line)
    comms = reader.comms()
    rank_of, groups = _groups(comms, reader.loose, warnings)
    if not groups and not reader.warnings:
        damaged = f", {reader.damaged} lines with impossible ranks or opCounts (damaged input)" if reader.damaged else ""
        raise UsageError(f"{files[0][0]}: {reader.lines} NCCL lines but no communicator (no 'comm 0x… rank R nranks N' "
                         f"line, no per-call line, no ring or tree line naming its rank{damaged}): log with "
                         "NCCL_DEBUG=INFO from the job's start")
    if not groups:
        rank_of = _warning_ranks(reader, warnings)
    found = attribute(reader.warnings, rank_of)
    failing, passed = went_on(found, [reader.calls_after(index) for index in range(len(found))])
    warnings += [went_on_text(warning, calls) for warning, calls in passed]
    steps = [_init_step(g, reader) for g in groups if any(c.rank is not None for c in g.comms.values())]
    for group in groups:
        steps += _topology_steps(group, warnings)
    steps += _call_steps(groups, warnings)
    if found:
        steps.append(_warning_step(found, reader.warning_count, [warning for warning, _ in passed]))
    world = groups[0].count if groups else len(rank_of)
    ranks = sorted(set(rank_of.values()))
    present = set(ranks)
    missing = {r: "not in the log" for r in range(world) if r not in present}
    if groups and not groups[0].size:
        warnings.append(f"no line of the log prints the job's rank count (comm … nranks N): it has at least {world} "
                        "ranks, those its ring, tree and link lines name")
    if missing:
        warnings.append(f"the log has no lines of rank{'s' if len(missing) > 1 else ''} {ranks_text(sorted(missing))} "
                        f"(the job has {'at least ' if groups and not groups[0].size else ''}{world} ranks)")
    if reader.long_lines:
        warnings.append(f"{reader.long_lines} lines longer than {MAX_LINE_CHARS:,} characters: only their first "
                        f"{MAX_LINE_CHARS:,} are read")
    if reader.nuls:
        warnings.append(f"{reader.nuls:,} NUL bytes passed over (what a crash leaves in a log where it was writing)")
    if reader.unplaced:
        warnings.append(f"{reader.unplaced} ring, tree or link lines of threads whose rank the log never names: not drawn")
    if reader.damaged:
        warnings.append(f"{reader.damaged} lines name a rank or an opCount that cannot be (rank ≥ nranks, more ranks "
                        f"than any job): damaged input, left out")
    if reader.p2p:
        warnings.append(f"{reader.p2p} point-to-point calls (Send/Recv) are not shown")
    if not any(s.calls for s in steps):
        warnings.append("the log has no per-call lines (NCCL_DEBUG_SUBSYS=COLL,TUNING prints them): topology only")
    count = f"{'at least ' if groups and not groups[0].size else ''}{world}"
    origin = Origin(
        scenario="nccl-log",
        description=(f"An NCCL_DEBUG=INFO log of {len(ranks)} of a job's {count} ranks: NCCL's init, the rings and trees it "
                     f"built ({TOPOLOGY_LABEL}), then one step per call with the algorithm and protocol NCCL chose"
                     + (", then the WARN lines NCCL printed" if found else "") + ". The log has no clock (steps are in "
                     "log order, none timed), no values and no provenance."),
        reason="nccl, imported from an NCCL_DEBUG=INFO log: topology and choices as NCCL reported them",
        backend="nccl", device_kind="cuda", world_size=world, device="cuda", untimed="an NCCL log has no clock",
        not_recorded="an NCCL log holds the links NCCL built and its choices: no values, provenance or data moved",
        nccl_version=", ".join(sorted(reader.versions)), devices=_devices(rank_of, comms),
        failed=failed(failing, reader.warning_count - len(passed)))
    return build_run(origin, _clocked(steps), warnings, ranks, missing, progress)


def _warning_ranks(reader: LogReader, warnings: list[str]) -> dict[_Agent, int]:
    """A log of WARN lines and no rank: each (host, process, device) that warned, numbered by host and device."""
    agents = {(r.host or "", r.pid, r.device) for r in reader.warnings}
    ordered = sorted(agents, key=lambda a: (a[0], -1 if a[2] is None else a[2], a[1]))
    warnings.append("the log names no rank (no comm … rank R nranks N line, no ring or tree line): the ranks that "
                    "printed WARN lines are numbered by host and device, not as the job numbered them")
    return {agent: number for number, agent in enumerate(ordered)}


def _warning_step(found: list[Attributed], count: int, passed: list[Attributed]) -> Step:
    """The last step: the WARN and ERROR lines NCCL printed, each on its rank (``passed``: those
    the job went on after)."""
    shown = found[:MAX_WARNINGS_SHOWN]
    lines = [f"{'r' + str(rank) if rank is not None else 'rank unknown'} ({record.host or 'host not printed'}): "
             f"{warning_text(record)}" + (" — job went on" if any(record is r for r, _ in passed) else "")
             for record, rank in shown]
    if count > len(shown):
        lines.append(f"… and {count - len(shown):,} more")
    ranks = sorted({rank for _, rank in found if rank is not None})
    return Step(name=f"NCCL WARN ({count:,} line{'s' if count > 1 else ''})",
                narration=(f"What NCCL warned of — {'the job failed' if len(passed) < count else 'the job went on after each'}:\n"
                           + "\n".join(lines) + f"\nAs {NCCL_LABEL}."),
                took_ns=dict.fromkeys(ranks, 0))
