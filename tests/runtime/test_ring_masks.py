"""The ring all-reduce's provenance bitmask travels as one int64: at 64 ranks (the most on one
machine) rank 63's bit is the sign bit, which ``torch.tensor([1 << 63], dtype=int64)`` refuses
("Overflow when unpacking long long": ``collviz ring-all-reduce --gpus 64`` failed at hop 1)."""

from __future__ import annotations

import torch

from collviz.runtime.programs.training.ring import _as_int64, _from_int64


def test_every_64_rank_mask_crosses_as_an_int64_and_comes_back_whole():
    every_rank = (1 << 64) - 1  # ranks 0–63
    for mask in (1, 1 << 62, 1 << 63, (1 << 63) | 1, every_rank):
        sent = torch.tensor([_as_int64(mask)], dtype=torch.int64)
        assert _from_int64(int(sent.item())) == mask
    assert _as_int64(1 << 63) == -(2 ** 63) and _as_int64(every_rank) == -1  # two's complement, by hand
