"""``ring-all-reduce``: an all-reduce done by hand, one real send/recv hop at a time.

Each rank's buffer is cut into n chunks. In the reduce-scatter half (hops 1…n−1) rank r sends
chunk (r − s) mod n to rank r+1 and adds the chunk (r − s − 1) mod n arriving from rank r−1; after
it, rank r holds the complete sum of chunk (r + 1) mod n. In the all-gather half (hops n…2(n−1))
the complete chunks travel round the ring and overwrite. With every chunk travels its provenance —
the set of ranks whose data it holds — as a bitmask sent in the same hop, so what each phase shows
is what arrived. At the end the result is compared with ``dist.all_reduce`` on the same inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from ...context import RankContext
from ...errors import UsageError
from ...observation.metrics import human_bytes
from ...scenario_files.schema import Scenario
from ...wire.protocol import ProvenanceRun, Transfer
from ..devices import rank_tensor
from ..program import RunOptions
from .common import TrainingProgram, check_close, refuse_options
from .observer import CollectiveObserver

__all__ = ["RingProgram", "build", "ring_input"]

_ITEMSIZE = 4  # float32


def ring_input(rank: int, count: int) -> torch.Tensor:
    """Rank ``rank``'s input: element i is rank·count + i + 1 (float32)."""
    return torch.arange(count, dtype=torch.float32) + rank * count + 1


@dataclass(frozen=True)
class RingProgram(TrainingProgram):
    """A ring all-reduce of ``count`` float32 elements per rank, hop by hop."""

    count: int

    @property
    def chunk(self) -> int:
        """Elements per chunk (count / world size)."""
        return self.count // self.world_size

    @property
    def hops(self) -> int:
        """2(n − 1): n − 1 reduce-scatter hops, then n − 1 all-gather hops."""
        return 2 * (self.world_size - 1)

    @property
    def phase_count(self) -> int:
        """setup, every hop, compare."""
        return 2 + self.hops

    def narration_values(self, world_size: int) -> dict[str, object]:
        """Values for the narration placeholders."""
        return {"world_size": world_size, "count": self.count, "chunk": self.chunk, "hops": self.hops,
                "bytes": human_bytes(self.count * _ITEMSIZE), "chunk_bytes": human_bytes(self.chunk * _ITEMSIZE)}

    def run_options(self) -> dict[str, str | int | float | bool]:
        """count, chunk and hops, as recorded in RunStart."""
        return {"count": self.count, "chunk": self.chunk, "hops": self.hops, "dtype": "float32"}

    def run(self, ctx: RankContext) -> None:
        """Run this rank's part: setup, 2(n−1) hops, compare."""
        run_ring(ctx, self)


