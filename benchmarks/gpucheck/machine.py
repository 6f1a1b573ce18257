"""What the check ran on, read in a child process: this one forks ranks, so it never touches CUDA.

The probe says torch's version and where it was imported from (the image's, not a carried copy),
whether CUDA is available, NCCL's version, the GPUs, and the version and place of collviz and of
each carried package as the check's processes import them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .wheels import CARRIED

__all__ = ["Machine", "probe"]

PROBE_LIMIT_S = 120
"""The probe's limit: importing torch, asking CUDA."""

PROBE = """
import json, sys, importlib.metadata as metadata, importlib.util
import torch
cuda = torch.cuda.is_available()
def place(name):
    try:
        return metadata.version(name), str(metadata.distribution(name).locate_file(""))
    except metadata.PackageNotFoundError:
        return None, None
print(json.dumps({
    "python": sys.version.split()[0], "executable": sys.executable,
    "torch": torch.__version__, "torch_file": torch.__file__, "cuda": torch.version.cuda if cuda else None,
    "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
    "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else [],
    "collviz": getattr(importlib.util.find_spec("collviz"), "origin", None),
    "packages": {name: place(name) for name in sys.argv[1:]},
}))
"""


@dataclass(frozen=True)
class Machine:
    """The probe's answer: whether CUDA is there, and the report's lines about the machine."""

    cuda: bool
    lines: list[str]


def probe(env: Mapping[str, str], checkout: Path) -> Machine:
    """Probe the machine as the check's processes see it (``env``: their environment)."""
    commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown (not a git checkout)"
    try:
        found = subprocess.run([sys.executable, "-c", PROBE, *CARRIED], capture_output=True, text=True,
                               env=dict(env), timeout=PROBE_LIMIT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Machine(False, [f"- collviz commit {commit}", f"- the probe did not end in {PROBE_LIMIT_S} s"])
    if found.returncode:
        return Machine(False, [f"- collviz commit {commit}", "- the probe failed (torch not importable?):",
                               *["  " + line for line in found.stderr.strip().splitlines()[-5:]]])
    info = json.loads(found.stdout)
    packages = ", ".join(f"{name} {version or 'MISSING'}" for name, (version, _) in info["packages"].items())
    return Machine(info["cuda"] is not None, [
        f"- collviz commit {commit}, imported from {info['collviz'] or 'nowhere: not importable'}",
        f"- Python {info['python']} ({info['executable']})",
        f"- torch {info['torch']} from {info['torch_file']}; CUDA {info['cuda'] or 'not available'}; "
        f"NCCL {info['nccl'] or '—'}",
        f"- GPUs: {', '.join(info['gpus']) or 'none'}",
        f"- packages: {packages}",
    ])
