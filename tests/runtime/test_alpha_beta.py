"""The α–β fit on synthetic sweeps of known α and β: weighted by 1/t, it recovers α where an
unweighted fit cannot, and the bench table prints each row's residual. No ranks are started."""

from __future__ import annotations

import random
import statistics

import numpy as np
import pytest

from collviz.runtime.reports.alpha_beta import AlphaBeta, fit_alpha_beta, fit_lines
from collviz.runtime.reports.bench_table import BenchReport, BenchRow, render_table

ALPHA_US, BETA_US_PER_BYTE = 50.0, 0.0005  # 50 µs per hop, 2 GB/s
SHAPES = {"ring": (6, 1.5), "recursive-doubling": (2, 2.0), "tree": (4, 2.0), "direct": (1, 3.0)}
"""All-reduce on 4 ranks: hops, and bytes the busiest rank sends per byte of S (the plans' own
figures, written here from the algorithms' definitions: ring 2(n−1) hops of S/n each, …)."""
SIZES = [1024 * 2**k for k in range(15)]  # 1 KiB … 16 MiB, bench's default sweep


def row(algo: str, size: int, time_us: float) -> BenchRow:
    hops, per_byte = SHAPES[algo]
    return BenchRow(op="all_reduce", size=size, count=size // 4, dtype="float32", iters=20, time_us=time_us,
                    algbw_gbps=0.0, busbw_gbps=0.0, bus_factor=1.5, bus_factor_text="", wrong=0, algo=algo,
                    hops=hops, sent_bytes=int(per_byte * size))


def sweep(rng: random.Random, noise: float) -> list[BenchRow]:
    """Every algorithm at every size, timed ``α·hops + β·sent`` × (1 + N(0, noise))."""
    return [row(algo, size, (ALPHA_US * h + BETA_US_PER_BYTE * int(k * size)) * (1 + rng.gauss(0, noise)))
            for size in SIZES for algo, (h, k) in SHAPES.items()]


def lstsq(rows: list[BenchRow], weights: np.ndarray) -> np.ndarray:
    """(α, β) by numpy's least squares of ``weights`` × [hops, sent] = ``weights`` × t."""
    design = np.array([[r.hops, r.sent_bytes] for r in rows], dtype=float) * weights[:, None]
    target = np.array([r.time_us for r in rows]) * weights
    return np.linalg.lstsq(design, target, rcond=None)[0]


def test_the_fit_is_least_squares_on_relative_errors():
    rows = sweep(random.Random(7), 0.1)
    fit = fit_alpha_beta(rows)
    alpha, beta = lstsq(rows, 1 / np.array([r.time_us for r in rows]))
    assert fit.alpha_us == pytest.approx(alpha, rel=1e-9) and fit.beta_us_per_byte == pytest.approx(beta, rel=1e-9)
    assert fit.rows == len(rows)


def test_weighted_fit_recovers_alpha_where_the_unweighted_one_cannot():
    """100 sweeps with 10 % noise: α's median error is a few % weighted, tens of % unweighted."""
    rng = random.Random(0)
    weighted, unweighted = [], []
    for _ in range(100):
        rows = sweep(rng, 0.1)
        weighted.append(abs(fit_alpha_beta(rows).alpha_us / ALPHA_US - 1))
        unweighted.append(abs(lstsq(rows, np.ones(len(rows)))[0] / ALPHA_US - 1))
    assert statistics.median(weighted) < 0.04
    assert statistics.median(unweighted) > 0.10


def test_exact_rows_give_exact_alpha_beta_and_zero_residuals():
    rows = [row(algo, size, ALPHA_US * h + BETA_US_PER_BYTE * int(k * size))
            for size in SIZES[:4] for algo, (h, k) in SHAPES.items()]
    fit = fit_alpha_beta(rows)
    assert fit.alpha_us == pytest.approx(ALPHA_US) and fit.beta_us_per_byte == pytest.approx(BETA_US_PER_BYTE)
    assert all(abs(fit.residual(r)) < 1e-9 for r in rows)
    assert "residuals (measured − model) / measured: RMS 0.0%" in fit_lines(fit, rows)[1]


def test_residual_is_relative_to_the_measured_time():
    fit = AlphaBeta(alpha_us=10.0, beta_us_per_byte=0.001, rows=2)
    slow = row("ring", 1000, 110.0)  # model: 10·6 + 0.001·1500 = 61.5 µs
    assert fit.residual(slow) == pytest.approx((110.0 - 61.5) / 110.0)


def test_the_bench_table_prints_each_rows_residual_and_names_the_worst():
    rows = [row(algo, size, ALPHA_US * h + BETA_US_PER_BYTE * int(k * size))
            for size in SIZES[:3] for algo, (h, k) in SHAPES.items()]
    rows[5] = row(rows[5].algo, rows[5].size, rows[5].time_us * 2)  # one row twice as slow as the machine
    rows.append(BenchRow(op="all_reduce", size=1024, count=256, dtype="float32", iters=20, time_us=80.0,
                         algbw_gbps=0.0, busbw_gbps=0.0, bus_factor=1.5, bus_factor_text="", wrong=0))
    report = BenchReport(world_size=4, backend="gloo", backend_reason="gloo on CPU", options={}, rows=rows,
                         devices=[], status="ok")
    text = render_table(report)
    header = next(line for line in text.splitlines() if "resid" in line)
    table = [line for line in text.splitlines() if line.strip().startswith(tuple(SHAPES) + ("library",))]
    assert header.rstrip().endswith("resid") and len(table) == len(rows)
    assert table[-1].rstrip().endswith("—")  # the library's row is measured only
    fit = fit_alpha_beta(rows)
    for line, shown in zip(table, rows[:-1]):
        assert line.rstrip().endswith(f"{(shown.time_us - fit.predict(shown)) / shown.time_us:+.0%}")
    assert f"({rows[5].op} {rows[5].algo}, 2 KiB)" in text
