"""The cost of a call (app/model/cost.py) on ranks that took different times: the headline time is
the slowest rank's, named, and algbw/busbw follow from it — every figure worked out here by hand."""

from __future__ import annotations

import msgspec
import pytest

from collviz.app.model import EventLog, costs_at
from collviz.runtime.wire.protocol import Collective

from fixtures.synthetic import SHARD, all_gather_events

TIMES_NS = {0: 20_000, 1: 80_000, 2: 50_000, 3: 10_000}
"""Each rank's time in the all-gather: rank 1 is the slowest, and neither the first nor the last."""


def _timed_run() -> list:
    events = all_gather_events(world=4)
    return [msgspec.structs.replace(e, duration_ns=TIMES_NS[e.rank])
            if isinstance(e, Collective) and e.edge == "end" else e for e in events]


def test_the_call_is_timed_by_its_slowest_rank_and_names_it():
    log = EventLog(_timed_run())
    [cost], calls = costs_at(log, len(log), 1)
    assert calls == 1
    assert cost.slowest == 1
    assert cost.seconds == pytest.approx(80e-6)
    assert {r.rank: r.seconds for r in cost.by_rank} == pytest.approx({r: t / 1e9 for r, t in TIMES_NS.items()})
    size = 4 * SHARD * 4  # all_gather's S: the per-rank input (SHARD float32) × 4 ranks
    assert cost.algo_bytes == size
    assert cost.rate.algbw == pytest.approx(size / 80e-6)
    assert cost.rate.busbw == pytest.approx(size / 80e-6 * 3 / 4)
