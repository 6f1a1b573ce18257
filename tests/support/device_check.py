"""A check that every tensor a rank hands to a collective is on the rank's planned device, run on
gloo, where every tensor is on the CPU anyway.

NCCL refuses a CPU tensor; on gloo a tensor made without naming a device lands on the CPU, which
is the planned device, so the mistake shows only on the first GPU run. :class:`DeviceCheck`
therefore checks two things at every ``c10d`` op (every collective and point-to-point call,
torch's own included, reaches the dispatcher as one):

- each tensor argument is on ``planned`` (what a CUDA run checks; unit-tested with a fake
  planned device such as ``meta``);
- no tensor argument's storage was made by a factory call (``torch.zeros``, ``torch.tensor``…)
  in collviz's runtime that named no device, unless it was since moved with an explicit device
  (``.to(device)``): on CUDA that tensor would have been on the CPU. torch's own creations (a
  module's parameters, which DTensor and FSDP2 move to the mesh's device themselves) are not
  collviz's to place.

A breach raises :class:`MisplacedTensor` inside the op, so the rank fails with a message naming
the op and the tensor. :class:`NoIntegerMatmul` holds a CPU run to another of CUDA's rules: there
is no integer matrix product.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Any

import torch

import collviz.runtime
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["DeviceCheck", "MisplacedTensor", "NoIntegerMatmul"]

_FACTORIES = {
    torch.zeros, torch.ones, torch.empty, torch.full, torch.tensor, torch.arange, torch.rand, torch.randn,
    torch.randint, torch.as_tensor, torch.linspace, torch.eye, torch.empty_strided,
}
"""Factory functions whose result lands on torch's default device unless ``device=`` names one."""

_MOVES = {torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.cpu}
"""Methods that place a tensor on a device they are given."""

_RUNTIME = str(Path(collviz.runtime.__file__).parent)
"""collviz's runtime: the code whose tensor creations are checked."""


class MisplacedTensor(AssertionError):
    """A collective was handed a tensor that is not, or would not be on CUDA, on the planned device."""


class _Origins(TorchFunctionMode):
    """Remembers the storages that factory calls naming no device made (the tensors are kept, so
    a storage's address is never reused while it is remembered)."""

    def __init__(self, code: tuple[str, ...]) -> None:
        super().__init__()
        self.code = code
        self.unplaced: dict[tuple[str, int], torch.Tensor] = {}

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if func in _FACTORIES and kwargs.get("device") is None and isinstance(result, torch.Tensor):
            if result.numel() and sys._getframe(1).f_code.co_filename.startswith(self.code):
                self.unplaced[_storage_key(result)] = result
        elif func in _MOVES and isinstance(result, torch.Tensor) and (len(args) > 1 or kwargs):
            self.unplaced.pop(_storage_key(result), None)
        return result


def _storage_key(tensor: torch.Tensor) -> tuple[str, int]:
    return str(tensor.device), tensor.untyped_storage().data_ptr()


_AFTER_BACKEND_SELECT = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.BackendSelect)


class _Collectives:
    """Checks the tensor arguments of every ``c10d`` op against the plan and the origins, from a
    kernel at the ``BackendSelect`` key (as ``collviz run``'s observer sees calls): a dispatch
    mode would miss the calls collviz issues with its dispatch modes popped (timed regions)."""

    def __init__(self, planned: torch.device, origins: _Origins) -> None:
        self.planned = planned
        self.origins = origins
        self.checked = 0
        self._library: torch.library.Library | None = None

    def __enter__(self) -> None:
        self._library = torch.library.Library("c10d", "IMPL")
        for qualified in torch._C._dispatch_get_all_op_names():
            namespace, _, name = qualified.partition("::")
            if namespace == "c10d" and name != "check_for_nan":
                op = getattr(torch.ops.c10d, name).default
                self._library.impl(name, partial(self._kernel, op), "BackendSelect", with_keyset=True)

    def __exit__(self, *exc_info: object) -> None:
        if self._library is not None:
            self._library._destroy()
            self._library = None

    def _kernel(self, op: torch._ops.OpOverload, keyset: torch._C.DispatchKeySet, *args: Any, **kwargs: Any) -> Any:
        for tensor in _tensors(args):
            self.checked += 1
            what = f"{op._schema.name} got a {tuple(tensor.shape)} {tensor.dtype} tensor"
            if tensor.device != self.planned:
                raise MisplacedTensor(f"{what} on {tensor.device}, not on the planned {self.planned}")
            if tensor.numel() and _storage_key(tensor) in self.origins.unplaced:
                raise MisplacedTensor(f"{what} made without naming a device: on CUDA it would be on the CPU")
        return op.redispatch(keyset & _AFTER_BACKEND_SELECT, *args, **kwargs)


def _tensors(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in _tensors(item)]
    return []


class DeviceCheck:
    """While entered, every ``c10d`` op checks its tensors (see the module's docstring):
    against ``planned``, and against the factory calls without a device made by the code under
    the folders ``code`` (default: collviz's runtime); :attr:`checked` counts the tensors checked."""

    def __init__(self, planned: torch.device, code: tuple[str, ...] = (_RUNTIME,)) -> None:
        self._origins = _Origins(code)
        self._collectives = _Collectives(planned, self._origins)

    @property
    def checked(self) -> int:
        """How many tensor arguments of collectives were checked."""
        return self._collectives.checked

    def __enter__(self) -> DeviceCheck:
        self._origins.__enter__()
        self._collectives.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._collectives.__exit__(*exc_info)
        self._origins.__exit__(*exc_info)


_MATMULS = {torch.ops.aten.mm, torch.ops.aten.addmm, torch.ops.aten.bmm, torch.ops.aten.baddbmm, torch.ops.aten.dot}


class NoIntegerMatmul(TorchDispatchMode):
    """While entered, an integer matrix product raises, as it does on CUDA (no kernel for it)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func.overloadpacket in _MATMULS:
            integer = [t.dtype for t in _tensors(args) if not (t.dtype.is_floating_point or t.dtype.is_complex)]
            if integer:
                raise RuntimeError(f"{func} has no CUDA kernel for {integer[0]} (as on a GPU)")
        return func(*args, **(kwargs or {}))
