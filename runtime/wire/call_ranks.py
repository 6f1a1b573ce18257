"""A :class:`~.protocol.CallRanks` event read per rank: the ``Phase`` and ``Collective`` events
each of its ranks would have carried, made when asked (one rank's, or all of them), never held.

The event's ranks are columns; :func:`rank_phase` and :func:`rank_collective` give one rank's
begin or end, :func:`edges_of` which edges a rank has in the event (``begin``, ``end``, or both,
in that order), and :func:`per_rank_events` every rank's events in the order the feed emitted them
before 1.7 (per rank: Phase begin, Collective begin; then Collective end, Phase end): what a reader
that wants the events one rank at a time reads instead of the event.
"""

from __future__ import annotations

from typing import Literal

from .protocol import CallRanks, Collective, Phase

__all__ = ["Edge", "edges_of", "ended_at", "per_rank_events", "rank_collective", "rank_phase"]

Edge = Literal["begin", "end"]
"""A call's edge on one rank: issued (``begin``) or completed (``end``)."""


def edges_of(event: CallRanks, rank: int) -> list[Edge]:
    """The edges ``rank`` has in ``event``, in order (begin before end)."""
    edges: list[Edge] = []
    if rank in event.issued:
        edges.append("begin")
    if rank in event.ended:
        edges.append("end")
    return edges


def ended_at(event: CallRanks, rank: int) -> tuple[int, int | None]:
    """When ``rank`` completed the call (the events' clock) and its duration (None: not measured)."""
    at = event.ended.index(rank)
    return event.ended_ns[at], event.durations_ns[at]


def rank_phase(event: CallRanks, rank: int, edge: Edge) -> Phase:
    """The ``Phase`` event ``rank`` would have emitted at ``edge`` of the call (the narration on
    the begin only, as a rank's own Phase events carry it)."""
    if edge == "begin":
        return Phase(run=event.run, rank=rank, seq=event.seq, t_ns=event.issued_ns[event.issued.index(rank)],
                     index=event.phase, name=event.name, edge="begin", narration=event.narration)
    return Phase(run=event.run, rank=rank, seq=event.seq, t_ns=ended_at(event, rank)[0], index=event.phase,
                 name=event.name, edge="end")


def rank_collective(event: CallRanks, rank: int, edge: Edge) -> Collective:
    """The ``Collective`` event ``rank`` would have emitted at ``edge`` of the call."""
    if edge == "begin":
        at, duration = event.issued_ns[event.issued.index(rank)], None
    else:
        at, duration = ended_at(event, rank)
    return Collective(run=event.run, rank=rank, seq=event.seq, t_ns=at, phase=event.phase, edge=edge, op=event.op,
                      group=event.group, group_ranks=event.group_ranks, group_seq=event.group_seq, dtype=event.dtype,
                      count=event.count, bytes_in=event.bytes_in, bytes_out=event.bytes_out,
                      algo_bytes=event.algo_bytes, root=event.root, reduce_op=event.reduce_op, duration_ns=duration)


def per_rank_events(event: CallRanks) -> list[Phase | Collective]:
    """Every rank's events of ``event``: each issuing rank's Phase and Collective begins, then each
    completing rank's Collective and Phase ends."""
    events: list[Phase | Collective] = []
    for rank in event.issued:
        events += [rank_phase(event, rank, "begin"), rank_collective(event, rank, "begin")]
    for rank in event.ended:
        events += [rank_collective(event, rank, "end"), rank_phase(event, rank, "end")]
    return events
