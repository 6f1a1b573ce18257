"""The α–β cost model fitted to a bench sweep of hop-by-hop algorithms.

A hop costs a latency α whatever it carries, and every byte the busiest rank sends costs β:
``T = α · hops + β · bytes sent``. One α and one β are fitted to every algorithm row of the sweep
together (they describe the machine, not the algorithm), by least squares on *relative* errors:
each row's equation is divided by its measured time, so a 4 KiB row counts as much as a 16 MiB one.
Unweighted, the largest sizes decide the fit and α, which only small sizes show, comes out wrong
(benchmarks/alpha_beta_fit.py: with α = 50 µs and β = 0.5 ns/B, α's median error over 300 synthetic
sweeps with 10 % noise is 25 % unweighted, 2 % weighted).
Each row's prediction and residual stand beside its measured time, and for two algorithms of one
op the size where the model says one overtakes the other is the crossover.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Protocol

from ..observation.metrics import human_bytes

__all__ = ["AlphaBeta", "fitted_rows", "fit_alpha_beta", "residual_line", "crossovers", "fit_lines"]


class _Row(Protocol):
    # properties: a row is read, never written (BenchRow is frozen)
    @property
    def op(self) -> str: ...
    @property
    def algo(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def hops(self) -> int: ...
    @property
    def sent_bytes(self) -> int: ...
    @property
    def time_us(self) -> float: ...


@dataclass(frozen=True)
class AlphaBeta:
    """Fitted latency per hop (µs) and time per byte (µs), and the rows they were fitted to."""

    alpha_us: float
    beta_us_per_byte: float
    rows: int

    def predict(self, row: _Row) -> float:
        """The model's time for ``row``, in µs."""
        return self.alpha_us * row.hops + self.beta_us_per_byte * row.sent_bytes

    def residual(self, row: _Row) -> float:
        """``(measured − model) / measured`` for ``row``: the error the fit minimises (0.1 = the row
        took 10 % of its time more than the model says)."""
        return (row.time_us - self.predict(row)) / row.time_us


def fitted_rows(rows: Sequence[_Row]) -> list[_Row]:
    """The rows a fit uses: hop-by-hop algorithms (the library's hops are not observable) with a
    measured time."""
    return [r for r in rows if r.hops and r.time_us > 0]


def fit_alpha_beta(rows: Sequence[_Row]) -> AlphaBeta | None:
    """α and β by least squares on relative errors, over :func:`fitted_rows` (None: too few, or
    rows that cannot tell latency from bandwidth apart).

    Row i's equation ``α·h + β·b = t`` divided by ``t``: minimises Σ ((t − α·h − β·b) / t)².
    """
    used = fitted_rows(rows)
    if len(used) < 2:
        return None
    h = [r.hops / r.time_us for r in used]  # the weighted design matrix [h, b] and target 1
    b = [r.sent_bytes / r.time_us for r in used]
    hh, hb, bb = sum(x * x for x in h), sum(x * y for x, y in zip(h, b)), sum(y * y for y in b)
    determinant = hh * bb - hb * hb
    if abs(determinant) <= 1e-9 * max(hh * bb, 1e-300):
        return None
    ht, bt = sum(h), sum(b)
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


def residual_line(fit: AlphaBeta, rows: Sequence[_Row]) -> str:
    """How far the model is from the rows it was fitted to: the RMS residual and the largest."""
    used = fitted_rows(rows)
    residuals = [fit.residual(row) for row in used]
    rms = math.sqrt(sum(r * r for r in residuals) / len(residuals))
    worst = max(used, key=lambda row: abs(fit.residual(row)))
    return (f"residuals (measured − model) / measured: RMS {rms:.1%}, largest {fit.residual(worst):+.1%} "
            f"({worst.op} {worst.algo}, {human_bytes(worst.size)})")


def fit_lines(fit: AlphaBeta | None, rows: Sequence[_Row]) -> list[str]:
    """The fit, its crossovers, and what the model leaves out, as report lines."""
    if fit is None:
        return ["α–β fit: needs rows of at least two hop-by-hop shapes (add sizes or algorithms)"]
    bandwidth = f" (1/β = {1 / fit.beta_us_per_byte / 1e3:.3g} GB/s)" if fit.beta_us_per_byte > 0 else ""
    lines = [f"α–β fit over {fit.rows} algorithm rows, each weighted by 1/t (relative errors): "
             f"T = α·hops + β·bytes sent by the busiest rank; "
             f"α = {fit.alpha_us:.1f} µs per hop, β = {fit.beta_us_per_byte * 1e3:.4g} ns per byte{bandwidth}",
             residual_line(fit, rows)]
    if fit.alpha_us <= 0 or fit.beta_us_per_byte <= 0:
        lines.append("the fit is not physical (a latency or a time per byte ≤ 0): at these sizes the times are "
                     "mostly noise; sweep larger sizes or more --iters before reading crossovers from it")
    else:
        lines += [f"crossover (predicted): {line}" for line in crossovers(fit, rows)]
    lines.append("the model leaves out reduction arithmetic and collviz's own buffer setup; the library's "
                 "rows are measured only (its hops are not observable)")
    return lines
