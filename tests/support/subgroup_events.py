"""A 4-rank run whose all_gather is a subgroup's: ranks 1 and 3 only (2 of 4, without rank 0),
each rank taking its own time, so a figure made with the world's size, the fastest rank or the
last rank to finish differs from the right one. Built from :func:`.synthetic.all_gather_events`;
nothing here imports collviz's code, only its event types.
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


def subgroup_all_gather(*, timed: bool = True) -> list[AnyEvent]:
    """The run: ranks 0 and 2 make no call in phase 1; ranks 1 and 3 all-gather on :data:`PAIR_GROUP`,
    timed as :data:`PAIR_TIMES_NS` (untimed where ``timed`` is False); phase 1's ends placed so each
    rank spends :data:`PHASE_TIMES_NS` in it."""
    events: list[AnyEvent] = []
    begins: dict[int, int] = {}
    for event in all_gather_events(world=4):
        if isinstance(event, Collective):
            if event.rank not in PAIR:
                continue
            duration = PAIR_TIMES_NS[event.rank] if timed and event.edge == "end" else None
            event = msgspec.structs.replace(event, group=PAIR_GROUP, group_ranks=PAIR, bytes_out=4 * SHARD * len(PAIR),
                                            algo_bytes=PAIR_S, duration_ns=duration)
        elif isinstance(event, Phase) and event.index == 1:
            if event.edge == "begin":
                begins[event.rank] = event.t_ns
            else:
                event = msgspec.structs.replace(event, t_ns=begins[event.rank] + PHASE_TIMES_NS[event.rank])
        events.append(event)
    return events
