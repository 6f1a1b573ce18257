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
- ``gather``: rank r's ``in`` (count) lands at r·count of the root's ``out``;
- ``scatter``: chunk r of the root's ``in`` (n·count) lands in rank r's ``out`` (count).
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
    return [Hop(tuple(Message(root, r, "in", r * chunk, chunk, "out", 0, False) for r in range(n) if r != root))]


def _need_power_of_two(op: str, algo: str, n: int) -> None:
    if not _is_power_of_two(n):
        raise PlanError(f"--algo {algo} for {op} needs a power-of-two number of ranks (2, 4, 8, …), not {n}; "
                        f"use --algo ring")


_BUILDERS: dict[str, dict[str, Callable[[int, int, int], list[Hop]]]] = {
    "all_reduce": {"ring": _all_reduce_ring, "recursive-doubling": _all_reduce_recursive_doubling,
                   "tree": _all_reduce_tree, "direct": _all_reduce_direct},
    "all_gather": {"ring": _all_gather_ring, "recursive-doubling": _all_gather_recursive_doubling},
    "reduce_scatter": {"ring": _reduce_scatter_ring, "recursive-halving": _reduce_scatter_recursive_halving},
    "broadcast": {"binomial-tree": _binomial_broadcast},
    "reduce": {"binomial-tree": _binomial_reduce},
    "all_to_all": {"pairwise": _all_to_all_pairwise},
    "gather": {"direct": _gather_direct},
    "scatter": {"direct": _scatter_direct},
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
