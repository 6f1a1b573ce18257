"""Scenario files: the builtin ones load and hold the notes' inputs; broken ones fail clearly."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from collviz.runtime.errors import UsageError
from collviz.runtime.scenario_files.loading import (
    COLLECTIVES,
    PHASE_KEYS,
    ScenarioError,
    builtin_scenario_dir,
    find_scenario,
    list_scenarios,
    load_scenario,
)

BUILTIN_NAMES = [
    "all-gather",
    "all-reduce",
    "all-to-all",
    "broadcast",
    "gather",
    "reduce",
    "reduce-scatter",
    "scatter",
]

NARRATION = """
[narration]
setup = "Each of the {world_size} ranks holds {count} {dtype} values ({bytes})."
collective = "The collective runs."
release = "Done."
"""

VALID = (
    """
name = "NAME"
description = "A scenario written by the tests"
kind = "collective"
collective = "all_reduce"
default_gpus = 2
reduce_op = "sum"
buffer_name = "grad"

[[example]]
gpus = 2
source = "the tests"
inputs = [[1, 2], [3, 4]]
"""
    + NARRATION
)


def write(tmp_path: Path, text: str, name: str = "broken") -> Path:
    """Write ``text`` as ``<name>.toml`` with ``NAME`` replaced by the file's stem."""
    path = tmp_path / f"{name}.toml"
    path.write_text(text.replace("NAME", name), encoding="utf-8")
    return path


def scenario_text(*, top: str = "", example: str | None = None, extra: str = "") -> str:
    """A scenario file: ``top`` lines override the valid file's top-level keys."""
    overrides = dict(line.split(" = ", 1) for line in top.strip().splitlines() if line)
    lines = []
    for line in VALID.split("[[example]]")[0].strip().splitlines():
        key = line.split(" = ", 1)[0]
        if key in overrides:
            value = overrides.pop(key)
            if value != "DELETE":
                lines.append(f"{key} = {value}")
        else:
            lines.append(line)
    lines += [f"{key} = {value}" for key, value in overrides.items()]
    if example is None:
        example = 'gpus = 2\nsource = "the tests"\ninputs = [[1, 2], [3, 4]]'
    return "\n".join(lines) + "\n\n[[example]]\n" + example + "\n" + extra + NARRATION


# ----------------------------------------------------------------------------------- builtins


def test_each_collective_has_exactly_one_collective_scenario() -> None:
    scenarios = [s for s in list_scenarios() if s.kind == "collective"]
    assert [s.name for s in scenarios] == BUILTIN_NAMES
    assert sorted(s.collective for s in scenarios) == sorted(COLLECTIVES)


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_builtin_scenario_is_consistent(name: str) -> None:
    scenario = find_scenario(name)
    assert scenario.name == name == scenario.path.stem
    assert scenario.description.strip() and "\n" not in scenario.description
    assert scenario.example_for(scenario.default_gpus) is not None
    for example in scenario.examples:
        assert len(example.inputs) == example.gpus
        assert example.source
        holders = [rank for rank in range(example.gpus) if example.rank_input(rank)]
        if scenario.collective in {"broadcast", "scatter"}:
            assert holders == [scenario.root]
        else:
            assert holders == list(range(example.gpus))
    expected = [k for k in PHASE_KEYS if k != "followup" or scenario.followup is not None]
    assert list(scenario.narration) == expected
    assert all(0 < len(text) <= 400 for text in scenario.narration.values())


def test_builtin_scenario_dir_holds_the_files() -> None:
    stems = sorted(p.stem for p in builtin_scenario_dir().glob("*.toml"))
    assert stems == [s.name for s in list_scenarios()] and set(BUILTIN_NAMES) <= set(stems)


def test_all_reduce_defaults_to_the_four_rank_gradient_average() -> None:
    scenario = find_scenario("all-reduce")
    example = scenario.example_for(scenario.default_gpus)
    assert scenario.default_gpus == 4
    assert example.inputs == ((0.1,), (-0.2,), (0.4,), (-0.1,))
    assert scenario.op_for(example) == "avg"
    assert scenario.op_for(scenario.example_for(3)) == "sum"


