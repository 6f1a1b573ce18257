"""A :class:`~.protocol.CallRanks` event read per rank: the ``Phase`` and ``Collective`` events
each of its ranks would have carried, made when asked (one rank's, or all of them), never held.

The event's ranks are columns. A rank's edge of the call is found by its :data:`Place` in them —
:func:`begin_places` and :func:`end_places` give every rank's, in the columns' order, so a reader
that files the event per rank notes each rank's place once — and :func:`phase_at` and
:func:`collective_at` read the rank's begin or end at its place in O(1), however many ranks the
call has (a place found by scanning the columns made a 1,024-rank viewer's frame O(ranks²) per
call: ``benchmarks/grouped_reads.py``). :func:`per_rank_events` gives every rank's events in the
order the feed emitted them before 1.7 (per rank: Phase begin, Collective begin; then Collective
end, Phase end), each numbered in its rank's own sequence: what a trace holds instead of the event,
and what a reader that wants the events one rank at a time reads.
"""

from __future__ import annotations

from .protocol import CallRanks, Collective, Phase

__all__ = ["Place", "begin_places", "collective_at", "end_places", "per_rank_events", "phase_at"]

Place = int
"""Where one rank's edge of a call sits in its event's columns: ``at`` (``>= 0``) is its begin, at
place ``at`` of ``issued`` (and of ``issued_ns``, ``issued_seq``); ``~at`` (negative) its end, at
place ``at`` of ``ended`` (and of ``ended_ns``, ``durations_ns``, ``ended_seq``)."""


def begin_places(event: CallRanks) -> range:
    """The :data:`Place` of each issuing rank's begin, in the order of ``event.issued``."""
    return range(len(event.issued))


def end_places(event: CallRanks) -> range:
    """The :data:`Place` of each completing rank's end, in the order of ``event.ended``."""
    return range(-1, -1 - len(event.ended), -1)


def _number(numbers: list[int], at: int, after: int, event: CallRanks) -> int:
    """The sequence number of a rank's event: ``after`` past the rank's first at this edge
    (``numbers[at]``), or the event's own where it carries none (a 1.7 trace written before them)."""
    return numbers[at] + after if numbers else event.seq


def phase_at(event: CallRanks, place: Place) -> Phase:
    """The ``Phase`` event the rank at ``place`` would have emitted at that edge of the call (the
    narration on the begin only, as a rank's own Phase events carry it)."""
    if place >= 0:
        return Phase(run=event.run, rank=event.issued[place], seq=_number(event.issued_seq, place, 0, event),
                     t_ns=event.issued_ns[place], index=event.phase, name=event.name, edge="begin",
                     narration=event.narration)
    at = ~place
    return Phase(run=event.run, rank=event.ended[at], seq=_number(event.ended_seq, at, 1, event),
                 t_ns=event.ended_ns[at], index=event.phase, name=event.name, edge="end")


def collective_at(event: CallRanks, place: Place) -> Collective:
    """The ``Collective`` event the rank at ``place`` would have emitted at that edge of the call."""
    if place >= 0:
        rank, seq, t_ns, duration = (event.issued[place], _number(event.issued_seq, place, 1, event),
                                     event.issued_ns[place], None)
    else:
        at = ~place
        rank, seq, t_ns, duration = (event.ended[at], _number(event.ended_seq, at, 0, event), event.ended_ns[at],
                                     event.durations_ns[at])
    return Collective(run=event.run, rank=rank, seq=seq, t_ns=t_ns, phase=event.phase,
                      edge="begin" if place >= 0 else "end", op=event.op, group=event.group,
                      group_ranks=event.group_ranks, group_seq=event.group_seq, dtype=event.dtype, count=event.count,
                      bytes_in=event.bytes_in, bytes_out=event.bytes_out, algo_bytes=event.algo_bytes,
                      root=event.root, reduce_op=event.reduce_op, duration_ns=duration)


def per_rank_events(event: CallRanks) -> list[Phase | Collective]:
    """Every rank's events of ``event``: each issuing rank's Phase and Collective begins, then each
    completing rank's Collective and Phase ends."""
    events: list[Phase | Collective] = []
    for place in begin_places(event):
        events += [phase_at(event, place), collective_at(event, place)]
    for place in end_places(event):
        events += [collective_at(event, place), phase_at(event, place)]
    return events
