"""What this installation runs on: collviz, Python, torch and its backends, the wire libraries, GPUs.

``collviz --version`` prints :func:`version_lines`. Nothing here initialises CUDA: GPUs are counted
through NVML (:mod:`.nvml`), and NCCL's version is read from torch's build, not from a device.
"""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

from . import nvml

__all__ = ["VERIFIED_TORCH", "version_lines", "available_memory"]

VERIFIED_TORCH = ("2.13.0",)
"""torch releases the whole test suite (training scenarios included) has passed on."""


def _package(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _nccl() -> str:
    import torch
    import torch.distributed as dist

    if not dist.is_nccl_available():
        return "NCCL not built into this torch" + (" (CPU build)" if torch.version.cuda is None else "")
    try:
        major_minor_patch = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError) as exc:
        return f"NCCL built in, version unknown ({exc})"
    return "NCCL " + ".".join(str(part) for part in major_minor_patch)


def version_lines() -> list[str]:
    """One line per component: collviz, Python, torch (verified or not), backends, wire, GPUs."""
    import collviz
    import torch
    import torch.distributed as dist

    torch_version = str(torch.__version__)
    verified = "verified" if torch_version.split("+")[0] in VERIFIED_TORCH else \
        f"not verified (collviz is tested on torch {', '.join(VERIFIED_TORCH)})"
    gloo = "gloo available" if dist.is_gloo_available() else "gloo not built into this torch"
    gpus = nvml.gpu_count()
    gpu_text = f"{gpus} visible through NVML" if gpus else f"none visible ({nvml.nvml_unavailable_reason() or 'NVML sees no GPU'})"
    return [
        f"collviz {collviz.__version__}",
        f"python {platform.python_version()} ({platform.system()} {platform.machine()})",
        f"torch {torch_version}, {verified}; CUDA {torch.version.cuda or 'none (CPU build)'}",
        f"backends: {gloo}; {_nccl()}",
        f"wire: pyzmq {_package('pyzmq')}, msgspec {_package('msgspec')}; viewer: textual {_package('textual')}",
        f"GPUs: {gpu_text}",
    ]


def available_memory() -> int | None:
    """Bytes of memory available to new work now (Linux's MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
