"""The cost of a call (app/model/cost.py) on ranks that took different times: the headline time is
the slowest rank's, named, and algbw/busbw follow from it — every figure worked out here by hand."""

from __future__ import annotations

import pytest

from collviz.app.model import EventLog, costs_at

from support.synthetic import SHARD, UNEVEN_TIMES_NS, unevenly_timed_all_gather


def test_the_call_is_timed_by_its_slowest_rank_and_names_it():
    log = EventLog(unevenly_timed_all_gather())
    [cost], calls = costs_at(log, len(log), 1)
    assert calls == 1
    assert cost.slowest == 1
    assert cost.seconds == pytest.approx(80e-6)
    assert {r.rank: r.seconds for r in cost.by_rank} == pytest.approx({r: t / 1e9 for r, t in UNEVEN_TIMES_NS.items()})
    size = 4 * SHARD * 4  # all_gather's S: the per-rank input (SHARD float32) × 4 ranks
    assert cost.algo_bytes == size
    assert cost.rate.algbw == pytest.approx(size / 80e-6)
    assert cost.rate.busbw == pytest.approx(size / 80e-6 * 3 / 4)
