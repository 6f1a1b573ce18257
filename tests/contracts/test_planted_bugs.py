"""The planted-bug list (tests/support/planted_bugs.py) stays plantable and killed, checked cheaply:
every bug's snippet is still in its file exactly once, its selection names tests that exist, and
its verdict in the last run of the whole list (tests/support/planted_bugs_record.json) is
killed-by-value for the bug as it is listed now. Running the list is
``python tests/support/planted_bugs.py`` (minutes): this says when the code or the list moved
under the record, not whether the tests still catch each bug today."""

from __future__ import annotations

import ast
import json
from functools import cache
from pathlib import Path

import pytest

from support import planted_bugs
from support.paths import ROOT


def test_the_list_holds_at_least_65_bugs_with_distinct_names():
    names = [bug.name for bug in planted_bugs.BUGS]
    assert len(names) >= 65 and len(set(names)) == len(names)


@cache
def _test_names(path: Path) -> frozenset[str]:
    """The names of the test functions and classes defined at the top of ``path`` (and the
    methods of its classes, as ``Class::method``)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        if isinstance(node, ast.ClassDef):
            found.update(f"{node.name}::{item.name}" for item in node.body
                         if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return frozenset(found)


@pytest.mark.parametrize("bug", planted_bugs.BUGS, ids=lambda bug: bug.name)
def test_each_bug_still_finds_its_snippet_once_and_its_tests(bug):
    original = (ROOT / bug.path).read_text(encoding="utf-8")
    planted = planted_bugs.planted_text(bug, original)
    assert planted != original and planted.count(bug.replacement) >= 1
    selections = [selection for selection in bug.tests if selection.startswith("tests/")]
    assert selections and all((ROOT / s.split("::")[0]).is_file() for s in selections), bug.tests
    for selection in selections:
        path, _, node = selection.partition("::")
        if node:  # a test named in its file (a parametrized id is the function's)
            assert node.split("[")[0] in _test_names(ROOT / path), f"{bug.name}: no test {selection}"


def test_each_bug_was_killed_by_a_value_in_the_last_whole_run():
    """Every listed bug, as listed now, has a killed-by-value verdict in the record (a bug added or
    changed since the last whole run, or one that survived or crashed there, fails here)."""
    assert planted_bugs.RECORD.is_file(), "no record of a whole run: run python tests/support/planted_bugs.py"
    record = json.loads(planted_bugs.RECORD.read_text(encoding="utf-8"))
    unverified = [bug.name for bug in planted_bugs.BUGS
                  if record.get(bug.name, {}).get("fingerprint") != bug.fingerprint]
    not_killed = {bug.name: record[bug.name]["outcome"] for bug in planted_bugs.BUGS
                  if bug.name not in unverified and record[bug.name]["outcome"] != "killed"}
    assert not unverified, f"not run whole since they were listed or changed: {unverified}"
    assert not not_killed, f"not killed by a value in the last whole run: {not_killed}"


def test_the_score_counts_each_outcome():
    bug = planted_bugs.BUGS[0]
    verdicts = [planted_bugs.Verdict(bug, outcome, "", seconds)
                for outcome, seconds in (("killed", 1.0), ("killed", 2.0), ("crashed", 3.0), ("survived", 4.5))]
    # 2 killed, 1 crashed, 1 survived of 4; 1 + 2 + 3 + 4.5 = 10.5 s, shown to the second (10)
    assert planted_bugs.score_text(verdicts) == "score: 2/4 killed-by-value, 1 killed-by-crash, 1 survived, in 10 s"


def test_the_record_holds_each_verdict_by_name(tmp_path):
    first, second = planted_bugs.BUGS[:2]
    path = tmp_path / "record.json"
    planted_bugs.write_record([planted_bugs.Verdict(second, "survived", "", 1.0),
                               planted_bugs.Verdict(first, "killed", "", 1.0)], path)
    assert json.loads(path.read_text()) == {first.name: {"fingerprint": first.fingerprint, "outcome": "killed"},
                                            second.name: {"fingerprint": second.fingerprint, "outcome": "survived"}}


def test_a_bug_that_changed_has_another_fingerprint():
    bug = planted_bugs.Bug("b", "x.py", "a = 1", "a = 2", ("tests/test_x.py",), "what")
    assert bug.fingerprint != planted_bugs.Bug("b", "x.py", "a = 1", "a = 3", ("tests/test_x.py",), "what").fingerprint
    assert bug.fingerprint != planted_bugs.Bug("b", "x.py", "a = 1", "a = 2", ("tests/test_y.py",), "what").fingerprint
    assert bug.fingerprint == planted_bugs.Bug("b", "x.py", "a = 1", "a = 2", ("tests/test_x.py",), "other").fingerprint


def test_a_snippet_that_moved_is_a_loud_error():
    bug = planted_bugs.Bug("moved", "x.py", "a = 1", "a = 2", ("tests/test_x.py",), "test")
    with pytest.raises(planted_bugs.PlantError, match="occurs 0 times"):
        planted_bugs.planted_text(bug, "b = 1\n")
    with pytest.raises(planted_bugs.PlantError, match="occurs 2 times"):
        planted_bugs.planted_text(bug, "a = 1\na = 1\n")
