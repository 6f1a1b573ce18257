"""Scenario and lesson files as typed documents: the JSON Schema is shipped equal to what the code
emits and usable by an editor's validator (jsonschema, an implementation independent of msgspec):
every shipped file passes it, and the mistakes collviz refuses by type are flagged by it too. And
damaged tables never get past the message layer as anything but one ScenarioError line."""

from __future__ import annotations

import tomllib

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collviz.runtime.scenario_files.decoding import decode_document
from collviz.runtime.scenario_files.documents import (
    KINDS,
    SCHEMA_FILES,
    ScenarioDocument,
    lesson_json_schema,
    scenario_json_schema,
    schema_text,
)
from collviz.runtime.scenario_files.kinds import scenario_from
from collviz.runtime.scenario_files.schema import ScenarioError
from collviz.runtime.scenario_files.lessons import lessons_dir
from collviz.runtime.scenario_files.loading import builtin_scenario_dir

from support.hypothesis_profiles import examples

REGENERATE = ("regenerate it: python -c 'from pathlib import Path; from collviz.runtime.scenario_files.documents import "
              "SCHEMA_FILES, schema_text; [Path(\"scenarios\", n).write_text(schema_text(f())) for n, f in "
              "SCHEMA_FILES.items()]'")


@pytest.mark.parametrize("name", sorted(SCHEMA_FILES))
def test_shipped_schema_is_what_the_code_emits(name):
    shipped = (builtin_scenario_dir() / name).read_text(encoding="utf-8")
    assert shipped == schema_text(SCHEMA_FILES[name]()), f"scenarios/{name} is stale; {REGENERATE}"


def validator(schema: dict) -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_schema_names_every_kind_and_the_draft():
    schema = scenario_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(schema["discriminator"]["mapping"]) == set(KINDS)
    assert set(KINDS) >= {"collective", "desync", "ddp", "fsdp", "tp"}


def test_every_shipped_scenario_and_lesson_passes_the_schema():
    scenarios, lessons = validator(scenario_json_schema()), validator(lesson_json_schema())
    files = sorted(builtin_scenario_dir().glob("*.toml"))
    assert len(files) >= 17
    for path in files:
        errors = [e.message for e in scenarios.iter_errors(tomllib.loads(path.read_text()))]
        assert not errors, (path.name, errors)
    for path in sorted(lessons_dir().glob("*.toml")):
        errors = [e.message for e in lessons.iter_errors(tomllib.loads(path.read_text()))]
        assert not errors, (path.name, errors)


@pytest.mark.parametrize("change", [
    lambda d: d.update(reduceop="sum"),  # a typo of a key
    lambda d: d.update(default_gpus="4"),  # a string for a number
    lambda d: d.update(default_gpus=0),  # below the minimum
    lambda d: d.update(collective="allreduce"),  # not a collective
    lambda d: d.update(description="two\nlines"),
    lambda d: d["narration"].pop("release"),
    lambda d: d["narration"].update(setup="x" * 401),
    lambda d: d["example"][0].update(inputs=[[1, "2"], [3, 4], [5, 6], [7, 8]]),
], ids=["typo", "string", "minimum", "collective", "two lines", "missing narration", "long narration", "input"])
def test_what_collviz_refuses_by_type_the_schema_flags(change):
    data = tomllib.loads((builtin_scenario_dir() / "reduce.toml").read_text())
    assert not list(validator(scenario_json_schema()).iter_errors(data))
    change(data)
    assert list(validator(scenario_json_schema()).iter_errors(data))


def test_a_training_settings_typo_is_flagged():
    data = tomllib.loads((builtin_scenario_dir() / "tp.toml").read_text())
    data["settings"]["d_modle"] = data["settings"].pop("d_model")
    assert list(validator(scenario_json_schema()).iter_errors(data))


TOML_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
).filter(lambda v: v is not None)


def _places(data, path=()):
    """Every (path, value) of a nested dict/list."""
    yield path, data
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        yield from _places(value, (*path, key))


@settings(max_examples=examples(300))
@given(name=st.sampled_from(["all-gather", "reduce", "desync", "ddp", "tp"]), data=st.data())
def test_a_damaged_scenario_table_loads_or_fails_in_one_line(name, data):
    """Any value at any place, a key removed or a key added: a Scenario or one ScenarioError line,
    never another exception (the message layer reads msgspec's errors and must not trip on them)."""
    table = tomllib.loads((builtin_scenario_dir() / f"{name}.toml").read_text())
    for _ in range(data.draw(st.integers(1, 3))):
        path, target = data.draw(st.sampled_from([p for p in _places(table) if isinstance(p[1], (dict, list)) and p[1]]))
        key = data.draw(st.sampled_from(sorted(target) if isinstance(target, dict) else range(len(target))))
        action = data.draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            target[key] = data.draw(TOML_VALUES)
        elif action == "delete":
            del target[key]
        elif isinstance(target, dict):
            target[data.draw(st.text(max_size=8))] = data.draw(TOML_VALUES)
    try:
        scenario_from(decode_document(table, ScenarioDocument, "f.toml"), builtin_scenario_dir() / f"{name}.toml", "f.toml")
    except ScenarioError as error:
        assert str(error).startswith("f.toml: ") and "\n" not in str(error), str(error)