def test_all_gather_shards_stack_into_w_query_and_feed_the_followup() -> None:
    scenario = find_scenario("all-gather")
    example = scenario.example_for(4)
    stacked = [row for rank in range(4) for row in example.rank_input(rank)]
    assert len(stacked) == 4 and all(len(row) == 4 for row in stacked)
    assert list(stacked[0]) == [0.1, 0.2, 0.3, 0.4]
    followup = scenario.followup_for(example)
    assert followup is not None and followup.kind == "matmul" and followup.rank == 0
    assert (followup.name, followup.right_name) == ("queries", "input_embeddings")
    assert len(followup.right) == 3 and all(len(row) == 4 for row in followup.right)
    assert scenario.followup_for(scenario.example_for(3)) is None  # [1, 2] has 2 columns, not 4


def test_reduce_scatter_has_the_notes_four_rank_gradients_and_the_guide_example() -> None:
    scenario = find_scenario("reduce-scatter")
    assert scenario.default_gpus == 4
    assert sorted(e.gpus for e in scenario.examples) == [2, 4]


def test_all_to_all_example_says_it_is_not_from_the_notes() -> None:
    example = find_scenario("all-to-all").example_for(4)
    assert "collviz" in example.source


# ----------------------------------------------------------------------------- broken files

EXAMPLE_3_RANKS = 'gpus = 3\nsource = "s"\ninputs = [[1, 2], [3, 4], [5, 6]]'
TWO_RANKS = 'gpus = 2\nsource = "s"\ninputs = [[1], [2]]'

