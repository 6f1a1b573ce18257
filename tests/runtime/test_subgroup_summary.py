"""The headless summary and its --json of a 2-of-4 subgroup's all_gather (ranks 1 and 3) whose
ranks took different times (:mod:`support.subgroup_events`): S, algbw and busbw use the group's
two ranks, not the world's four, and the slowest rank's time, not the fastest's or the last's.

By hand: S = 2 float32 in × 2 ranks = 16 B; t = rank 1's 80 µs (rank 3: 10 µs); algbw = 16 B /
80 µs = 200,000 B/s; busbw = algbw × (n−1)/n with n = 2 = 100,000 B/s (with n = 4 it would be
150,000). Phase 1 took rank 1 90 µs, the slowest (rank 3, the last to end it, 20 µs).
"""

from __future__ import annotations

import pytest

from collviz.runtime.reports.summary import render_summary
from collviz.runtime.reports.summary_json import summary_document

from support.subgroup_events import subgroup_all_gather, two_pairs_all_gather


def test_the_summary_gives_the_subgroups_figures():
    lines = render_summary(subgroup_all_gather()).splitlines()
    assert "  time (per rank): r1 0.080 ms, r3 0.010 ms" in lines
    assert "  t = slowest rank; S = 16 B (nccl-tests algorithm size for all_gather)" in lines
    assert ("  algbw = S/t = 16 B / 0.080 ms = 200 kB/s; "
            "busbw = algbw × (n−1)/n = 1/2 = 0.5 = 100 kB/s") in lines


def test_the_json_gives_the_subgroups_figures_and_the_slowest_ranks_phase_time():
    document = summary_document(subgroup_all_gather())
    assert document["phases"][1]["slowest_seconds"] == pytest.approx(90e-6)
    [call] = document["calls"]
    assert (call["group"], call["group_ranks"], call["algo_bytes"]) == ("1 (pair)", [1, 3], 16)
    assert call["seconds"] == pytest.approx({1: 80e-6, 3: 10e-6})
    assert call["slowest_seconds"] == pytest.approx(80e-6)
    assert call["algbw"] == pytest.approx(200_000) and call["busbw"] == pytest.approx(100_000)


def test_two_groups_of_the_same_size_each_get_their_own_figures():
    """Pairs {1, 3} and {0, 2} all-gather in one step (two communicators of 2 ranks). By hand, the
    second: S = 2 float32 × 2 ranks = 16 B; t = rank 2's 50 µs (rank 0: 40 µs); algbw = 16 B /
    50 µs = 320,000 B/s; busbw × 1/2 = 160,000 B/s. The first keeps 200,000 and 100,000 B/s: a
    figure taken from the other group (its rank's time, or both groups as one of 4) differs."""
    lines = render_summary(two_pairs_all_gather()).splitlines()
    assert "  all_gather on 2 (pair) (ranks 0, 2):" in lines and "  all_gather on 1 (pair) (ranks 1, 3):" in lines
    assert "  time (per rank): r0 0.040 ms, r2 0.050 ms" in lines
    assert "  time (per rank): r1 0.080 ms, r3 0.010 ms" in lines
    assert ("  algbw = S/t = 16 B / 0.050 ms = 320 kB/s; "
            "busbw = algbw × (n−1)/n = 1/2 = 0.5 = 160 kB/s") in lines
    calls = {call["group"]: call for call in summary_document(two_pairs_all_gather())["calls"]}
    assert sorted(calls) == ["1 (pair)", "2 (pair)"]
    assert (calls["2 (pair)"]["group_ranks"], calls["2 (pair)"]["algo_bytes"]) == ([0, 2], 16)
    assert calls["2 (pair)"]["slowest_seconds"] == pytest.approx(50e-6)
    assert calls["2 (pair)"]["algbw"] == pytest.approx(320_000) and calls["2 (pair)"]["busbw"] == pytest.approx(160_000)
    assert calls["1 (pair)"]["algbw"] == pytest.approx(200_000) and calls["1 (pair)"]["busbw"] == pytest.approx(100_000)
