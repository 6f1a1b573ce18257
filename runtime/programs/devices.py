"""Where a scenario's tensors are made: every tensor a rank creates to hand to a collective (a
buffer, a provenance mask, a tag, a count) is made by :func:`rank_tensor` on the rank's planned
device, ``RankContext.device``, never on torch's default device.

NCCL takes CUDA tensors only: a tensor left on the CPU (a scatter's output on a rank with no
input, a hop's provenance mask) fails on the first GPU run, yet on gloo every tensor is on the
CPU anyway, so nothing shows the mistake there. Making the device an argument without a
default is the rule; ``tests/support/device_check.py`` checks it on gloo by failing any collective handed
a tensor that a factory call made without naming a device.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["rank_tensor"]


def rank_tensor(device: torch.device, dtype: torch.dtype, *, shape: Sequence[int] | int | None = None,
                values: object = None, fill: int | float = 0) -> torch.Tensor:
    """A new tensor on ``device``: ``values`` (nested lists or tuples of numbers) when given,
    else ``shape`` filled with ``fill`` (a ValueError when both or neither are given)."""
    if values is not None and shape is None:
        return torch.tensor(values, dtype=dtype, device=device)
    if shape is None or values is not None:
        raise ValueError("rank_tensor takes either values or a shape")
    return torch.full((shape,) if isinstance(shape, int) else tuple(shape), fill, dtype=dtype, device=device)
