"""The cost pane of a 2-of-4 subgroup's all_gather (ranks 1 and 3, :mod:`support.subgroup_events`):
its busbw uses the group's 2 ranks, and an untimed call takes the phase's slowest rank's time.

By hand: S = 16 B; timed, t = rank 1's 80 µs: algbw 200,000 B/s, busbw × 1/2 = 100,000 B/s.
Untimed, t = phase 1's slowest rank: rank 1's 90 µs (rank 3, the last to end it, took 20 µs):
algbw = 16 / 90e-6 = 177,777.8 B/s, busbw half of it.
"""

from __future__ import annotations

import pytest

from collviz.app.model import EventLog, costs_at

from support.subgroup_events import subgroup_all_gather, two_pairs_all_gather


def test_a_subgroups_call_costs_with_its_own_size():
    log = EventLog(subgroup_all_gather())
    [cost], _ = costs_at(log, len(log), 1)
    assert (cost.ranks, cost.algo_bytes, cost.slowest, cost.timed) == (2, 16, 1, "call")
    assert cost.seconds == pytest.approx(80e-6)
    assert cost.rate.algbw == pytest.approx(200_000) and cost.rate.busbw == pytest.approx(100_000)


def test_an_untimed_call_takes_the_phases_slowest_rank():
    log = EventLog(subgroup_all_gather(timed=False))
    [cost], _ = costs_at(log, len(log), 1)
    assert (cost.timed, cost.slowest) == ("phase", None)
    assert cost.seconds == pytest.approx(90e-6)
    assert cost.rate.algbw == pytest.approx(16 / 90e-6) and cost.rate.busbw == pytest.approx(16 / 90e-6 / 2)


def test_two_groups_of_the_same_size_cost_apart():
    """Pairs {0, 2} and {1, 3} in one step: each group's own ranks, time and rates (by hand: {0, 2}
    t = rank 2's 50 µs, algbw 320,000 B/s, busbw 160,000; {1, 3} as above)."""
    log = EventLog(two_pairs_all_gather())
    costs, _ = costs_at(log, len(log), 1)
    by_group = {cost.group: cost for cost in costs}
    assert sorted(by_group) == ["1 (pair)", "2 (pair)"]
    other = by_group["2 (pair)"]
    assert (other.ranks, other.algo_bytes, other.slowest, other.timed) == (2, 16, 2, "call")
    assert other.seconds == pytest.approx(50e-6)
    assert other.rate.algbw == pytest.approx(320_000) and other.rate.busbw == pytest.approx(160_000)
    assert by_group["1 (pair)"].rate.busbw == pytest.approx(100_000)