def build(scenario: Scenario, world_size: int, options: RunOptions) -> RingProgram:
    """The ring program for ``world_size`` ranks; ``--size`` sets the bytes per rank.

    Without ``--size`` the scenario's ``count`` is rounded up to a multiple of ``world_size`` (the
    ring cuts each buffer into one chunk per rank), so any rank count runs as it is asked; a
    ``--size`` that cannot be cut evenly is refused, since the user chose it.
    """
    refuse_options(options, scenario.name, allowed=("size_bytes",))
    size = getattr(options, "size_bytes")
    if size is not None and (size <= 0 or size % _ITEMSIZE):
        raise UsageError(f"--size {size} B: must be a positive multiple of 4 B (float32 elements)")
    if size is None:
        count = -(-int(scenario.settings["count"]) // world_size) * world_size
    else:
        count = size // _ITEMSIZE
    if count % world_size:
        raise UsageError(f"the ring cuts each buffer into {world_size} chunks, but it has {count} elements; "
                         f"use a --size that is a multiple of {world_size} × 4 B")
    return RingProgram(world_size=world_size, settings=scenario.settings, count=count,
                       source=f"generated: element i of rank r is r·{count} + i + 1 (float32)")


def _provenance(masks: list[int], chunk: int) -> list[ProvenanceRun]:
    """Runs of the buffer from the per-chunk rank bitmasks (neighbouring equal chunks merge)."""
    runs: list[ProvenanceRun] = []
    for index, mask in enumerate(masks):
        ranks = [r for r in range(mask.bit_length()) if mask >> r & 1]
        if runs and runs[-1].ranks == ranks:
            runs[-1].length += chunk
        else:
            runs.append(ProvenanceRun(start=index * chunk, length=chunk, ranks=ranks))
    return runs


_MASK_BITS = 64
"""A bitmask travels as one int64: rank 63's bit is its sign bit (64 ranks, the most on one machine)."""


def _as_int64(mask: int) -> int:
    """``mask`` (ranks 0–63 as bits) as the signed 64-bit number with the same bits."""
    return mask - (1 << _MASK_BITS) if mask >> (_MASK_BITS - 1) else mask


def _from_int64(value: int) -> int:
    """The bitmask a signed 64-bit number carries (:func:`_as_int64` undone)."""
    return value & ((1 << _MASK_BITS) - 1)


def _hop(x_chunks: list[torch.Tensor], masks: list[int], send: int, right: int, left: int) -> tuple[torch.Tensor, int]:
    """One real hop: send chunk ``send`` and its bitmask right, receive a chunk and bitmask from left."""
    out_data = x_chunks[send].clone()
    out_mask = rank_tensor(out_data.device, torch.int64, values=[_as_int64(masks[send])])
    in_data, in_mask = torch.empty_like(out_data), torch.empty_like(out_mask)
    requests = dist.batch_isend_irecv([
        dist.P2POp(dist.isend, out_data, right), dist.P2POp(dist.irecv, in_data, left),
        dist.P2POp(dist.isend, out_mask, right), dist.P2POp(dist.irecv, in_mask, left),
    ])
    for request in requests:
        request.wait()
    return in_data, _from_int64(int(in_mask.item()))


def run_ring(ctx: RankContext, program: RingProgram) -> None:
    """This rank's part of the ring all-reduce: every phase, every event."""
    rank, n, chunk = ctx.rank, ctx.world_size, program.chunk
    right, left = (rank + 1) % n, (rank - 1) % n
    with ctx.phase("setup", "setup", gated=False):
        with ctx.tracker.category("inputs"):
            x = ring_input(rank, program.count).to(ctx.device)
            original = x.clone()
        masks = [1 << rank] * n
        ctx.buffer("x", "inout", "before", x, _provenance(masks, chunk))
        ctx.memory("inputs allocated")
    chunks = list(x.split(chunk)) if chunk else [x] * n
    for hop in range(program.hops):
        reducing = hop < n - 1
        step = hop if reducing else hop - (n - 1)
        send = (rank - step) % n if reducing else (rank + 1 - step) % n
        receive = (rank - step - 1) % n if reducing else (rank - step) % n
        half = "reduce-scatter" if reducing else "all-gather"
        name = f"hop {hop + 1}/{program.hops}: {half} step {step + 1}"
        with ctx.phase("reduce_scatter_hop" if reducing else "all_gather_hop", name):
            with ctx.tracker.category("communication"):
                data, mask = _hop(chunks, masks, send, right, left)
            if reducing:
                chunks[receive].add_(data)
                masks[receive] |= mask
            else:
                chunks[receive].copy_(data)
                masks[receive] = mask
            ctx.emitter.emit(Transfer, phase=ctx.phase_index, src=left, dst=rank, bytes=chunk * _ITEMSIZE,
                             buffer="x", start=receive * chunk, length=chunk, kind="p2p", hop=hop + 1)
            ctx.buffer("x", "inout", "after", x, _provenance(masks, chunk))
            del data
            ctx.memory(f"after hop {hop + 1}")
    with ctx.phase("compare", "compare with dist.all_reduce"):
        with CollectiveObserver(ctx) as observer, ctx.tracker.category("communication"):
            observer.name_next("all_reduce(x)")
            dist.all_reduce(original)
        ctx.buffer("all_reduce(x)", "output", "result", original, observer.last_provenance)
        check_close(ctx, "matches all_reduce", x, original, "dist.all_reduce on the same inputs")
        ctx.memory("compared")
