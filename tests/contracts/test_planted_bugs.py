"""The planted-bug list (tests/support/planted_bugs.py) stays plantable: every bug's snippet is still in its
file exactly once, and its selection names test files that exist. Running the list is
``python tests/support/planted_bugs.py`` (minutes); this only says when the code moved under it."""

from __future__ import annotations

import pytest

from support import planted_bugs
from support.paths import ROOT


def test_the_list_holds_at_least_25_bugs_with_distinct_names():
    names = [bug.name for bug in planted_bugs.BUGS]
    assert len(names) >= 25 and len(set(names)) == len(names)


@pytest.mark.parametrize("bug", planted_bugs.BUGS, ids=lambda bug: bug.name)
def test_each_bug_still_finds_its_snippet_once_and_its_tests(bug):
    original = (ROOT / bug.path).read_text(encoding="utf-8")
    planted = planted_bugs.planted_text(bug, original)
    assert planted != original and planted.count(bug.replacement) >= 1
    files = {selection.split("::")[0] for selection in bug.tests if selection.startswith("tests/")}
    assert files and all((ROOT / f).is_file() for f in files), bug.tests


def test_a_snippet_that_moved_is_a_loud_error():
    bug = planted_bugs.Bug("moved", "x.py", "a = 1", "a = 2", ("tests/test_x.py",), "test")
    with pytest.raises(planted_bugs.PlantError, match="occurs 0 times"):
        planted_bugs.planted_text(bug, "b = 1\n")
    with pytest.raises(planted_bugs.PlantError, match="occurs 2 times"):
        planted_bugs.planted_text(bug, "a = 1\na = 1\n")
