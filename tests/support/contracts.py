"""The installed package, assembled for tools (import-linter, mypy) that cannot walk the repository's
folder layout."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.paths import ROOT


CONFIG = ROOT / "pyproject.toml"


def assemble(dest: Path) -> Path:
    """Copy the package as it installs (collviz/, collviz/runtime, collviz/app) under ``dest``."""
    package = dest / "collviz"
    shutil.copytree(ROOT / "src" / "collviz", package, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("runtime", "app"):
        shutil.copytree(ROOT / name, package / name, ignore=shutil.ignore_patterns("__pycache__"))
    return package

