"""Running a plan on real ranks: each hop one ``batch_isend_irecv``, provenance travelling along.

Every message is two point-to-point sends with their own tags: the data, and an int64 mask per
element whose bit r says rank r's data is in it (collviz's observation, not counted as traffic).
A receiver adds (reduce) or copies the data and ORs or copies the mask, so after every hop each
rank's buffers say exactly which ranks' data they hold, as the ring scenario does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .plans import Hop

__all__ = ["RankBuffers", "run_hop", "COMBINE", "MAX_MASK_RANKS"]

COMBINE: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "sum": torch.add, "avg": torch.add, "max": torch.maximum, "min": torch.minimum, "product": torch.mul,
}
"""How a received value combines with the receiver's (avg sums; the caller divides at the end)."""

MAX_MASK_RANKS = 63
"""Ranks an int64 provenance mask can name."""


@dataclass
class RankBuffers:
    """One rank's named buffers for a plan and, for each, its provenance masks."""

    data: dict[str, torch.Tensor]
    masks: dict[str, torch.Tensor]

    @classmethod
    def of(cls, rank: int, buffers: dict[str, tuple[torch.Tensor, bool]]) -> RankBuffers:
        """Buffers from ``{name: (tensor, holds this rank's data)}``; a buffer holding none starts
        with empty masks (the parts a plan's setup copies in are marked by :meth:`mark`)."""
        masks = {name: torch.full((t.numel(),), 1 << rank if own else 0, dtype=torch.int64)
                 for name, (t, own) in buffers.items()}
        return cls({name: t.reshape(-1) for name, (t, _) in buffers.items()}, masks)

    def mark(self, name: str, start: int, length: int, rank: int) -> None:
        """Elements ``start:start+length`` of ``name`` now hold ``rank``'s data."""
        self.masks[name][start:start + length] = 1 << rank


def run_hop(hop: Hop, rank: int, buffers: RankBuffers, reduce_op: str,
            group: dist.ProcessGroup | None = None) -> list[tuple[int, str, int, int]]:
    """Exchange ``hop``'s messages that concern ``rank`` (all at once), then apply what arrived.

    Sends read the buffers as they were when the hop began. Returns what arrived:
    (source rank, buffer, start, length) per message, in the plan's order.
    """
    operations: list[dist.P2POp] = []
    arrivals = []
    for number, message in enumerate(hop.messages):
        tag = 2 * number
        if message.src == rank:
            data = buffers.data[message.buffer][message.start:message.start + message.length].clone()
            mask = buffers.masks[message.buffer][message.start:message.start + message.length].clone()
            operations += [dist.P2POp(dist.isend, data, message.dst, group, tag),
                           dist.P2POp(dist.isend, mask, message.dst, group, tag + 1)]
        if message.dst == rank:
            like = buffers.data[message.into]
            data = torch.empty(message.length, dtype=like.dtype, device=like.device)
            mask = torch.empty(message.length, dtype=torch.int64)
            operations += [dist.P2POp(dist.irecv, data, message.src, group, tag),
                           dist.P2POp(dist.irecv, mask, message.src, group, tag + 1)]
            arrivals.append((message, data, mask))
    if operations:
        for request in dist.batch_isend_irecv(operations):
            request.wait()
    combine = COMBINE[reduce_op]
    for message, data, mask in arrivals:
        target = buffers.data[message.into][message.at:message.at + message.length]
        masks = buffers.masks[message.into][message.at:message.at + message.length]
        if message.reduce:
            target.copy_(combine(target, data))
            masks |= mask
        else:
            target.copy_(data)
            masks.copy_(mask)
    return [(m.src, m.into, m.at, m.length) for m, _, _ in arrivals]
