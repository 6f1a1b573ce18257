"""Collective algorithms as plans: which rank sends which elements to whom, hop by hop.

A :class:`Plan` is pure data, the same on every rank: each :class:`Hop` is one round of
``batch_isend_irecv`` in which every message reads a contiguous range of the sender's buffer (as
it was when the hop began) and copies or reduces it into the receiver's. The executor
(:mod:`.execute`) runs a plan on real ranks; tests run it on lists. Buffers:

- ``all_reduce``, ``broadcast``, ``reduce``: one buffer ``x`` of ``count`` elements, in place;
- ``all_gather``: ``out`` of n·count elements, rank r's own block already at r·count;
- ``reduce_scatter``: ``x`` of ``count`` elements (n equal chunks), reduced in place; rank r's
  result is chunk r;
- ``all_to_all``: ``in`` and ``out`` of ``count`` elements (n equal chunks), rank r's own chunk
  already copied; chunk j of rank i's ``in`` lands in chunk i of rank j's ``out``;
- ``gather``: rank r's ``in`` (count) lands at r·count of the root's ``out`` (n·count; every rank
  has one, holding its own block, where a tree forwards its subtree's blocks);
- ``scatter``: chunk r of the root's ``in`` (n equal chunks) lands at the same place in rank r's
  ``in`` (every rank has one: a tree forwards the chunks of a subtree through it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...errors import UsageError

__all__ = ["Message", "Hop", "Plan", "PlanError", "ALGORITHMS", "plan"]


class PlanError(UsageError):
    """An algorithm that cannot run this op on this many ranks or elements (one line, naming why)."""


@dataclass(frozen=True)
class Message:
    """``length`` elements from ``src``'s ``buffer[start:]`` into ``dst``'s ``into[at:]``, added
    (``reduce``) or copied."""

    src: int
    dst: int
    buffer: str
    start: int
    length: int
    into: str
    at: int
    reduce: bool


@dataclass(frozen=True)
class Hop:
    """One round of point-to-point messages, all exchanged at once."""

    messages: tuple[Message, ...]


@dataclass(frozen=True)
class Plan:
    """An algorithm for one op on ``world_size`` ranks: its hops, in order."""

    op: str
    algo: str
    world_size: int
    count: int
    root: int
    hops: tuple[Hop, ...]
    description: str = ""
    """What the algorithm does, in one or two sentences (its builder's docstring)."""

    def sent(self, rank: int) -> int:
        """Elements ``rank`` sends over the whole plan."""
        return sum(m.length for hop in self.hops for m in hop.messages if m.src == rank)

    def received(self, rank: int) -> int:
        """Elements ``rank`` receives over the whole plan."""
        return sum(m.length for hop in self.hops for m in hop.messages if m.dst == rank)


def _bounds(count: int, parts: int) -> list[tuple[int, int]]:
    """(start, length) of ``parts`` near-equal contiguous chunks of ``count`` elements."""
    edges = [i * count // parts for i in range(parts + 1)]
    return [(edges[i], edges[i + 1] - edges[i]) for i in range(parts)]


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _ring_reduce_scatter(n: int, count: int, buffer: str) -> list[Hop]:
    """n−1 hops; in hop k rank r sends chunk (r−k) mod n to r+1, which adds it: rank r ends
    holding the full sum of chunk (r+1) mod n."""
    chunks = _bounds(count, n)
    hops = []
    for k in range(n - 1):
        messages = []
        for r in range(n):
            start, length = chunks[(r - k) % n]
            if length:
                messages.append(Message(r, (r + 1) % n, buffer, start, length, buffer, start, True))
        hops.append(Hop(tuple(messages)))
    return hops


def _ring_all_gather(n: int, count: int, buffer: str, first_owned: Callable[[int], int]) -> list[Hop]:
    """n−1 hops passing chunks to the right; ``first_owned(r)`` is the chunk rank r holds
    complete at the start; in hop k it forwards chunk first_owned(r) − k."""
    chunks = _bounds(count, n)
    hops = []
    for k in range(n - 1):
        messages = []
        for r in range(n):
            start, length = chunks[(first_owned(r) - k) % n]
            if length:
                messages.append(Message(r, (r + 1) % n, buffer, start, length, buffer, start, False))
        hops.append(Hop(tuple(messages)))
    return hops


def _all_reduce_ring(n: int, count: int, root: int) -> list[Hop]:
    """Reduce-scatter then all-gather around the ring: 2(n−1) hops, each rank sending
    2(n−1)/n of the buffer."""
    return _ring_reduce_scatter(n, count, "x") + _ring_all_gather(n, count, "x", lambda r: (r + 1) % n)


def _all_reduce_recursive_doubling(n: int, count: int, root: int) -> list[Hop]:
    """log2 p hops of whole-buffer exchanges with partner r XOR 2^k among the largest power of
    two p ≤ n; the n − p extra ranks first fold into ranks 0… (one hop) and get the result back
    (one hop)."""
    p = 1 << (n.bit_length() - 1)
    extra = list(range(p, n))
    hops = []
    if extra:
        hops.append(Hop(tuple(Message(r, r - p, "x", 0, count, "x", 0, True) for r in extra)))
    distance = 1
    while distance < p:
        hops.append(Hop(tuple(Message(r, r ^ distance, "x", 0, count, "x", 0, True) for r in range(p))))
        distance *= 2
    if extra:
        hops.append(Hop(tuple(Message(r - p, r, "x", 0, count, "x", 0, False) for r in extra)))
    return hops


def _binomial_reduce(n: int, count: int, root: int) -> list[Hop]:
    """ceil(log2 n) hops towards ``root``: in hop k, every rank whose relative number has bit k
    set (and no lower bit) sends its partial sum to the rank 2^k below it."""
    hops = []
    distance = 1
    while distance < n:
        messages = []
        for relative in range(distance, n, 2 * distance):
            src, dst = (relative + root) % n, (relative - distance + root) % n
            messages.append(Message(src, dst, "x", 0, count, "x", 0, True))
        hops.append(Hop(tuple(messages)))
        distance *= 2
    return hops


def _binomial_broadcast(n: int, count: int, root: int) -> list[Hop]:
    """ceil(log2 n) hops away from ``root``: the ranks that hold the data double every hop."""
    hops = []
    distance = 1 << max(0, (n - 1).bit_length() - 1)
    while distance >= 1:
        messages = []
        for relative in range(0, n, 2 * distance):
            if relative + distance < n:
                src, dst = (relative + root) % n, (relative + distance + root) % n
                messages.append(Message(src, dst, "x", 0, count, "x", 0, False))
        hops.append(Hop(tuple(messages)))
        distance //= 2
    return hops


def _all_reduce_tree(n: int, count: int, root: int) -> list[Hop]:
    """A binomial-tree reduce to rank 0, then a binomial-tree broadcast from it."""
    return _binomial_reduce(n, count, 0) + _binomial_broadcast(n, count, 0)


def _all_reduce_direct(n: int, count: int, root: int) -> list[Hop]:
    """One hop: every rank sends its whole buffer to every other, each adds all it receives."""
    return [Hop(tuple(Message(s, d, "x", 0, count, "x", 0, True) for d in range(n) for s in range(n) if s != d))]


def _all_gather_ring(n: int, count: int, root: int) -> list[Hop]:
    """n−1 hops; rank r starts with block r and forwards what it received last."""
    return _ring_all_gather(n, n * count, "out", lambda r: r)


def _all_gather_recursive_doubling(n: int, count: int, root: int) -> list[Hop]:
    """log2 n hops (n a power of two): in hop k rank r swaps its 2^k contiguous blocks with
    partner r XOR 2^k."""
    _need_power_of_two("all_gather", "recursive-doubling", n)
    hops = []
    distance = 1
    while distance < n:
        messages = []
        for r in range(n):
            first = (r // distance) * distance
            messages.append(Message(r, r ^ distance, "out", first * count, distance * count, "out", first * count, False))
        hops.append(Hop(tuple(messages)))
        distance *= 2
    return hops


def _reduce_scatter_ring(n: int, count: int, root: int) -> list[Hop]:
    """n−1 hops; the chunk rank r finishes is chunk r (the ring starts one chunk later)."""
    chunks = _bounds(count, n)
    hops = []
    for k in range(n - 1):
        messages = []
        for r in range(n):
            start, length = chunks[(r - k - 1) % n]
            messages.append(Message(r, (r + 1) % n, "x", start, length, "x", start, True))
        hops.append(Hop(tuple(messages)))
    return hops


def _reduce_scatter_recursive_halving(n: int, count: int, root: int) -> list[Hop]:
    """log2 n hops (n a power of two): in hop k rank r keeps the half of its active range on its
    side of partner r XOR n/2^(k+1) and sends the other half, which the partner adds."""
    _need_power_of_two("reduce_scatter", "recursive-halving", n)
    chunk = count // n
    hops = []
    distance = n // 2
    while distance >= 1:
        messages = []
        for r in range(n):
            partner = r ^ distance
            block = (partner // distance) * distance  # the partner's half of the active range
            messages.append(Message(r, partner, "x", block * chunk, distance * chunk, "x", block * chunk, True))
        hops.append(Hop(tuple(messages)))
        distance //= 2
    return hops


def _all_to_all_pairwise(n: int, count: int, root: int) -> list[Hop]:
    """n−1 hops; in hop k rank r sends its chunk for (r+k) mod n and receives from (r−k) mod n."""
    chunk = count // n
    return [Hop(tuple(Message(r, (r + k) % n, "in", ((r + k) % n) * chunk, chunk, "out", r * chunk, False)
                      for r in range(n))) for k in range(1, n)]


def _gather_direct(n: int, count: int, root: int) -> list[Hop]:
    """One hop: every other rank sends its block straight to the root."""
    return [Hop(tuple(Message(r, root, "in", 0, count, "out", r * count, False) for r in range(n) if r != root))]


def _scatter_direct(n: int, count: int, root: int) -> list[Hop]:
    """One hop: the root sends each other rank its chunk."""
    chunk = count // n
    return [Hop(tuple(Message(root, r, "in", r * chunk, chunk, "in", r * chunk, False) for r in range(n) if r != root))]


def _subtree(relative: int, size: int, n: int, root: int) -> list[int]:
    """The ranks of the binomial subtree of ``size`` rooted at relative rank ``relative``."""
    return [(relative + i + root) % n for i in range(size) if relative + i < n]


def _gather_binomial(n: int, count: int, root: int) -> list[Hop]:
    """ceil(log2 n) hops: in hop k each subtree of 2^k ranks hands all its blocks to the rank
    2^k below it, so the root receives log2 n messages of growing size instead of n − 1."""
    hops = []
    distance = 1
    while distance < n:
        messages = []
        for relative in range(distance, n, 2 * distance):
            src, dst = (relative + root) % n, (relative - distance + root) % n
            messages += [Message(src, dst, "out", r * count, count, "out", r * count, False)
                         for r in _subtree(relative, distance, n, root)]
        hops.append(Hop(tuple(messages)))
        distance *= 2
    return hops


def _scatter_binomial(n: int, count: int, root: int) -> list[Hop]:
    """ceil(log2 n) hops: each holder hands the upper half of its subtree's chunks to the rank
    that heads it, halving the subtrees every hop."""
    chunk = count // n
    hops = []
    distance = 1 << max(0, (n - 1).bit_length() - 1)
    while distance >= 1:
        messages = []
        for relative in range(0, n, 2 * distance):
            if relative + distance < n:
                src, dst = (relative + root) % n, (relative + distance + root) % n
                messages += [Message(src, dst, "in", r * chunk, chunk, "in", r * chunk, False)
                             for r in _subtree(relative + distance, distance, n, root)]
        hops.append(Hop(tuple(messages)))
        distance //= 2
    return hops


def _all_gather_bruck(n: int, count: int, root: int) -> list[Hop]:
    """ceil(log2 n) hops for any n: rank r holds blocks r, r+1, … and in hop k receives the
    next min(2^k, n − 2^k) of them from rank r + 2^k."""
    hops = []
    held = 1
    while held < n:
        take = min(held, n - held)
        messages = []
        for r in range(n):
            src = (r + held) % n
            for block in range(src, src + take):
                b = block % n
                messages.append(Message(src, r, "out", b * count, count, "out", b * count, False))
        hops.append(Hop(tuple(messages)))
        held += take
    return hops


PIPELINE_CHUNKS = 4
"""Pieces a pipelined-ring broadcast cuts the buffer into (fewer when it has fewer elements)."""


def _broadcast_pipelined_ring(n: int, count: int, root: int) -> list[Hop]:
    """The buffer cut into pieces that flow down the chain root → root+1 → …: while one piece
    moves on, the next follows, so n − 1 + pieces − 1 hops carry it all."""
    pieces = _bounds(count, min(PIPELINE_CHUNKS, max(count, 1)))
    hops = []
    for h in range(n - 1 + len(pieces) - 1):
        messages = []
        for position in range(n - 1):
            piece = h - position
            if 0 <= piece < len(pieces) and pieces[piece][1]:
                start, length = pieces[piece]
                src, dst = (root + position) % n, (root + position + 1) % n
                messages.append(Message(src, dst, "x", start, length, "x", start, False))
        hops.append(Hop(tuple(messages)))
    return hops


def _all_to_all_direct(n: int, count: int, root: int) -> list[Hop]:
    """One hop: every rank sends each other rank its chunk, all at once."""
    chunk = count // n
    return [Hop(tuple(Message(r, d, "in", d * chunk, chunk, "out", r * chunk, False)
                      for r in range(n) for d in range(n) if d != r))]


def _need_power_of_two(op: str, algo: str, n: int) -> None:
    if not _is_power_of_two(n):
        raise PlanError(f"--algo {algo} for {op} needs a power-of-two number of ranks (2, 4, 8, …), not {n}; "
                        f"use --algo ring")


_BUILDERS: dict[str, dict[str, Callable[[int, int, int], list[Hop]]]] = {
    "all_reduce": {"ring": _all_reduce_ring, "recursive-doubling": _all_reduce_recursive_doubling,
                   "tree": _all_reduce_tree, "direct": _all_reduce_direct},
    "all_gather": {"ring": _all_gather_ring, "recursive-doubling": _all_gather_recursive_doubling,
                   "bruck": _all_gather_bruck},
    "reduce_scatter": {"ring": _reduce_scatter_ring, "recursive-halving": _reduce_scatter_recursive_halving},
    "broadcast": {"binomial-tree": _binomial_broadcast, "pipelined-ring": _broadcast_pipelined_ring},
    "reduce": {"binomial-tree": _binomial_reduce},
    "all_to_all": {"pairwise": _all_to_all_pairwise, "direct": _all_to_all_direct},
    "gather": {"direct": _gather_direct, "binomial-tree": _gather_binomial},
    "scatter": {"direct": _scatter_direct, "binomial-tree": _scatter_binomial},
}

ALGORITHMS: dict[str, tuple[str, ...]] = {op: tuple(algos) for op, algos in _BUILDERS.items()}
"""The hop-by-hop algorithms of each op (``library``, the backend's own call, is always there too)."""


def plan(op: str, algo: str, world_size: int, count: int, root: int = 0) -> Plan:
    """The plan of ``algo`` for ``op`` on ``world_size`` ranks and ``count`` elements (see the
    module docstring for what ``count`` counts); PlanError when it does not apply."""
    algos = _BUILDERS.get(op, {})
    if algo not in algos:
        known = ", ".join(("library", *algos))
        raise PlanError(f"--algo {algo}: {op} has {known}")
    if op in ("reduce_scatter", "all_to_all", "scatter") and count % world_size:
        raise PlanError(f"--algo {algo}: {op} splits {count} elements into {world_size} equal chunks; "
                        f"use a count that is a multiple of {world_size}")
    builder = algos[algo]
    hops = [hop for hop in builder(world_size, count, root) if hop.messages]
    description = " ".join((builder.__doc__ or "").split())
    return Plan(op, algo, world_size, count, root, tuple(hops), description)
