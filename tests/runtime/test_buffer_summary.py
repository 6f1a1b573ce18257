"""A large buffer's summary: its numbers, computed here independently, and the cost of making it —
no temporary the size of the tensor (at --size 1GiB on CUDA the old summary copied the whole
tensor to the host and then widened it to float64: about 3 GiB of host memory per rank)."""

from __future__ import annotations

import zlib
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from collviz.runtime.observation import tensors
from collviz.runtime.observation.tensors import PICTURE_POINTS, tensor_contents


class LargestTemporary(TorchDispatchMode):
    """Records the bytes of the largest storage any op makes while entered (views share their
    input's storage and are not counted)."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        given = {t.untyped_storage().data_ptr() for t in args if isinstance(t, torch.Tensor)}
        for made in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(made, torch.Tensor) and made.untyped_storage().data_ptr() not in given:
                self.largest = max(self.largest, made.untyped_storage().nbytes())
        return out


@pytest.mark.parametrize("data", [
    torch.arange(100_000, dtype=torch.float32).sin(),
    torch.arange(5_000, dtype=torch.int64) % 97 - 40,
    torch.arange(3_000) % 3 == 0,
], ids=["float32", "int64", "bool"])
def test_the_summary_says_min_max_mean_picture_and_checksum(data):
    summary = tensor_contents(data.reshape(-1, 10))["summary"]
    as_list = [float(x) for x in data.tolist()]
    assert (summary.min, summary.max) == (min(as_list), max(as_list))
    assert summary.mean == pytest.approx(sum(as_list) / len(as_list), rel=1e-12, abs=1e-12)
    size, extra = divmod(len(as_list), PICTURE_POINTS)
    bounds = [i * size + min(i, extra) for i in range(PICTURE_POINTS + 1)]
    expected = [sum(as_list[a:b]) / (b - a) for a, b in zip(bounds, bounds[1:])]
    assert summary.picture == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert summary.crc32 == f"{zlib.crc32(data.numpy().tobytes()):08x}"


def test_no_temporary_is_anywhere_near_the_tensors_size(monkeypatch):
    monkeypatch.setattr(tensors, "CHECKSUM_CHUNK_BYTES", 4096, raising=False)
    data = torch.arange(100_000, dtype=torch.float32)  # 400 kB
    with LargestTemporary() as watch:
        summary = tensor_contents(data)["summary"]
    assert summary.crc32 == f"{zlib.crc32(data.numpy().tobytes()):08x}"
    assert watch.largest <= data.nbytes // 8, f"a {watch.largest} B temporary for a {data.nbytes} B tensor"
