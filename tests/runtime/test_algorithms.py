"""Hop-by-hop algorithms: every plan gives the op's result (simulated, and on real gloo ranks of
2, 3, 4, 5 and 8), with hop counts and traffic checked against formulas written here."""

from __future__ import annotations

import math

import pytest
import torch

from collviz.runtime.programs.algorithms.execute import algorithm_caller
from collviz.runtime.programs.algorithms.plans import ALGORITHMS, Plan, PlanError, plan

from support.reference import run_on_gloo_ranks


WORLDS = (2, 3, 4, 5, 8)
CASES = [(op, algo) for op, algos in ALGORITHMS.items() for algo in algos]
POWER_OF_TWO_ONLY = {("all_gather", "recursive-doubling"), ("reduce_scatter", "recursive-halving")}
ROOT = 1
"""The root of rooted ops (rank 1 mod n: a root other than rank 0 where there is one)."""


def _count(op: str, n: int) -> int:
    """Elements per rank in the plan's terms (a multiple of n where the op splits)."""
    return 3 * n if op in ("reduce_scatter", "all_to_all", "scatter") else 5


def _inputs(n: int, count: int) -> list[list[int]]:
    return [[r * 1000 + i for i in range(count)] for r in range(n)]


def _expected(op: str, n: int, count: int, root: int) -> list[list[int] | None]:
    """What each rank holds afterwards, computed from the op's definition."""
    inputs = _inputs(n, count)
    total = [sum(column) for column in zip(*inputs)]
    chunk = count // n if count % n == 0 else 0
    if op == "all_reduce":
        return [total] * n
    if op == "broadcast":
        return [inputs[root]] * n
    if op == "reduce":
        return [total if r == root else None for r in range(n)]
    if op == "all_gather":
        return [[v for rank in inputs for v in rank]] * n
    if op == "reduce_scatter":
        return [total[r * chunk:(r + 1) * chunk] for r in range(n)]
    if op == "all_to_all":
        return [[v for i in range(n) for v in inputs[i][r * chunk:(r + 1) * chunk]] for r in range(n)]
    if op == "gather":
        return [[v for rank in inputs for v in rank] if r == root else None for r in range(n)]
    return [inputs[root][r * chunk:(r + 1) * chunk] for r in range(n)]  # scatter


def _start(op: str, n: int, count: int, root: int) -> list[dict[str, list[int]]]:
    """Every rank's buffers before the plan, own data in place (as the program sets them up)."""
    inputs = _inputs(n, count)
    buffers = []
    for r in range(n):
        if op in ("all_reduce", "reduce", "reduce_scatter"):
            buffers.append({"x": list(inputs[r])})
        elif op == "broadcast":
            buffers.append({"x": list(inputs[root]) if r == root else [0] * count})
        elif op == "all_gather":
            out = [0] * (n * count)
            out[r * count:(r + 1) * count] = inputs[r]
            buffers.append({"out": out})
        elif op == "all_to_all":
            chunk = count // n
            out = [0] * count
            out[r * chunk:(r + 1) * chunk] = inputs[r][r * chunk:(r + 1) * chunk]
            buffers.append({"in": list(inputs[r]), "out": out})
        elif op == "gather":
            out = [0] * (n * count)
            out[r * count:(r + 1) * count] = inputs[r]
            buffers.append({"in": list(inputs[r]), "out": out})
        else:  # scatter
            buffers.append({"in": list(inputs[root]) if r == root else [0] * count})
    return buffers


def _result(op: str, buffers: dict[str, list[int]], r: int, n: int, count: int, root: int) -> list[int] | None:
    if op == "reduce_scatter":
        chunk = count // n
        return buffers["x"][r * chunk:(r + 1) * chunk]
    if op in ("all_reduce", "broadcast"):
        return buffers["x"]
    if op == "reduce":
        return buffers["x"] if r == root else None
    if op == "gather":
        return buffers["out"] if r == root else None
    if op == "scatter":
        chunk = count // n
        return buffers["in"][r * chunk:(r + 1) * chunk]
    return buffers["out"]


def simulate(p: Plan, op: str, n: int, count: int) -> list[list[int] | None]:
    """Run ``p`` on lists: each hop's sends read the buffers as they were when the hop began."""
    ranks = _start(op, n, count, p.root)
    for hop in p.hops:
        before = [{name: list(values) for name, values in buffers.items()} for buffers in ranks]
        for m in hop.messages:
            data = before[m.src][m.buffer][m.start:m.start + m.length]
            target = ranks[m.dst][m.into]
            for i, value in enumerate(data):
                target[m.at + i] = target[m.at + i] + value if m.reduce else value
    return [_result(op, ranks[r], r, n, count, p.root) for r in range(n)]


def _applies(op: str, algo: str, n: int) -> bool:
    return (op, algo) not in POWER_OF_TWO_ONLY or n & (n - 1) == 0


@pytest.mark.parametrize("n", (1, *WORLDS))
@pytest.mark.parametrize(("op", "algo"), CASES)
def test_every_plan_computes_the_op(op, algo, n):
    count, root = _count(op, n), ROOT % n
    if not _applies(op, algo, n):
        with pytest.raises(PlanError, match="power-of-two number of ranks"):
            plan(op, algo, n, count, root)
        return
    assert simulate(plan(op, algo, n, count, root), op, n, count) == _expected(op, n, count, root)


