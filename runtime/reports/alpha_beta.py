"""The α–β cost model fitted to a bench sweep of hop-by-hop algorithms.

A hop costs a latency α whatever it carries, and every byte the busiest rank sends costs β:
``T = α · hops + β · bytes sent``. One α and one β are fitted, by least squares, to every
algorithm row of the sweep together (they describe the machine, not the algorithm); each row's
prediction stands beside its measured time, and for two algorithms of one op the size where the
model says one overtakes the other is the crossover.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Protocol

from ..observation.metrics import human_bytes

__all__ = ["AlphaBeta", "fit_alpha_beta", "crossovers", "fit_lines"]


class _Row(Protocol):
    op: str
    algo: str
    size: int
    hops: int
    sent_bytes: int
    time_us: float


@dataclass(frozen=True)
class AlphaBeta:
    """Fitted latency per hop (µs) and time per byte (µs), and the rows they were fitted to."""

    alpha_us: float
    beta_us_per_byte: float
    rows: int

    def predict(self, row: _Row) -> float:
        """The model's time for ``row``, in µs."""
        return self.alpha_us * row.hops + self.beta_us_per_byte * row.sent_bytes


def fit_alpha_beta(rows: Sequence[_Row]) -> AlphaBeta | None:
    """α and β by least squares over the rows of hop-by-hop algorithms (None: too few, or rows
    that cannot tell latency from bandwidth apart)."""
    used = [r for r in rows if r.hops]
    if len(used) < 2:
        return None
    hh = sum(r.hops * r.hops for r in used)
    hb = sum(r.hops * r.sent_bytes for r in used)
    bb = sum(r.sent_bytes * r.sent_bytes for r in used)
    ht = sum(r.hops * r.time_us for r in used)
    bt = sum(r.sent_bytes * r.time_us for r in used)
    determinant = hh * bb - hb * hb
    if abs(determinant) <= 1e-9 * max(hh * bb, 1):
        return None
    alpha = (ht * bb - hb * bt) / determinant
    beta = (hh * bt - hb * ht) / determinant
    return AlphaBeta(alpha, beta, len(used))


def crossovers(fit: AlphaBeta, rows: Sequence[_Row]) -> list[str]:
    """For each op, each pair of its algorithms: the size S where the model says their times meet."""
    shape: dict[tuple[str, str], tuple[int, float]] = {}
    for row in sorted((r for r in rows if r.hops and r.size), key=lambda r: r.size):
        shape[(row.op, row.algo)] = (row.hops, row.sent_bytes / row.size)  # hops; bytes sent per byte of S
    by_op: dict[str, list[str]] = defaultdict(list)
    for op, algo in shape:
        by_op[op].append(algo)
    lines = []
    for op, algos in by_op.items():
        for a, b in combinations(algos, 2):
            (ha, ka), (hb, kb) = shape[(op, a)], shape[(op, b)]
            fewer_hops, less_traffic = (a, b) if ha < hb else (b, a)
            if ka == kb or ha == hb:
                lighter = less_traffic if ha == hb else fewer_hops
                why = "fewer hops, the same traffic" if ka == kb else "less traffic, the same hops"
                lines.append(f"{op}: {lighter} is faster than {b if lighter == a else a} at every size ({why})")
                continue
            size = fit.alpha_us * (hb - ha) / (fit.beta_us_per_byte * (ka - kb))
            if size <= 0:
                faster = a if fit.alpha_us * ha <= fit.alpha_us * hb else b
                lines.append(f"{op}: {faster} is faster than {b if faster == a else a} at every size in this model")
                continue
            lines.append(f"{op}: {fewer_hops} (fewer hops) is faster below S ≈ {human_bytes(round(size))}, "
                         f"{less_traffic} (less traffic per rank) above it")
    return lines


def fit_lines(fit: AlphaBeta | None, rows: Sequence[_Row]) -> list[str]:
    """The fit, its crossovers, and what the model leaves out, as report lines."""
    if fit is None:
        return ["α–β fit: needs rows of at least two hop-by-hop shapes (add sizes or algorithms)"]
    bandwidth = f" (1/β = {1 / fit.beta_us_per_byte / 1e3:.3g} GB/s)" if fit.beta_us_per_byte > 0 else ""
    lines = [f"α–β fit over {fit.rows} algorithm rows: T = α·hops + β·bytes sent by the busiest rank; "
             f"α = {fit.alpha_us:.1f} µs per hop, β = {fit.beta_us_per_byte * 1e3:.4g} ns per byte{bandwidth}"]
    if fit.alpha_us <= 0 or fit.beta_us_per_byte <= 0:
        lines.append("the fit is not physical (a latency or a time per byte ≤ 0): at these sizes the times are "
                     "mostly noise; sweep larger sizes or more --iters before reading crossovers from it")
    else:
        lines += [f"crossover (predicted): {line}" for line in crossovers(fit, rows)]
    lines.append("the model leaves out reduction arithmetic and collviz's own buffer setup; the library's "
                 "rows are measured only (its hops are not observable)")
    return lines
