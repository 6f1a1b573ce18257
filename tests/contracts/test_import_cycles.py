"""No import cycle among collviz's modules, counting imports inside functions.

import-linter's layers hold packages apart; a cycle through a function-level import (module A
imports B at the top, B imports A inside a function) passes them and still makes the two modules
one. The graph is built here from the source (every ``import`` and ``from … import`` of a
``collviz.*`` module anywhere in a file, except under ``if TYPE_CHECKING:``, which never runs).

Both packages are checked: ``runtime/`` and ``app/`` (whose command line lives in ``app/commands/``,
one module per command, with a dispatcher nothing imports back).
"""

from __future__ import annotations

import ast
from pathlib import Path

from support.paths import ROOT


PACKAGES = {"src/collviz": "collviz", "runtime": "collviz.runtime", "app": "collviz.app"}
"""Folder of the checkout → the package it installs as."""
CHECKED = ("runtime", "app")
"""The folders whose modules must form no cycle."""


def module_files(folders: dict[str, str]) -> dict[str, tuple[Path, bool]]:
    """Module name → (its file, whether it is a package's ``__init__``)."""
    modules = {}
    for folder, package in folders.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            name = ".".join((package, *(parts[:-1] if is_package else parts)))
            modules[name] = (path, is_package)
    return modules


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree`` that can run (not those under ``if TYPE_CHECKING:``)."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def import_graph(folders: dict[str, str]) -> dict[str, set[str]]:
    """Module → the collviz modules it imports (a name imported from a package that is a
    submodule counts as that submodule)."""
    modules = module_files(folders)
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        targets = set()
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package if node.level else ""
            base = ".".join(part for part in (base, node.module or "") if part)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.add(submodule if submodule in modules else base)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path (first node repeated at the end), or None."""
    state: dict[str, str] = {}  # "open" while on the path, "done" once every successor is explored
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for successor in sorted(graph.get(node, ())):
            if state.get(successor) == "open":
                return path[path.index(successor):] + [successor]
            if successor not in state and (cycle := visit(successor)):
                return cycle
        state[node] = "done"
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_no_import_cycle_among_collviz_modules():
    graph = import_graph(PACKAGES)
    checked = {name for name in graph if any(name.startswith(PACKAGES[folder]) for folder in CHECKED)}
    cycle = find_cycle({name: graph[name] & checked for name in checked})
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_graph_sees_function_level_and_relative_imports():
    """Checked against modules whose imports are known: the scenario registry imports a training
    module's builder inside a function, and the loader imports its siblings relatively."""
    graph = import_graph(PACKAGES)
    assert "collviz.runtime.programs.collectives" in graph["collviz.runtime.programs.registry"]  # in a function
    assert {"collviz.runtime.scenario_files.decoding", "collviz.runtime.scenario_files.kinds",
            "collviz.runtime.errors"} <= graph["collviz.runtime.scenario_files.loading"]


def test_a_cycle_is_found_and_named():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
