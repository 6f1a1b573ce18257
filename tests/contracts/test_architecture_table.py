"""The README's architecture tables name every module under ``runtime/`` and ``app/``, and every
module they name exists.

A row's first cell names a module (``runtime/plan.py``) or a package (``runtime/wire/``); a
package row names its modules in its second cell, each in backticks as a bare name (``protocol``),
a subpackage as ``algorithms/`` followed by its own modules in parentheses. A function is written
with its parentheses (``plan_run()``), a class, option or file as it is spelled, so no other
backticked word reads as a module. A failure says which rows to change and how.
"""

from __future__ import annotations

import re
from pathlib import Path

from support.paths import ROOT

FOLDERS = ("runtime", "app")
MODULE = re.compile(r"[a-z][a-z0-9_]*/?")
"""A backticked word that names a module (or, ending in ``/``, a subpackage)."""


def architecture_rows(readme: str) -> list[tuple[str, str]]:
    """The (first cell, second cell) of every table row in the README's ``## Architecture`` section."""
    section = readme.split("\n## Architecture\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if line.startswith("| `"):
            cells = re.split(r"\|(?=(?:[^`]*`[^`]*`)*[^`]*$)", line.strip().strip("|"))  # pipes outside backticks
            rows.append((cells[0].strip(), cells[1].strip()))
    return rows


def package_modules(package: str, cell: str) -> set[str]:
    """The paths a package row's cell names: ``name`` is ``package/name.py``; ``sub/`` is the
    folder ``package/sub/``, and the names in the parentheses after it are its modules."""
    named: set[str] = set()
    prefixes = [(package, 0)]  # the package names resolve in, and the depth its parentheses opened at
    depth, pending = 0, ""
    for match in re.finditer(r"`([^`]*)`|\(|\)", cell):
        if match.group(0) == "(":
            depth += 1
            if pending:
                prefixes.append((pending, depth))
            pending = ""
        elif match.group(0) == ")":
            if prefixes[-1][1] == depth and len(prefixes) > 1:
                prefixes.pop()
            depth -= 1
        else:
            pending = ""
            word = match.group(1)
            if MODULE.fullmatch(word):
                path = prefixes[-1][0] + word
                named.add(path if word.endswith("/") else f"{path}.py")
                pending = path if word.endswith("/") else ""
    return named


def named_paths(rows: list[tuple[str, str]]) -> tuple[dict[str, set[str]], set[str]]:
    """Per package row, the paths it names; and the module rows (``runtime/plan.py``)."""
    packages: dict[str, set[str]] = {}
    files: set[str] = set()
    for where, what in rows:
        for path in re.findall(r"`([^`]+)`", where):
            if path.endswith("/"):
                packages[path] = packages.get(path, set()) | package_modules(path, what)
            elif path.endswith(".py"):
                files.add(path)
    return packages, files


def tree_modules(root: Path) -> set[str]:
    """Every module under ``runtime/`` and ``app/`` (a package's ``__init__`` is its row)."""
    return {path.relative_to(root).as_posix() for folder in FOLDERS for path in (root / folder).rglob("*.py")
            if path.name != "__init__.py" and "__pycache__" not in path.parts}


def table_changes(root: Path, readme: str) -> list[str]:
    """What to change in the tables so they match the tree under ``root``: one line per row."""
    packages, files = named_paths(architecture_rows(readme))
    changes = [f"row `{path}`: remove the row (no such file)" for path in sorted(files) if not (root / path).exists()]
    for package, paths in sorted(packages.items()):
        if not (root / package).is_dir():
            changes.append(f"row `{package}`: remove the row (no such folder)")
        elif gone := sorted(p for p in paths if not (root / p).exists()):
            changes.append(f"row `{package}`: remove {_words(package, gone)} (not in the tree)")
    missing: dict[str, list[str]] = {}
    for path in sorted(tree_modules(root) - files - set().union(*packages.values())):
        row = max((p for p in packages if path.startswith(p)), key=len, default=None)
        if row is None:  # no row holds it: its package's row (runtime/live/), or its own (app/keys.py)
            row = path.rsplit("/", 1)[0] + "/" if path.count("/") > 1 else path
        missing.setdefault(row, []).append(path)
    for row, paths in sorted(missing.items()):
        if row in packages:
            changes.append(f"row `{row}`: add {_words(row, paths)}")
        else:
            changes.append(f"add a row `{row}`" + (f" naming {_words(row, paths)}" if row.endswith("/") else ""))
    return changes


def _words(package: str, paths: list[str]) -> str:
    """``paths`` as a package row names them: ``protocol``, ``algorithms/plans``."""
    return ", ".join(f"`{p[len(package):].removesuffix('.py')}`" for p in paths)


def test_the_architecture_tables_name_every_module_and_only_modules_that_exist():
    changes = table_changes(ROOT, (ROOT / "README.md").read_text(encoding="utf-8"))
    assert not changes, "README.md's architecture tables disagree with the tree:\n" + "\n".join(changes)


def test_a_module_added_moved_or_removed_is_named_with_its_row(tmp_path):
    for path in ("runtime/wire/protocol.py", "runtime/wire/trace.py", "runtime/plan.py", "runtime/live/feed.py",
                 "runtime/programs/algorithms/plans.py", "app/model/log.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    readme = ("# x\n\n## Architecture\n\n| where | what |\n|---|---|\n"
              "| `runtime/wire/` | `protocol` (events: `PROTOCOL_VERSION`), `frames`, `gone`, `decode()` | `a | b` |\n"
              "| `runtime/programs/` | `algorithms/` (`plans`: hops; `execute`), `Program` |\n"
              "| `runtime/plan.py` | `plan_run()` |\n| `runtime/old.py` | gone |\n\n## Next\n\n| `app/model/` | `log` |\n")
    assert table_changes(tmp_path, readme) == [
        "row `runtime/old.py`: remove the row (no such file)",
        "row `runtime/programs/`: remove `algorithms/execute` (not in the tree)",
        "row `runtime/wire/`: remove `frames`, `gone` (not in the tree)",
        "add a row `app/model/` naming `log`",  # the table after the section's end is not read
        "add a row `runtime/live/` naming `feed`",
        "row `runtime/wire/`: add `trace`",
    ]
