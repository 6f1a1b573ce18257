"""The wheels a GPU image lacks, pinned: fetched here, where there is network (``--download``),
and installed on the GPU machine from that folder alone.

What is carried is collviz's own dependencies and the GPU tier's test packages, each at the
version collviz's tests passed with here, except what must be the image's own: torch (and the CUDA
libraries it brings), numpy and nvidia-ml-py. Packages the image also has (rich, pytest, …) are
carried anyway, so the check runs on the versions tested here; they go into a folder of their
own on ``PYTHONPATH``, for collviz's processes only, so the image's environment is left as it was.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["CARRIED", "BUILD_ONLY", "PYTHON_VERSIONS", "download", "install", "folder_size"]

CARRIED: dict[str, str] = {
    # collviz's dependencies (pyproject.toml), and theirs
    "pyzmq": "27.3.0",
    "msgspec": "0.22.0",
    "textual": "8.2.8",
    "rich": "15.0.0",
    "markdown-it-py": "4.3.0",
    "mdurl": "0.1.2",
    "mdit-py-plugins": "0.7.0",
    "linkify-it-py": "2.2.0",
    "platformdirs": "4.14.8",
    "pygments": "2.21.0",
    "typing-extensions": "4.16.0",
    "py-spy": "0.4.3",  # attach --pid (one wheel for every Python: a binary, not an extension)
    # the GPU tier's test packages
    "pytest": "8.4.2",
    "pluggy": "1.7.0",
    "iniconfig": "2.3.1",
    "packaging": "26.4",
    "pytest-timeout": "2.4.0",
    "pytest-asyncio": "1.5.0",
    # builds collviz from the checkout there (pyproject.toml asks for setuptools >= 77)
    "setuptools": "84.2.1",
}
"""Each carried package and its version (those collviz's tests passed with on 2026-11-28)."""

BUILD_ONLY = ("setuptools",)
"""Carried for building collviz there (pip's build environment takes it from the folder), not installed."""

PYTHON_VERSIONS = ("3.11", "3.12", "3.13")
"""The Pythons the compiled wheels (pyzmq, msgspec) are fetched for; the H200 image's is 3.12."""

PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def download(folder: Path) -> int:
    """``pip download`` every carried wheel, for each of :data:`PYTHON_VERSIONS` on x86-64 Linux,
    into ``folder`` (no dependencies followed: :data:`CARRIED` is the whole list); pip's status."""
    folder.mkdir(parents=True, exist_ok=True)
    pins = [f"{name}=={version}" for name, version in CARRIED.items()]
    for version in PYTHON_VERSIONS:
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                   "--implementation", "cp", "--python-version", version,
                   *[option for platform in PLATFORMS for option in ("--platform", platform)],
                   "--dest", str(folder), *pins]
        print(f"Python {version}: pip download {len(pins)} pinned wheels into {folder}", flush=True)
        status = subprocess.call(command)
        if status:
            return status
    return 0


def folder_size(folder: Path) -> tuple[int, int]:
    """(wheels in ``folder``, their bytes)."""
    wheels = list(folder.glob("*.whl"))
    return len(wheels), sum(path.stat().st_size for path in wheels)


def install(folder: Path, checkout: Path) -> tuple[Path, subprocess.CompletedProcess]:
    """Install the carried wheels from ``folder`` (no index, no dependencies) and collviz built from
    ``checkout`` (its build environment takes setuptools from the folder too) into a new folder, for
    ``PYTHONPATH``; (that folder, pip's result)."""
    site = Path(tempfile.mkdtemp(prefix="collviz-site-"))
    pins = [f"{name}=={version}" for name, version in CARRIED.items() if name not in BUILD_ONLY]
    result = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(folder),
                             "--no-deps", "--no-compile", "--target", str(site), *pins, str(checkout)],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return site, result
