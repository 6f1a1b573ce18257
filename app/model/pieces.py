"""A pipelined step piece by piece: the view as of the end of one of its pipeline spans.

A pipelined step (``pp``) runs behind one gate, and the viewer steps through its recorded spans
(each one stage's forward or backward of one microbatch) in the order they ended. At piece k the
screen must show the step as it was then, not as it ended: each rank's buffers, frees, call and
status, the step's transfers and checks, as of the k-th span's end. The ranks' events reach the log
in any interleaving (a trace holds each rank's in a block), so "then" is read from the events' own
clock (``t_ns``, one host's monotonic clock: the same clock that orders the spans), never from their
place in the log.
"""

from __future__ import annotations

import heapq
from dataclasses import replace

from collviz.runtime.wire.protocol import Buffer, Phase, Transfer

from .log import EventLog
from .view import MAX_TRANSFERS, RankView, ViewState

__all__ = ["first_pieces"]


def first_pieces(log: EventLog, view: ViewState, count: int) -> ViewState:
    """``view`` as of the end of its ``count``-th pipeline span (spans in the order they ended):
    those spans, the rest counted in ``spans_hidden``; where the spans are the step shown's, its
    ranks, transfers and checks with every event stamped after that span left out."""
    ordered = sorted(view.spans, key=lambda span: span.t_ns)
    shown = ordered[:count]
    pieces = replace(view, spans=tuple(shown), spans_hidden=max(0, len(ordered) - count))
    if not shown or len(shown) == len(ordered) or shown[0].phase != view.step:
        return pieces
    until = shown[-1].t_ns
    transfers, moved = _transfers_then(log, view, until)
    return replace(pieces, ranks=tuple(_rank_then(log, rank, until) for rank in view.ranks),
                   checks=tuple(check for check in view.checks if check.t_ns <= until),
                   transfers=transfers, transfer_count=moved, transfers_sorted_among=moved)


def _rank_then(log: EventLog, rank: RankView, until: int) -> RankView:
    """``rank`` in the step shown as of ``until``: a buffer reported later shows its value before
    (where that was reported by then) or not at all; a later free, call, end of the step or wait
    at the next gate is not yet there."""
    step = rank.step
    before = {buffer.name: buffer for buffer in rank.previous}
    buffers: list[Buffer] = []
    changed_by_then: set[str] = set()  # this step's buffers reported by then: their value before stays
    for buffer in rank.buffers:
        if buffer.phase != step or buffer.t_ns <= until:
            buffers.append(buffer)
            changed_by_then.update([buffer.name] if buffer.phase == step else [])
        elif buffer.name in before and before[buffer.name].t_ns <= until:
            buffers.append(before[buffer.name])
    collective = rank.collective if rank.collective is None or rank.collective.t_ns <= until else None
    busy = rank.state in ("done", "waiting") and _step_ended_after(log, rank.rank, step, until)
    return rank._replace(buffers=tuple(buffers),
                         previous=tuple(buffer for buffer in rank.previous if buffer.name in changed_by_then),
                         freed=tuple(freed for freed in rank.freed if freed.phase != step or freed.t_ns <= until),
                         collective=collective, state="running" if busy else rank.state,
                         status="running" if busy else rank.status, phase=step if busy else rank.phase)


def _step_ended_after(log: EventLog, rank: int, step: int, until: int) -> bool:
    """Whether ``rank`` ended phase ``step`` after ``until`` (or has not ended it)."""
    index = log.ranks.get(rank)
    if index is None:
        return False
    ends = [event for event in index.phases.events if isinstance(event, Phase) and event.index == step
            and event.edge == "end"]
    return not ends or ends[0].t_ns > until


def _transfers_then(log: EventLog, view: ViewState, until: int) -> tuple[tuple[Transfer, ...], int]:
    """The step's transfers at the view's cursor stamped by ``until``: the first
    :data:`~.view.MAX_TRANSFERS` in the view's order (destination, hop, source, start), and how
    many there are."""
    phase = log.phases[view.step]
    arrived = phase.transfers.events[: phase.transfers.count_upto(view.cursor)]
    then: list[Transfer] = [transfer for transfer in arrived if transfer.t_ns <= until]
    first = heapq.nsmallest(MAX_TRANSFERS, then, key=lambda t: (t.dst, t.hop, t.src, t.start))
    return tuple(first), len(then)
