"""What this installation runs on: collviz, Python, torch and its backends, the wire libraries, GPUs.

``collviz doctor`` prints :func:`version_lines` (``--json``: :func:`environment`'s fields). Nothing
here initialises CUDA: GPUs are counted through NVML (:mod:`.nvml`), and NCCL's version is read
from torch's build, not from a device.
"""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

from . import nvml

__all__ = ["environment", "version_lines", "available_memory"]


def _package(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _nccl() -> dict:
    """NCCL as this torch has it: ``built`` (bool), ``version`` ("2.27.3" or None) and, where the
    version is unknown although NCCL is built in, ``error``."""
    import torch
    import torch.distributed as dist

    if not dist.is_nccl_available():
        return {"built": False, "version": None}
    try:
        major_minor_patch = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError) as exc:
        return {"built": True, "version": None, "error": str(exc)}
    return {"built": True, "version": ".".join(str(part) for part in major_minor_patch)}


def environment() -> dict:
    """What this installation runs on, as fields (``collviz doctor --json``): collviz, Python, torch
    (its version, whether CI verifies it, the verified releases and the supported floor), its
    backends, the wire and viewer libraries (None where not installed), and the GPUs NVML sees."""
    import collviz
    import torch
    import torch.distributed as dist

    from .. import compat

    gpus = nvml.gpu_count()
    return {
        "collviz": {"version": collviz.__version__},
        "python": {"version": platform.python_version(), "system": platform.system(), "machine": platform.machine()},
        "torch": {"version": compat.TORCH_VERSION, "verified": compat.is_verified(),
                  "verified_versions": list(compat.VERIFIED_TORCH), "pinned": compat.PINNED_TORCH,
                  "floor": ".".join(map(str, compat.FLOOR)), "supported": compat.floor_refusal() is None,
                  "cuda": torch.version.cuda},
        "backends": {"gloo": dist.is_gloo_available(), "nccl": _nccl()},
        "packages": {name: _package(name) for name in ("pyzmq", "msgspec", "textual", "rich", "textual-serve")},
        "gpus": {"visible": gpus, "unavailable_reason": None if gpus else
                 (nvml.nvml_unavailable_reason() or "NVML sees no GPU")},
    }


def version_lines(fields: dict | None = None) -> list[str]:
    """One line per component of :func:`environment` (or of ``fields``, a report it made)."""
    found = environment() if fields is None else fields
    torch_fields, nccl, packages = found["torch"], found["backends"]["nccl"], found["packages"]
    ci = f"CI verifies torch {', '.join(torch_fields['verified_versions'])}"
    if torch_fields["verified"]:
        verified = f"verified ({ci})"
    elif torch_fields["supported"]:
        verified = f"not verified ({ci}; collviz supports ≥ {torch_fields['floor']})"
    else:
        verified = f"older than collviz supports (torch ≥ {torch_fields['floor']})"
    if not nccl["built"]:
        nccl_text = "NCCL not built into this torch" + (" (CPU build)" if torch_fields["cuda"] is None else "")
    elif nccl["version"] is None:
        nccl_text = f"NCCL built in, version unknown ({nccl['error']})"
    else:
        nccl_text = f"NCCL {nccl['version']}"
    gpus = found["gpus"]
    python = found["python"]

    def package(name: str) -> str:
        return packages[name] or "not installed"

    return [
        f"collviz {found['collviz']['version']}",
        f"python {python['version']} ({python['system']} {python['machine']})",
        f"torch {torch_fields['version']}, {verified}; CUDA {torch_fields['cuda'] or 'none (CPU build)'}",
        f"backends: {'gloo available' if found['backends']['gloo'] else 'gloo not built into this torch'}; {nccl_text}",
        f"wire: pyzmq {package('pyzmq')}, msgspec {package('msgspec')}; viewer: textual {package('textual')}, "
        f"rich {package('rich')}; serve: textual-serve {package('textual-serve')}",
        f"GPUs: {gpus['visible']} visible through NVML" if gpus["visible"] else f"GPUs: none visible ({gpus['unavailable_reason']})",
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
