"""``runtime/`` and ``app/`` type-check: mypy, with the repository's ``[tool.mypy]`` settings, finds
no error (the viewer's model typed end to end: the event log's series are generic in their event
kind, the app satisfies the Protocols its modes and the sessions rely on).

mypy resolves ``collviz.runtime`` through folders, and the installed layout maps three of them
(``src/collviz``, ``runtime/``, ``app/``) onto one package; the check runs on that package assembled
in a temporary folder, as the import-linter contracts do. mypy's incremental cache is kept outside
the clone (:func:`cache_dir`), so a second run on the same machine, and the planted error's check,
recheck only what changed; mypy validates every cached module against its source's hash, its
options and its own version, and never caches a module with an error, so the cache cannot hide one.

The check runs against one pinned torch (``collviz.runtime.compat.PINNED_TORCH``, the one CI's full
suite installs): another torch's stubs differ (2.8 has no ``GroupName``, nor DDP's
``bucket_cap_mb_list``), and the floor check (``.ci/floor``) skips this module there.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from collviz.runtime.compat import PINNED_TORCH

from support.contracts import CONFIG, assemble


pytestmark = pytest.mark.skipif(
    torch.__version__.split("+")[0] != PINNED_TORCH,
    reason=f"the type check runs against the pinned torch {PINNED_TORCH}; this is {torch.__version__}")


def cache_dir() -> Path:
    """mypy's cache for this interpreter: ``$XDG_CACHE_HOME`` (default ``~/.cache``)
    ``/collviz/mypy/<interpreter>``, one folder per environment (its torch's stubs, its mypy), so
    that venvs beside each other do not overwrite each other's entries."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "collviz" / "mypy" / hashlib.sha256(sys.prefix.encode()).hexdigest()[:16]


def mypy(root: Path) -> subprocess.CompletedProcess[str]:
    """``mypy collviz/runtime collviz/app`` on the package assembled under ``root``, with the
    repository's settings and the cache of :func:`cache_dir`."""
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(CONFIG), "--cache-dir", str(cache_dir()),
         "collviz/runtime", "collviz/app"],
        cwd=root, capture_output=True, text=True, timeout=300,
    )


@pytest.fixture(scope="module")
def assembled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The package assembled once, and mypy's first check of it (cold on a new machine)."""
    root = tmp_path_factory.mktemp("typed")
    assemble(root)
    return root, mypy(root)


def test_runtime_and_app_type_check(assembled):
    _, result = assembled
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_catches_a_wrong_type_and_an_unused_ignore(assembled):
    root, _ = assembled
    planted = root / "collviz" / "runtime" / "wire" / "planted.py"
    planted.write_text('count: int = "three"\nfine: int = 3  # type: ignore[assignment]\n')
    try:
        result = mypy(root)
    finally:
        planted.unlink()
    assert result.returncode == 1
    assert 'planted.py:1: error: Incompatible types in assignment (expression has type "str", variable has type "int")' \
        in result.stdout
    assert 'planted.py:2: error: Unused "type: ignore" comment' in result.stdout  # warn_unused_ignores is read
