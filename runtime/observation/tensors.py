"""Turning tensors into what a Buffer event carries: values or a summary, and provenance.

Provenance is *observed*, not inferred: right after the timed data collective the runtime runs the
same collective on the same process group, with the same shapes and element size, over "tag"
tensors in which rank r's elements hold 2**r, always summed. Each element of the result is then the
bitmask of the ranks whose data reached it through the backend — including the partial sums gloo
leaves on a reduce's non-destination ranks. Tags use an exact integer (or float16) type of the data's
element size so the backend segments them as it segmented the data.

A tag type holds one rank bit per bit of its exact values: 8 for uint8, 11 for float16 (its exact
integers), 32 for int32 and 64 for int64. The integer types use their sign bit too: every element
sums each rank's tag at most once, so every partial sum, in any order, is a sum of distinct powers
of two, which never carries; the top bit then adds in two's complement as ``−2**(w−1)`` and no
partial sum leaves the type's range (it never overflows, on any backend). Larger worlds take
several passes, each tagging one slice of the ranks (:func:`tag_passes`); the passes are all
started before any is read, so a backend may run them back to back, and their provenances are
merged (:func:`observe_provenance`).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..wire.protocol import BufferSummary, ProvenanceRun

__all__ = [
    "VALUE_LIMIT",
    "CHECKSUM_CHUNK_BYTES",
    "MAX_PROVENANCE_RUNS",
    "dtype_name",
    "tensor_contents",
    "provenance_from_tags",
    "TagPass",
    "PendingTags",
    "tag_passes",
    "observe_provenance",
    "merge_provenance",
    "uniform_provenance",
]

VALUE_LIMIT = 1024
"""Tensors with at most this many elements ship their values; larger ones a summary."""

PICTURE_POINTS = 64
"""Points in the down-sampled picture of a large tensor."""

MAX_PROVENANCE_RUNS = 4096
"""More runs than this and provenance is reported as not observed (it would not be readable)."""

# element size → (tag dtype, how many ranks its exact bit patterns can hold; see the module's docstring)
_TAG_TYPES = {
    1: (torch.uint8, 8),
    2: (torch.float16, 11),
    4: (torch.int32, 32),
    8: (torch.int64, 64),
}


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` → ``"float32"``."""
    return str(dtype).removeprefix("torch.")


def tensor_contents(tensor: torch.Tensor) -> dict:
    """Keyword fields of a Buffer event describing ``tensor``: shape, dtype, values or summary.

    A large tensor is summarised where it lives: min, max and the picture's means are reduced on
    its device (a CUDA tensor is never copied whole to the host, nor widened to float64 whole),
    and only those numbers come back; the checksum reads its bytes through a host buffer of
    :data:`CHECKSUM_CHUNK_BYTES` at a time.
    """
    flat = tensor.detach().reshape(-1).contiguous()
    fields: dict = {"shape": list(tensor.shape), "dtype": dtype_name(tensor.dtype)}
    if flat.numel() <= VALUE_LIMIT:
        fields["values"] = flat.cpu().tolist()
        return fields
    numbers = flat.view(torch.uint8) if flat.dtype == torch.bool else flat
    parts = torch.tensor_split(numbers, PICTURE_POINTS)
    sums = torch.stack([part.sum(dtype=torch.float64) for part in parts])
    sizes = torch.tensor([part.numel() for part in parts], dtype=torch.float64, device=sums.device)
    extremes = torch.stack([numbers.min(), numbers.max()]).double()
    mean = sums.sum().reshape(1) / numbers.numel()
    shown = torch.cat([sums / sizes, extremes, mean]).tolist()  # the one copy to the host
    fields["summary"] = BufferSummary(min=shown[-3], max=shown[-2], mean=shown[-1], crc32=f"{_crc32(flat):08x}",
                                      picture=shown[:PICTURE_POINTS])
    return fields


CHECKSUM_CHUNK_BYTES = 64 * 2**20
"""How much of a tensor the checksum copies to the host at a time."""


def _crc32(flat: torch.Tensor) -> int:
    """CRC-32 of the bytes of contiguous ``flat``, read :data:`CHECKSUM_CHUNK_BYTES` at a time
    (each chunk a copy: ``.numpy()`` would pin the observed storage's size)."""
    raw = flat.view(torch.uint8)
    crc = 0
    for start in range(0, raw.numel(), CHECKSUM_CHUNK_BYTES):
        part = raw[start:start + CHECKSUM_CHUNK_BYTES]
        crc = zlib.crc32((part.cpu() if part.device.type != "cpu" else part.clone()).numpy().data, crc)
    return crc


@dataclass(frozen=True)
class TagPass:
    """One pass of tag observation: ranks ``first`` to ``stop − 1`` tag their data with bit
    ``rank − first`` of ``tag_type``; every other rank's tags are 0."""

    tag_type: torch.dtype
    first: int
    stop: int

    def tags(self, like: torch.Tensor, rank: int, placeholder: bool = False) -> torch.Tensor:
        """This rank's tags for this pass, shaped like ``like`` (0 when ``placeholder`` or when
        ``rank`` is outside the pass)."""
        inside = self.first <= rank < self.stop and not placeholder
        return torch.full_like(like, _bit_value(self.tag_type, rank - self.first) if inside else 0,
                               dtype=self.tag_type)