BROKEN = {
    "toml syntax": ("name = 'x'\nkind = \n", ["line 2", "invalid TOML"]),
    "missing key": (scenario_text(top="collective = DELETE"), ["key 'collective'", "missing"]),
    "string for number": (
        scenario_text(top='default_gpus = "2"'),
        ["key 'default_gpus'", "expected an integer", "a string ('2')"],
    ),
    "boolean for number": (
        scenario_text(top="default_gpus = true"),
        ["key 'default_gpus'", "a boolean (true)"],
    ),
    "unknown top-level key": (
        scenario_text(top='reduceop = "sum"'),
        ["key 'reduceop'", "unknown key", "typo for 'reduce_op'"],
    ),
    "unknown example key": (
        scenario_text(example='gpus = 2\nsource = "s"\ninput = [[1], [2]]'),
        ["key 'example[0].input'", "typo for 'inputs'"],
    ),
    "bad collective": (
        scenario_text(top='collective = "allreduce"'),
        ["key 'collective'", "'allreduce' is not one of broadcast"],
    ),
    "bad reduce op": (
        scenario_text(top='reduce_op = "mean"'),
        ["key 'reduce_op'", "'mean' is not one of sum, avg, max, min, product"],
    ),
    "bad dtype": (scenario_text(top='dtype = "float8"'), ["key 'dtype'", "'float8' is not one of"]),
    "bad kind": (scenario_text(top='kind = "telepathy"'), ["key 'kind'", "'telepathy' is not one of collective"]),
    "zero gpus": (scenario_text(top="default_gpus = 0"), ["key 'default_gpus'", "less than 1"]),
    "reduce op on a non-reducing collective": (
        scenario_text(top='collective = "all_gather"'),
        ["key 'reduce_op'", "all_gather takes no reduce op"],
    ),
    "root on a non-rooted collective": (
        scenario_text(top="root = 0"),
        ["key 'root'", "all_reduce takes no root"],
    ),
    "wrong input count": (
        scenario_text(example='gpus = 2\nsource = "s"\ninputs = [[1], [2], [3]]'),
        ["key 'example[0].inputs'", "3 entries for gpus = 2"],
    ),
    "ragged input": (
        scenario_text(example='gpus = 2\nsource = "s"\ninputs = [[[1, 2], [3]], [[1, 2], [3, 4]]]'),
        ["key 'example[0].inputs'", "rank 0 is ragged"],
    ),
    "unequal shapes": (
        scenario_text(
            top="default_gpus = 3",
            example='gpus = 3\nsource = "s"\ninputs = [[1, 2], [3, 4], [5, 6, 7]]',
        ),
        ["key 'example[0].inputs'", "rank 2 has 3 elements, the other ranks 2", "equal shapes"],
    ),
    "non-numeric input": (
        scenario_text(example='gpus = 2\nsource = "s"\ninputs = [[1, "2"], [3, 4]]'),
        ["key 'example[0].inputs'", "rank 0 holds a string ('2'), not a number"],
    ),
    "boolean input": (
        scenario_text(example='gpus = 2\nsource = "s"\ninputs = [[1, true], [3, 4]]'),
        ["key 'example[0].inputs'", "a boolean (true), not a number"],
    ),
    "three dimensions": (
        scenario_text(example='gpus = 2\nsource = "s"\ninputs = [[[[1]]], [[[2]]]]'),
        ["key 'example[0].inputs'", "more than 2 dimensions"],
    ),
    "fraction for an integer dtype": (
        scenario_text(top='dtype = "int32"', example='gpus = 2\nsource = "s"\ninputs = [[1], [0.5]]'),
        ["key 'example[0].inputs'", "rank 1 holds 0.5", "not an integer (dtype int32)"],
    ),
    "out of range for uint8": (
        scenario_text(top='dtype = "uint8"', example='gpus = 2\nsource = "s"\ninputs = [[1], [-1]]'),
        ["key 'example[0].inputs'", "outside uint8's range"],
    ),
    "broadcast non-root holds data": (
        scenario_text(
            top='collective = "broadcast"\nreduce_op = DELETE\ndefault_gpus = 3',
            example=EXAMPLE_3_RANKS,
        ),
        ["key 'example[0].inputs'", "rank 1 holds data", "only the root (rank 0)"],
    ),
    "scatter root has no data": (
        scenario_text(
            top='collective = "scatter"\nreduce_op = DELETE',
            example='gpus = 2\nsource = "s"\ninputs = [[], []]',
        ),
        ["key 'example[0].inputs'", "rank 0 has no data"],
    ),
    "all-reduce rank without data": (
        scenario_text(example='gpus = 2\nsource = "s"\ninputs = [[1], []]'),
        ["key 'example[0].inputs'", "rank 1 has no data"],
    ),
    "scatter does not split evenly": (
        scenario_text(
            top='collective = "scatter"\nreduce_op = DELETE\ndefault_gpus = 3',
            example='gpus = 3\nsource = "s"\ninputs = [[1, 2, 3, 4], [], []]',
        ),
        ["key 'example[0].inputs'", "4 elements per rank do not split evenly into 3 parts"],
    ),
    "reduce-scatter does not split evenly": (
        scenario_text(
            top='collective = "reduce_scatter"',
            example='gpus = 2\nsource = "s"\ninputs = [[1, 2, 3], [4, 5, 6]]',
        ),
        ["key 'example[0].inputs'", "3 elements per rank do not split evenly into 2 parts"],
    ),
    "root outside the example": (
        scenario_text(
            top='collective = "gather"\nreduce_op = DELETE\nroot = 2\ndefault_gpus = 3',
            example=EXAMPLE_3_RANKS + "\n\n[[example]]\n" + TWO_RANKS,
        ),
        ["key 'example[1].gpus'", "2 ranks have no rank 2 to be the root"],
    ),
    "no example for the default world size": (
        scenario_text(top="default_gpus = 3"),
        ["key 'default_gpus'", "no [[example]] has gpus = 3"],
    ),
    "two examples for one world size": (
        scenario_text(example=TWO_RANKS + "\n\n[[example]]\n" + TWO_RANKS),
        ["key 'example[1].gpus'", "2 is also the gpus of example[0]"],
    ),
    "missing narration key": (
        scenario_text().replace('release = "Done."\n', ""),
        ["key 'narration.release'", "missing"],
    ),
    "unknown placeholder": (
        scenario_text().replace("The collective runs.", "Runs on {gpus} ranks."),
        ["key 'narration.collective'", "unknown placeholder {gpus}"],
    ),
    "placeholder without a value": (
        scenario_text().replace("The collective runs.", "Rank {root} holds it."),
        ["key 'narration.collective'", "placeholder {root} has no value for all_reduce"],
    ),
    "unbalanced brace": (
        scenario_text().replace("The collective runs.", "A { alone."),
        ["key 'narration.collective'", "literal brace"],
    ),
    "narration too long": (
        scenario_text().replace("The collective runs.", "x" * 401),
        ["key 'narration.collective'", "401 characters"],
    ),
    "followup narration without a followup": (
        scenario_text().replace('release = "Done."', 'release = "Done."\nfollowup = "More."'),
        ["key 'narration.followup'", "unknown key"],
    ),
    "name differs from file": (
        scenario_text(top='name = "other"'),
        ["key 'name'", "'other' must equal the file name", "'broken'"],
    ),
    "two-line description": (
        scenario_text(top='description = "one\\ntwo"'),
        ["key 'description'", "one non-empty line"],
    ),
    "followup on all-reduce": (
        scenario_text(extra='[followup]\nkind = "matmul"\nrank = 0\nname = "q"\n'
                            'right_name = "e"\nright = [[1, 2]]\n'),
        ["key 'followup'", "only all_gather takes a followup"],
    ),
    "followup shapes incompatible": (
        scenario_text(
            top='collective = "all_gather"\nreduce_op = DELETE',
            extra='[followup]\nkind = "matmul"\nrank = 0\nname = "q"\nright_name = "e"\n'
            "right = [[1, 2, 3]]\n",
        ).replace('release = "Done."', 'release = "Done."\nfollowup = "Multiply."'),
        ["key 'followup.right'", "gathered buffer has 2 columns but e has 3"],
    ),
    "missing kind": (scenario_text(top="kind = DELETE"), ["key 'kind'", "missing (required: one of collective, desync"]),
    "blank narration": (
        scenario_text().replace('release = "Done."', 'release = "   "'),
        ["key 'narration.release'", "is empty"],
    ),
    "element name too long": (
        scenario_text(example='gpus = 2\nsource = "s"\ninputs = [[1, 2], [3, 4]]\nnames = ["A", "gradients"]'),
        ["key 'example[0].names[1]'", "9 characters; keep it to 8"],
    ),
    "element names miscounted": (
        scenario_text(example='gpus = 2\nsource = "s"\ninputs = [[1, 2], [3, 4]]\nnames = ["A"]'),
        ["key 'example[0].names'", "one name per element of a rank's input (2), got 1"],
    ),
    "followup kind": (
        scenario_text(
            top='collective = "all_gather"\nreduce_op = DELETE',
            extra='[followup]\nkind = "conv"\nrank = 0\nname = "q"\nright_name = "e"\n'
            "right = [[1, 2]]\n",
        ),
        ["key 'followup.kind'", "'conv' is not one of matmul"],
    ),
}


