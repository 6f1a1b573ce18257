"""What an imported NCCL log shows, read off its events for the NCCL-log tests: the job's size and
the ranks present, each topology step's links, each rank's calls, and a tree's links as collviz
draws one (computed from a parent map written out by hand, never by the importer)."""

from __future__ import annotations

from collections import defaultdict

from collviz.runtime.wire.protocol import Collective, Phase, RankStart, RunStart, Transfer


def shape(run) -> tuple[int, list[int]]:
    """(the job's rank count, the ranks the log shows)."""
    [start] = [e for e in run.events if isinstance(e, RunStart)]
    return start.world_size, sorted(e.rank for e in run.events if isinstance(e, RankStart))


def hops(run) -> dict[str, set[tuple[int, int, int]]]:
    """Each topology step's name → its (src, dst, hop) links."""
    names = {e.index: e.name for e in run.events if isinstance(e, Phase)}
    found: dict[str, set[tuple[int, int, int]]] = defaultdict(set)
    for event in run.events:
        if isinstance(event, Transfer):
            found[names[event.phase]].add((event.src, event.dst, event.hop))
    return dict(found)


def calls(run) -> dict[int, list[tuple[str, int, int, int, int]]]:
    """rank → its calls as (op, number, elements in, bytes in, bytes out)."""
    found = defaultdict(list)
    for event in run.events:
        if isinstance(event, Collective) and event.edge == "begin":
            found[event.rank].append((event.op, event.group_seq, event.count, event.bytes_in, event.bytes_out))
    return dict(found)


def tree(parents: dict[int, int]) -> set[tuple[int, int, int]]:
    """A tree's links as collviz draws it: up level by level from the deepest, then down again."""
    depth = {}
    for rank in parents:
        node, steps = rank, 0
        while node in parents:
            node, steps = parents[node], steps + 1
        depth[rank] = steps
    deepest = max(depth.values())
    return ({(child, parent, deepest - depth[child] + 1) for child, parent in parents.items()}
            | {(parent, child, deepest + depth[child]) for child, parent in parents.items()})
