"""Turning tensors into what a Buffer event carries: values or a summary, and provenance.

Provenance is *observed*, not inferred: right after the timed data collective the runtime runs the
same collective on the same process group, with the same shapes and element size, over "tag"
tensors in which rank r's elements hold 2**r, always summed. Each element of the result is then the
bitmask of the ranks whose data reached it through the backend — including the partial sums gloo
leaves on a reduce's non-destination ranks. Tags use an exact integer (or float16) type of the data's
element size so the backend segments them as it segmented the data.
"""

from __future__ import annotations

import zlib

import torch

from ..wire.protocol import BufferSummary, ProvenanceRun

__all__ = [
    "VALUE_LIMIT",
    "MAX_PROVENANCE_RUNS",
    "dtype_name",
    "tensor_contents",
    "tag_dtype",
    "make_tags",
    "provenance_from_tags",
    "uniform_provenance",
]

VALUE_LIMIT = 1024
"""Tensors with at most this many elements ship their values; larger ones a summary."""

PICTURE_POINTS = 64
"""Points in the down-sampled picture of a large tensor."""

MAX_PROVENANCE_RUNS = 4096
"""More runs than this and provenance is reported as not observed (it would not be readable)."""

# element size → (tag dtype, how many ranks its exact bit patterns can hold)
_TAG_TYPES = {
    1: (torch.uint8, 8),
    2: (torch.float16, 11),
    4: (torch.int32, 31),
    8: (torch.int64, 63),
}


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` → ``"float32"``."""
    return str(dtype).removeprefix("torch.")


def tensor_contents(tensor: torch.Tensor) -> dict:
    """Keyword fields of a Buffer event describing ``tensor``: shape, dtype, values or summary."""
    flat = tensor.detach().reshape(-1).cpu().contiguous()
    fields: dict = {"shape": list(tensor.shape), "dtype": dtype_name(tensor.dtype)}
    if flat.numel() <= VALUE_LIMIT:
        fields["values"] = flat.tolist()
    else:
        as_double = flat.double()
        picture = [chunk.mean().item() for chunk in torch.tensor_split(as_double, PICTURE_POINTS)]
        fields["summary"] = BufferSummary(
            min=as_double.min().item(),
            max=as_double.max().item(),
            mean=as_double.mean().item(),
            # .numpy() pins a storage's size; hash a copy so the observed tensor stays resizable
            crc32=f"{zlib.crc32(flat.view(torch.uint8).clone().numpy()):08x}",
            picture=picture,
        )
    return fields


def tag_dtype(dtype: torch.dtype, world_size: int) -> torch.dtype | None:
    """The tag type for data of ``dtype`` on ``world_size`` ranks, or None if none is exact."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    tag, capacity = _TAG_TYPES.get(itemsize, (None, 0))
    return tag if world_size <= capacity else None


def make_tags(like: torch.Tensor, rank: int, tag_type: torch.dtype, placeholder: bool = False) -> torch.Tensor:
    """A tag tensor shaped like ``like``: every element 2**rank, or 0 for a buffer holding no data."""
    return torch.full_like(like, 0 if placeholder else 2**rank, dtype=tag_type)


def provenance_from_tags(tags: torch.Tensor) -> list[ProvenanceRun] | None:
    """Run-length encode a tag tensor into provenance runs (None if too fragmented to show)."""
    flat = tags.detach().reshape(-1).cpu().to(torch.int64)
    if flat.numel() == 0:
        return []
    changes = (torch.nonzero(flat[1:] != flat[:-1]).reshape(-1) + 1).tolist()
    if len(changes) + 1 > MAX_PROVENANCE_RUNS:
        return None
    starts = [0, *changes]
    ends = [*changes, flat.numel()]
    masks = flat[starts].tolist()
    return [
        ProvenanceRun(start=s, length=e - s, ranks=[r for r in range(mask.bit_length()) if mask >> r & 1])
        for s, e, mask in zip(starts, ends, masks)
    ]


def uniform_provenance(numel: int, ranks: list[int]) -> list[ProvenanceRun]:
    """Provenance of a buffer whose every element holds data of ``ranks`` (e.g. a rank's own input)."""
    return [ProvenanceRun(start=0, length=numel, ranks=list(ranks))] if numel else []
