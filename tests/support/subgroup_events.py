"""A 4-rank run whose all_gather is a subgroup's: ranks 1 and 3 only (2 of 4, without rank 0),
each rank taking its own time, so a figure made with the world's size, the fastest rank or the
last rank to finish differs from the right one; and the same step with ranks 0 and 2 all-gathering
on a second pair (two communicators of the same size). Built from
:func:`.synthetic.all_gather_events`, whose calls are regrouped (their buffers stay the world
all-gather's: only the calls' figures are meant to be read); nothing here imports collviz's code,
only its event types.
"""

from __future__ import annotations

import msgspec

from collviz.runtime.wire.protocol import AnyEvent, Collective, Phase

from .synthetic import SHARD, all_gather_events

PAIR = [1, 3]
"""The subgroup's ranks."""
PAIR_GROUP = "1 (pair)"
PAIR_TIMES_NS = {1: 80_000, 3: 10_000}
"""Each subgroup rank's all_gather time: rank 1 is the slowest, rank 3 (the last listed) the fastest."""
PHASE_TIMES_NS = {0: 30_000, 1: 90_000, 2: 60_000, 3: 20_000}
"""Each rank's time in phase 1 (the all_gather's): rank 1 the slowest, rank 3 (the last to end) the fastest."""
PAIR_S = 4 * SHARD * len(PAIR)
"""The subgroup all_gather's S: SHARD float32 in per rank × its 2 ranks = 16 B."""


OTHER_PAIR = [0, 2]
"""The second subgroup (:func:`two_pairs_all_gather`): as large as :data:`PAIR`, holding rank 0."""
OTHER_PAIR_GROUP = "2 (pair)"
OTHER_PAIR_TIMES_NS = {0: 40_000, 2: 50_000}
"""Each second-subgroup rank's all_gather time: rank 2 the slowest."""


def subgroup_all_gather(*, timed: bool = True) -> list[AnyEvent]:
    """The run: ranks 0 and 2 make no call in phase 1; ranks 1 and 3 all-gather on :data:`PAIR_GROUP`,
    timed as :data:`PAIR_TIMES_NS` (untimed where ``timed`` is False); phase 1's ends placed so each
    rank spends :data:`PHASE_TIMES_NS` in it."""
    return _pairs({PAIR_GROUP: (PAIR, PAIR_TIMES_NS)}, timed)


def two_pairs_all_gather() -> list[AnyEvent]:
    """Two communicators of the same size in one step: ranks 1 and 3 all-gather on
    :data:`PAIR_GROUP` (:data:`PAIR_TIMES_NS`) while ranks 0 and 2 do on :data:`OTHER_PAIR_GROUP`
    (:data:`OTHER_PAIR_TIMES_NS`); phase 1 as in :func:`subgroup_all_gather`."""
    return _pairs({PAIR_GROUP: (PAIR, PAIR_TIMES_NS), OTHER_PAIR_GROUP: (OTHER_PAIR, OTHER_PAIR_TIMES_NS)}, True)


def _pairs(groups: dict[str, tuple[list[int], dict[int, int]]], timed: bool) -> list[AnyEvent]:
    """The world's all_gather run with each rank's call moved to its group of ``groups`` (name →
    ranks, each rank's time), a rank in none making no call; phase 1 as :data:`PHASE_TIMES_NS`."""
    group_of = {rank: (name, ranks, times) for name, (ranks, times) in groups.items() for rank in ranks}
    events: list[AnyEvent] = []
    begins: dict[int, int] = {}
    for event in all_gather_events(world=4):
        if isinstance(event, Collective):
            if event.rank not in group_of:
                continue
            name, ranks, times = group_of[event.rank]
            duration = times[event.rank] if timed and event.edge == "end" else None
            event = msgspec.structs.replace(event, group=name, group_ranks=ranks, bytes_out=4 * SHARD * len(ranks),
                                            algo_bytes=4 * SHARD * len(ranks), duration_ns=duration)
        elif isinstance(event, Phase) and event.index == 1:
            if event.edge == "begin":
                begins[event.rank] = event.t_ns
            else:
                event = msgspec.structs.replace(event, t_ns=begins[event.rank] + PHASE_TIMES_NS[event.rank])
        events.append(event)
    return events
