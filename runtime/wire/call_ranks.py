"""A :class:`~.protocol.CallRanks` event read per rank: the ``Phase`` and ``Collective`` events
each of its ranks would have carried, made when asked (one rank's, or all of them), never held.

The event's ranks are columns; :func:`rank_phase` and :func:`rank_collective` give one rank's
begin or end, :func:`edges_of` which edges a rank has in the event (``begin``, ``end``, or both,
in that order), and :func:`per_rank_events` every rank's events in the order the feed emitted them
before 1.7 (per rank: Phase begin, Collective begin; then Collective end, Phase end), each numbered
in its rank's own sequence: what a trace holds instead of the event, and what a reader that wants
the events one rank at a time reads.
"""

from __future__ import annotations

from typing import Literal

from .protocol import CallRanks, Collective, Phase

__all__ = ["Edge", "edges_of", "per_rank_events", "rank_collective", "rank_phase"]

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


def _number(numbers: list[int], at: int, after: int, event: CallRanks) -> int:
    """The sequence number of a rank's event: ``after`` past the rank's first at this edge
    (``numbers[at]``), or the event's own where it carries none (a 1.7 trace written before them)."""
    return numbers[at] + after if numbers else event.seq


def rank_phase(event: CallRanks, rank: int, edge: Edge) -> Phase:
    """The ``Phase`` event ``rank`` would have emitted at ``edge`` of the call (the narration on
    the begin only, as a rank's own Phase events carry it)."""
    return _phase(event, (event.issued if edge == "begin" else event.ended).index(rank), edge)


def rank_collective(event: CallRanks, rank: int, edge: Edge) -> Collective:
    """The ``Collective`` event ``rank`` would have emitted at ``edge`` of the call."""
    return _collective(event, (event.issued if edge == "begin" else event.ended).index(rank), edge)


def per_rank_events(event: CallRanks) -> list[Phase | Collective]:
    """Every rank's events of ``event``: each issuing rank's Phase and Collective begins, then each
    completing rank's Collective and Phase ends."""
    events: list[Phase | Collective] = []
    for at in range(len(event.issued)):
        events += [_phase(event, at, "begin"), _collective(event, at, "begin")]
    for at in range(len(event.ended)):
        events += [_collective(event, at, "end"), _phase(event, at, "end")]
    return events


def _phase(event: CallRanks, at: int, edge: Edge) -> Phase:
    """The ``Phase`` event at ``edge`` of the rank in place ``at`` of that edge's column."""
    if edge == "begin":
        return Phase(run=event.run, rank=event.issued[at], seq=_number(event.issued_seq, at, 0, event),
                     t_ns=event.issued_ns[at], index=event.phase, name=event.name, edge="begin",
                     narration=event.narration)
    return Phase(run=event.run, rank=event.ended[at], seq=_number(event.ended_seq, at, 1, event),
                 t_ns=event.ended_ns[at], index=event.phase, name=event.name, edge="end")


def _collective(event: CallRanks, at: int, edge: Edge) -> Collective:
    """The ``Collective`` event at ``edge`` of the rank in place ``at`` of that edge's column."""
    if edge == "begin":
        rank, seq, t_ns, duration = (event.issued[at], _number(event.issued_seq, at, 1, event),
                                     event.issued_ns[at], None)
    else:
        rank, seq, t_ns, duration = (event.ended[at], _number(event.ended_seq, at, 0, event), event.ended_ns[at],
                                     event.durations_ns[at])
    return Collective(run=event.run, rank=rank, seq=seq, t_ns=t_ns, phase=event.phase, edge=edge, op=event.op,
                      group=event.group, group_ranks=event.group_ranks, group_seq=event.group_seq, dtype=event.dtype,
                      count=event.count, bytes_in=event.bytes_in, bytes_out=event.bytes_out,
                      algo_bytes=event.algo_bytes, root=event.root, reduce_op=event.reduce_op, duration_ns=duration)
