"""The import-linter contracts in pyproject.toml hold, and they would catch a violation.

The installed layout maps folders (``src/collviz``, ``runtime/``, ``app/``) onto one package, which
import-linter cannot walk; each test assembles that package in a temporary folder first.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.contracts import CONFIG, assemble


def lint_imports(path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``lint-imports`` with the repository's contracts on the package assembled under ``path``."""
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run(
        [sys.executable, "-c", code, "--config", str(CONFIG), "--no-cache"],
        cwd=path, env={"PYTHONPATH": str(path), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=120,
    )


def test_contracts_hold(tmp_path: Path):
    assemble(tmp_path)
    result = lint_imports(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 10 kept, 0 broken." in result.stdout


def test_contracts_catch_violations(tmp_path: Path):
    package = assemble(tmp_path)
    (package / "runtime" / "wire" / "bad_wire.py").write_text("from ..scenario_files import loading\n")
    (package / "runtime" / "reports" / "bad_report.py").write_text("import torch\nimport subprocess\n")
    (package / "runtime" / "observation" / "bad_view.py").write_text("import textual\n")
    (package / "runtime" / "sources" / "bad_source.py").write_text("import torch\n")
    (package / "runtime" / "live" / "bad_live.py").write_text("import subprocess\n")
    (package / "runtime" / "scenario_files" / "bad_file.py").write_text("def f():\n    import torch\n")
    (package / "app" / "commands" / "bench.py").write_text("def main():\n    from . import run\n")
    (package / "app" / "model" / "bad_model.py").write_text("import textual.widgets\n")
    (package / "app" / "widgets" / "bad_widget.py").write_text("def f():\n    from collviz.app import cli\n")
    result = lint_imports(tmp_path)
    assert result.returncode == 1
    assert "Contracts: 0 kept, 10 broken." in result.stdout
    assert "collviz.runtime.wire.bad_wire -> collviz.runtime.scenario_files.loading" in result.stdout
    assert "collviz.runtime.reports.bad_report -> torch" in result.stdout
    assert "collviz.runtime.observation.bad_view -> textual" in result.stdout
    assert "collviz.runtime.sources.bad_source -> torch" in result.stdout
    assert "collviz.runtime.live.bad_live -> subprocess" in result.stdout
    assert "collviz.runtime.scenario_files.bad_file -> torch" in result.stdout
    assert "collviz.app.commands.bench -> collviz.app.commands.run" in result.stdout
    assert "collviz.app.model.bad_model -> textual" in result.stdout
    assert "collviz.app.widgets.bad_widget -> collviz.app.cli" in result.stdout
