"""Where a logical transfer came from: the range of the sender's input it carried.

A :class:`~collviz.runtime.wire.protocol.Transfer` names the receiver's range (``start``,
``length`` of its ``buffer``) and the sender, not the sender's range. For a logical transfer of a
call whose definition fixes which part of each input lands where (torch.distributed's own
contract for the op, with the even split its element counts say), that range is known from the
call and the receiver's range; it is given only then, and only when it lies inside the sender's
input. Everything else (a p2p hop, an uneven all-to-all, a step of several calls, an imported
run) keeps the receiver's range alone: the sender's is not recorded.
"""

from __future__ import annotations

from operator import attrgetter

from collviz.runtime.wire.protocol import Collective, Transfer

__all__ = ["source_range", "range_inputs", "step_call"]

_SAME_PLACE = frozenset({"all_reduce", "broadcast", "reduce"})
"""Ops whose output element i comes from element i of the inputs."""
_WHOLE_INPUT = frozenset({"all_gather", "all_gather_into_tensor", "gather"})
"""Ops whose output holds each sender's whole input at the sender's place in the group."""
_OWN_CHUNK = frozenset({"reduce_scatter", "reduce_scatter_tensor", "scatter"})
"""Ops whose output on the receiver is the receiver's chunk of each sender's input."""


_CALL_KEY = attrgetter("edge", "phase", "op", "group", "group_seq", "count", "root")
"""What makes two ranks' latest calls one call ended in one step."""


def step_call(calls: list[Collective | None], step: int) -> Collective | None:
    """The one call every rank's latest ended call in ``step`` is (same op, group and count): the
    call the step's logical transfers belong to; None when the ranks' latest calls differ or
    lie outside ``step`` (a step of several calls cannot say which moved what)."""
    ended = [c for c in calls if c is not None]
    keys = set(map(_CALL_KEY, ended))  # one pass in C: a 64-rank step's calls at every frame
    if len(keys) != 1:
        return None
    [(edge, phase, *_)] = keys
    return ended[0] if edge == "end" and phase == step else None


def range_inputs(call: Collective) -> tuple[str, tuple[int, ...], int, int | None]:
    """What :func:`source_range` reads of ``call``: two calls alike in it give each transfer the
    same range (a run's steps repeat their calls, each with its own number and time)."""
    return call.op, tuple(call.group_ranks), call.count, call.root


_last_places: tuple[list[int] | None, dict[int, int]] = (None, {})
"""The group ranks asked about last, held (so their identity is not reused), and each rank's place."""


def _places(group_ranks: list[int]) -> dict[int, int]:
    """rank → its (first) place in ``group_ranks``, made once for the list asked about last: a
    listing asks for each of a step's transfers with one call, and at 64 ranks finding two ranks
    in the list by scanning it was a fifth of the listing."""
    global _last_places
    held, places = _last_places
    if held is not group_ranks:
        places = dict(zip(reversed(group_ranks), range(len(group_ranks) - 1, -1, -1)))  # the first place kept
        _last_places = (group_ranks, places)
    return places


def source_range(transfer: Transfer, call: Collective) -> tuple[int, int] | None:
    """``(start, stop)`` of the sender's input that ``transfer`` carried, where ``call``'s op
    fixes it (see the module); None where it does not, or the range would leave the input."""
    places = _places(call.group_ranks)
    sender, receiver = places.get(transfer.src), places.get(transfer.dst)
    if transfer.kind != "logical" or sender is None or receiver is None:
        return None
    world, count = len(call.group_ranks), call.count
    start, length = transfer.start, transfer.length
    if call.op in _SAME_PLACE:
        if (call.op == "broadcast" and transfer.src != call.root) or (call.op == "reduce" and transfer.dst != call.root):
            return None
        begin = start
    elif call.op in _WHOLE_INPUT:
        begin = start - sender * count
    elif call.op in _OWN_CHUNK and count % world == 0:
        begin = receiver * (count // world) + start
        if start + length > count // world:
            return None
    else:
        return None
    return (begin, begin + length) if 0 <= begin and begin + length <= count else None