@pytest.mark.parametrize("n", WORLDS)
def test_hop_counts_and_traffic_follow_the_formulas(n):
    """Written from the algorithms' definitions: S elements per rank, n ranks."""
    s = 4 * n
    log2 = math.ceil(math.log2(n))
    ring = plan("all_reduce", "ring", n, s)
    assert len(ring.hops) == 2 * (n - 1)
    assert all(ring.sent(r) == 2 * (n - 1) * s // n for r in range(n))  # the 2(n−1)/n of busbw
    gather = plan("all_gather", "ring", n, s)
    assert len(gather.hops) == n - 1 and all(gather.sent(r) == (n - 1) * s for r in range(n))
    scatter = plan("reduce_scatter", "ring", n, s)
    assert len(scatter.hops) == n - 1 and all(scatter.sent(r) == (n - 1) * s // n for r in range(n))
    pairwise = plan("all_to_all", "pairwise", n, s)
    assert len(pairwise.hops) == n - 1 and all(pairwise.sent(r) == (n - 1) * s // n for r in range(n))
    tree = plan("all_reduce", "tree", n, s)
    assert len(tree.hops) == 2 * log2
    assert len(plan("broadcast", "binomial-tree", n, s, 0).hops) == log2
    assert len(plan("all_gather", "bruck", n, s).hops) == log2
    assert all(plan("all_gather", "bruck", n, s).sent(r) == (n - 1) * s for r in range(n))
    assert len(plan("gather", "binomial-tree", n, s, 0).hops) == log2
    assert len(plan("scatter", "binomial-tree", n, s, 0).hops) == log2
    pieces = min(4, s)
    assert len(plan("broadcast", "pipelined-ring", n, s, 0).hops) == n - 1 + pieces - 1
    assert len(plan("all_reduce", "direct", n, s).hops) == 1
    doubling = plan("all_reduce", "recursive-doubling", n, s)
    p = 1 << (n.bit_length() - 1)
    assert len(doubling.hops) == int(math.log2(p)) + (2 if p < n else 0)
    if p == n:
        assert all(doubling.sent(r) == int(math.log2(n)) * s for r in range(n))
        halving = plan("reduce_scatter", "recursive-halving", n, s)
        assert len(halving.hops) == int(math.log2(n)) and all(halving.sent(r) == (n - 1) * s // n for r in range(n))


def test_unknown_algorithms_and_uneven_splits_are_one_line_errors():
    with pytest.raises(PlanError, match="all_gather has library, ring, recursive-doubling"):
        plan("all_gather", "tree", 4, 8)
    with pytest.raises(PlanError, match="multiple of 4"):
        plan("reduce_scatter", "ring", 4, 6)


# -------------------------------------------------------------------------------- real ranks


def _every_algorithm(rank: int, n: int):
    """Yield ``((op, algo), result)`` for every applicable plan through the caller ``bench --algo``
    times (library-style input and output; float64 integers, so sums are exact in any order)."""
    for op, algo in CASES:
        if not _applies(op, algo, n):
            continue
        count, root = _count(op, n), ROOT % n
        inputs = _inputs(n, count)
        own = inputs[root] if op in ("broadcast", "scatter") else inputs[rank]
        inp = None if op == "scatter" and rank != root else torch.tensor(own, dtype=torch.float64)
        if op == "broadcast" and rank != root:
            inp = torch.zeros(count, dtype=torch.float64)
        out = _library_output(op, rank, n, count, root)
        algorithm_caller(plan(op, algo, n, count, root), rank, "sum")(inp, out, "sum")
        result = inp if op in ("all_reduce", "broadcast", "reduce") else out
        defined = not (op in ("reduce", "gather") and rank != root)
        yield (op, algo), [int(v) for v in result.tolist()] if defined else None


def _library_output(op: str, rank: int, n: int, count: int, root: int) -> torch.Tensor | None:
    """The output buffer the library call would take (written here, not collviz's)."""
    if op in ("all_reduce", "broadcast", "reduce") or (op == "gather" and rank != root):
        return None
    size = {"all_gather": n * count, "gather": n * count, "reduce_scatter": count // n, "scatter": count // n,
            "all_to_all": count}[op]
    return torch.zeros(size, dtype=torch.float64)


@pytest.fixture(scope="module")
def real_runs() -> dict[tuple[int, str, str, int], list[int] | None]:
    """One 2-, 3-, 4-, 5- and 8-rank gloo group each, running every algorithm once."""
    found = {}
    for n in WORLDS:
        for rank, ((op, algo), got) in run_on_gloo_ranks(_every_algorithm, n):
            found[(n, op, algo, rank)] = got
    return found


@pytest.mark.parametrize("n", WORLDS)
def test_on_real_ranks_every_algorithm_gives_the_ops_result(real_runs, n):
    for op, algo in CASES:
        if not _applies(op, algo, n):
            continue
        count, root = _count(op, n), ROOT % n
        expected = _expected(op, n, count, root)
        for rank in range(n):
            assert real_runs[(n, op, algo, rank)] == expected[rank], f"{algo} {op} on {n} ranks, rank {rank}"
