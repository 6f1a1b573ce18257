"""NVML, queried without ever initialising CUDA, degrading to "unavailable" instead of failing.

Every NVML call goes through :func:`nvml_call` (nvitop's habit): the library is imported and
initialised once, lazily; a missing package, library or driver, or a failing call, yields
``None``. The launcher counts GPUs here before forking workers, which must not find CUDA
initialised, so nothing in this module touches torch.cuda. NVML's state does not cross a fork:
a process about to fork shuts NVML down (it initialises again when next asked), so every worker
initialises its own. The devices CUDA shows a process are enumerated once per process (and
``CUDA_VISIBLE_DEVICES`` value), not on every Memory event.
"""

from __future__ import annotations

import os
import threading
from types import ModuleType
from typing import Any, Union

from ..wire.protocol import NvmlMemory

__all__ = ["nvml_call", "gpu_count", "nvml_unavailable_reason", "device_memory"]

_lock = threading.Lock()
_initialised = False
_library: ModuleType | None = None
_reason: str | None = None
_visible: dict[str | None, list[Any]] = {}
"""The handles of the devices CUDA shows this process, by the ``CUDA_VISIBLE_DEVICES`` they were read under."""


def _before_fork() -> None:
    """Shut NVML down in a process about to fork, so that no child inherits its state (its
    handles and the driver's file descriptors are this process's); a failed initialisation,
    which holds nothing, is kept."""
    global _initialised, _library
    with _lock:
        if _library is not None:
            try:
                _library.nvmlShutdown()
            except (_library.NVMLError, OSError, AttributeError):
                pass
            _initialised, _library = False, None
        _visible.clear()


os.register_at_fork(before=_before_fork)


def _nvml() -> ModuleType | None:
    """The initialised ``pynvml`` module, or None (with ``_reason`` set); tried once per process."""
    global _initialised, _library, _reason
    with _lock:
        if not _initialised:
            _initialised = True
            _library, _reason = _initialise()
        return _library


def _initialise() -> tuple[ModuleType | None, str | None]:
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        return None, (
            "NVML library not found (nvidia-ml-py installed but no libnvidia-ml.so: "
            "no NVIDIA driver)"
        )
    except pynvml.NVMLError_DriverNotLoaded:
        return None, "NVIDIA driver not loaded (NVML cannot reach the driver)"
    except (pynvml.NVMLError, OSError) as exc:
        return None, f"NVML failed to initialise: {exc}"
    return pynvml, None


def nvml_call(name: str, *args: Any) -> Any | None:
    """``pynvml.<name>(*args)``, or None when NVML is unavailable or the call fails.

    A function missing from an older nvidia-ml-py also yields None. Initialisation is attempted
    once; after a failure no call retries it.
    """
    library = _nvml()
    if library is None:
        return None
    function = getattr(library, name, None)
    if function is None:
        return None
    try:
        return function(*args)
    except (library.NVMLError, OSError):
        return None


def nvml_unavailable_reason() -> str | None:
    """A one-line hint for the command line saying why NVML cannot be used; None when it can."""
    _nvml()
    return _reason


def gpu_count() -> int:
    """How many GPUs CUDA would show this process, from NVML and ``CUDA_VISIBLE_DEVICES``.

    Never initialises CUDA (safe before forking workers). 0 when NVML is unavailable.
    """
    return len(_visible_handles())


def device_memory(index: int) -> NvmlMemory | None:
    """NVML's used/total bytes and utilisation of CUDA device ``index``, as this process numbers it.

    ``CUDA_VISIBLE_DEVICES`` is honoured (indices and UUIDs). ``utilization_pct`` is None where
    the device does not report it (MIG slices); the whole result is None when NVML is
    unavailable or ``index`` names no visible device.
    """
    handles = _visible_handles()
    if not 0 <= index < len(handles):
        return None
    info = nvml_call("nvmlDeviceGetMemoryInfo", handles[index])
    if info is None:
        return None
    rates = nvml_call("nvmlDeviceGetUtilizationRates", handles[index])
    return NvmlMemory(
        used=int(info.used),
        total=int(info.total),
        utilization_pct=None if rates is None else int(rates.gpu),
    )


def _visible_handles() -> list[Any]:
    """NVML handles of the devices CUDA would show this process, in CUDA's order.

    Follows CUDA's reading of ``CUDA_VISIBLE_DEVICES`` (as torch.cuda's NVML-based count does):
    unset means every device; entries are integer indices (read like ``strtoul``) or UUIDs
    (``GPU-…`` prefixes, ``MIG-…`` in full); the first invalid entry ends the list, and a repeated
    device empties it.
    """
    setting = os.environ.get("CUDA_VISIBLE_DEVICES")
    known = _visible.get(setting)
    if known is not None:
        return known
    count = nvml_call("nvmlDeviceGetCount")
    if not count:
        return []
    _visible[setting] = handles = _enumerate(count)
    return handles


def _enumerate(count: int) -> list[Any]:
    """The handles :func:`_visible_handles` returns, read from NVML's ``count`` devices."""
    entries = _visible_entries()
    if entries is None:
        entries = list(range(count))
    handles: list[Any] = []
    seen: set[Union[int, str]] = set()
    for entry in entries:
        key = entry if isinstance(entry, int) else _uuid_index(entry, count)
        if key is None or (isinstance(key, int) and key >= count):
            break
        if key in seen:
            return []
        seen.add(key)
        handle = _handle(key)
        if handle is None:
            break
        handles.append(handle)
    return handles


def _visible_entries() -> list[Union[int, str]] | None:
    """``CUDA_VISIBLE_DEVICES`` as indices or UUIDs up to the first invalid entry; None if unset."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    items = [raw.strip() for raw in value.split(",")]
    uuid_kind = next((kind for kind in ("GPU-", "MIG-") if items[0].startswith(kind)), None)
    entries: list[Union[int, str]] = []
    for item in items:
        if uuid_kind is not None:
            if not item.startswith(uuid_kind):
                break
            entries.append(item)
            continue
        digits = len(item) - len(item.lstrip("0123456789"))
        if digits == 0:  # empty, "-1", a UUID after indices: CUDA stops at the first such entry
            break
        entries.append(int(item[:digits]))
    return entries


def _uuid_index(prefix: str, count: int) -> Union[int, str, None]:
    """The NVML index of the one device whose UUID starts with ``prefix``; a MIG UUID as is.

    None when no device, or more than one, matches.
    """
    if prefix.startswith("MIG-"):
        return prefix
    matches = [i for i in range(count) if _uuid(i).startswith(prefix)]
    return matches[0] if len(matches) == 1 else None


def _uuid(index: int) -> str:
    handle = nvml_call("nvmlDeviceGetHandleByIndex", index)
    uuid = nvml_call("nvmlDeviceGetUUID", handle) if handle is not None else None
    if isinstance(uuid, bytes):
        return uuid.decode("ascii", "replace")
    return uuid or ""


def _handle(key: Union[int, str]) -> Any | None:
    if isinstance(key, int):
        return nvml_call("nvmlDeviceGetHandleByIndex", key)
    return nvml_call("nvmlDeviceGetHandleByUUID", key)
