"""The headless summary's figures for a synthetic all-gather whose ranks took different times, each
worked out here: the transfers' count and bytes, the slowest rank's time, S, algbw and busbw."""

from __future__ import annotations

from collviz.runtime.reports.summary import render_summary

from support.synthetic import SHARD, unevenly_timed_all_gather


def _summary() -> list[str]:
    return render_summary(unevenly_timed_all_gather()).splitlines()


def test_the_transfers_are_counted_in_bytes():
    lines = _summary()
    shard_bytes = SHARD * 4  # float32
    # every rank receives the 3 other ranks' shards
    assert f"  transfers (logical data movement, as seen from inputs and outputs): 12, {12 * shard_bytes} B in all" in lines
    assert f"    r2 → r0  output[{2 * SHARD}:{3 * SHARD}]  {shard_bytes} B" in lines


def test_the_call_is_timed_by_the_slowest_rank():
    lines = _summary()
    s = 4 * SHARD * 4  # all_gather's S: per-rank input × 4 ranks, 32 B
    seconds = 80e-6  # rank 1's
    assert "  time (per rank): r0 0.020 ms, r1 0.080 ms, r2 0.050 ms, r3 0.010 ms" in lines
    assert f"  t = slowest rank; S = {s} B (nccl-tests algorithm size for all_gather)" in lines
    algbw, busbw = s / seconds, s / seconds * 3 / 4  # 400 kB/s, 300 kB/s
    assert (f"  algbw = S/t = {s} B / 0.080 ms = {algbw / 1e3:.3g} kB/s; "
            f"busbw = algbw × (n−1)/n = 3/4 = 0.75 = {busbw / 1e3:.3g} kB/s") in lines