def _bit_value(tag_type: torch.dtype, bit: int) -> int:
    """The value of ``tag_type`` whose bit pattern is bit ``bit`` alone: ``2**bit``, or for a signed
    integer type's sign bit, its two's-complement value ``−2**bit``."""
    signed_top = not tag_type.is_floating_point and tag_type.is_signed and bit == 8 * tag_type.itemsize - 1
    return -(2**bit) if signed_top else 2**bit


@dataclass(frozen=True)
class PendingTags:
    """A pass whose collective was started asynchronously (``async_op=True``): the tags it
    received, ``tags``, are complete once its ``work`` has been waited on (None: nothing to wait
    for); ``tags`` is None when this rank receives nothing."""

    tags: torch.Tensor | None
    work: torch.distributed.Work | None

    def wait(self) -> torch.Tensor | None:
        """Wait for the collective, then the tags it wrote."""
        if self.work is not None:
            self.work.wait()
        return self.tags


def tag_passes(dtype: torch.dtype, world_size: int) -> list[TagPass]:
    """The passes that observe provenance for data of ``dtype`` on ``world_size`` ranks (empty when
    no tag type matches its element size)."""
    itemsize = dtype.itemsize
    tag, capacity = _TAG_TYPES.get(itemsize, (None, 0))
    if tag is None:
        return []
    return [TagPass(tag, first, min(first + capacity, world_size)) for first in range(0, world_size, capacity)]


def observe_provenance(dtype: torch.dtype, world_size: int,
                       received: Callable[[TagPass], torch.Tensor | PendingTags | None]) -> list[ProvenanceRun] | None:
    """Provenance of a collective's result: ``received(tag_pass)`` runs the collective over that
    pass's tags and returns the tags this rank received, or starts it and returns them pending;
    every pass is started before any is waited on, and the passes' provenances are merged.
    None when it cannot be observed (no tag type, nothing received, too fragmented)."""
    started = [(tag_pass, received(tag_pass)) for tag_pass in tag_passes(dtype, world_size)]
    finished = [(tag_pass, tags.wait() if isinstance(tags, PendingTags) else tags) for tag_pass, tags in started]
    parts = []
    for tag_pass, tags in finished:
        runs = None if tags is None else provenance_from_tags(tags, first=tag_pass.first)
        if runs is None:
            return None
        parts.append(runs)
    return merge_provenance(parts) if parts else None


def merge_provenance(parts: list[list[ProvenanceRun]]) -> list[ProvenanceRun] | None:
    """One provenance from several covering the same elements: each element's ranks are the union
    of its ranks in every part (None if the result is too fragmented to show)."""
    if len(parts) == 1:
        return parts[0]
    starts = sorted({run.start for part in parts for run in part})
    end = max((run.start + run.length for part in parts for run in part), default=0)
    positions = [0] * len(parts)
    merged: list[ProvenanceRun] = []
    for index, start in enumerate(starts):
        stop = starts[index + 1] if index + 1 < len(starts) else end
        ranks: list[int] = []
        for which, part in enumerate(parts):
            while positions[which] < len(part) and part[positions[which]].start + part[positions[which]].length <= start:
                positions[which] += 1
            if positions[which] < len(part):
                ranks.extend(part[positions[which]].ranks)
        ranks = sorted(set(ranks))
        if merged and merged[-1].ranks == ranks:
            merged[-1] = ProvenanceRun(merged[-1].start, merged[-1].length + stop - start, ranks)
        else:
            merged.append(ProvenanceRun(start, stop - start, ranks))
        if len(merged) > MAX_PROVENANCE_RUNS:
            return None
    return merged


def provenance_from_tags(tags: torch.Tensor, first: int = 0) -> list[ProvenanceRun] | None:
    """Run-length encode a tag tensor into provenance runs, bit b of each element's bit pattern
    naming rank ``first + b`` (None if too fragmented to show)."""
    flat = tags.detach().reshape(-1).cpu().to(torch.int64)
    if flat.numel() == 0:
        return []
    changes = (torch.nonzero(flat[1:] != flat[:-1]).reshape(-1) + 1).tolist()
    if len(changes) + 1 > MAX_PROVENANCE_RUNS:
        return None
    starts = [0, *changes]
    ends = [*changes, flat.numel()]
    width = 8 * tags.element_size()
    masks = [mask % (1 << width) for mask in flat[starts].tolist()]  # a set sign bit is rank bit width − 1
    return [
        ProvenanceRun(start=s, length=e - s, ranks=[first + r for r in range(mask.bit_length()) if mask >> r & 1])
        for s, e, mask in zip(starts, ends, masks)
    ]


def uniform_provenance(numel: int, ranks: list[int]) -> list[ProvenanceRun]:
    """Provenance of a buffer whose every element holds data of ``ranks`` (e.g. a rank's own input)."""
    return [ProvenanceRun(start=0, length=numel, ranks=list(ranks))] if numel else []