@pytest.mark.parametrize("text, expected", BROKEN.values(), ids=BROKEN.keys())
def test_broken_scenario_is_refused_with_a_clear_message(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert isinstance(caught.value, UsageError)
    assert message.startswith(f"{path}: ") and "\n" not in message
    for part in expected:
        assert part in message


@pytest.mark.parametrize("swap_line, got", [("", "nothing"), ('swap_with = "all_reduce"', "all_reduce, the collective itself")])
def test_a_desync_swap_needs_another_collective(tmp_path: Path, swap_line: str, got: str) -> None:
    desync = (builtin_scenario_dir() / "desync.toml").read_text()
    path = write(tmp_path, desync.replace('name = "desync"', 'name = "NAME"').replace('swap_with = "all_gather"', swap_line))
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value) == f"{path}: key 'swap_with': fault = \"swap\" needs another collective to call instead (got {got})"


def test_catalogue_is_large_enough() -> None:
    assert len(BROKEN) >= 15


def test_the_valid_template_loads(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, scenario_text(), name="mine"))
    assert scenario.name == "mine" and scenario.example_for(2).rank_input(1) == (3, 4)
    assert scenario.dtype == "float32" and scenario.root == 0 and scenario.followup is None


def test_missing_file_is_a_scenario_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="no such file"):
        load_scenario(tmp_path / "nowhere.toml")


def test_a_broken_file_in_a_listed_directory_is_not_skipped(tmp_path: Path) -> None:
    write(tmp_path, scenario_text(), name="good")
    write(tmp_path, scenario_text(top='reduce_op = "mean"'), name="bad")
    with pytest.raises(ScenarioError, match="bad.toml: key 'reduce_op'"):
        list_scenarios(tmp_path)


def test_scenario_error_survives_pickling() -> None:
    error = pickle.loads(pickle.dumps(ScenarioError("f.toml", "broken", key="root")))
    assert (str(error), error.key) == ("f.toml: key 'root': broken", "root")


# ------------------------------------------------------------------------------ find_scenario


def test_find_scenario_unknown_name_lists_known_and_suggests() -> None:
    with pytest.raises(UsageError) as caught:
        find_scenario("all-reduse")
    message = str(caught.value)
    assert message.startswith("unknown scenario 'all-reduse'")
    assert "did you mean 'all-reduce'?" in message
    assert "run 'collviz list' to see them" in message
    assert f"(known: {', '.join(s.name for s in list_scenarios())})" in message


def test_find_scenario_without_close_match_has_no_suggestion() -> None:
    with pytest.raises(UsageError) as caught:
        find_scenario("zzzzzz")
    assert "did you mean" not in str(caught.value)


def test_find_scenario_accepts_a_path(tmp_path: Path) -> None:
    path = write(tmp_path, scenario_text(), name="custom")
    assert find_scenario(str(path)).name == "custom"
    copy = find_scenario(str(builtin_scenario_dir() / "gather.toml"))
    assert copy.collective == "gather"
