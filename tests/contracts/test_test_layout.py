"""The tests' own layout: test modules live in rooms that mirror the code, with unique names, and
share helpers only through ``tests/support`` (a test module importing another runs that module's
tests' import-time work twice and ties unrelated rooms together)."""

from __future__ import annotations

import ast
from pathlib import Path

from support.paths import ROOT

TESTS = ROOT / "tests"
ROOMS = ("runtime", "app", "commands", "contracts")


def _imported_modules(path: Path) -> set[str]:
    """Every module name ``path`` imports, at any depth of its code (``from a.b import c`` gives ``a.b``
    and ``a.b.c``; a relative import gives its names)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}".lstrip(".") for alias in node.names)
    return names - {""}


def _is_test_module(name: str) -> bool:
    """Whether the dotted ``name`` is a test module or a conftest (any of its parts)."""
    return any(part.startswith("test_") or part == "conftest" for part in name.split("."))


def _python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__snapshots__" not in p.parts)


def test_the_rule_sees_the_imports_it_forbids(tmp_path: Path):
    """The checker is the test: it must see each spelling of a forbidden import, and pass the allowed."""
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import test_app\nfrom test_app import until\nfrom conftest import run_cli\n"
        "def f():\n    from test_failures import alive\n"
        "from support.app import until\nimport collviz.app.app\nfrom support import planted_bugs\n"
    )
    found = {name for name in _imported_modules(sample) if _is_test_module(name)}
    assert found == {"test_app", "test_app.until", "conftest", "conftest.run_cli", "test_failures",
                     "test_failures.alive"}


def test_no_test_module_or_helper_imports_a_test_module_or_conftest():
    offenders = [f"{path.relative_to(ROOT)} imports {name}"
                 for path in _python_files() for name in sorted(_imported_modules(path)) if _is_test_module(name)]
    assert offenders == []


def test_every_test_module_lives_in_a_room_under_a_unique_name():
    modules = sorted(TESTS.rglob("test_*.py"))
    assert modules, "no test modules found"
    misplaced = [str(p.relative_to(ROOT)) for p in modules
                 if p.parent.parent != TESTS or p.parent.name not in ROOMS]
    assert misplaced == []
    names = [p.name for p in modules]
    assert sorted(set(names)) == sorted(names), "two rooms hold a test module of the same name"
