"""Lessons and a teacher's notes: validated files, notes in the narration, the lesson command."""

from __future__ import annotations

import subprocess
import sys

import pytest

from collviz.app.cli import main
from collviz.runtime.errors import UsageError
from collviz.runtime.scenario_files.lessons import find_lesson, list_lessons, load_lesson
from collviz.runtime.scenario_files.loading import find_scenario
from collviz.runtime.scenario_files.notes import parse_notes, with_notes
from collviz.runtime.wire.protocol import NOTE_MARK

MARKDOWN = """# anything before the first scenario is a title
## all-gather
### setup
Ask: how much of {W_query} does each rank hold?
Then step.
### release
Memory drops.
## reduce
### setup
Predict the root.
"""


def test_markdown_and_toml_notes_read_the_same():
    from_md = parse_notes(MARKDOWN, "n.md", markdown=True)
    assert from_md == {"all-gather": {"setup": "Ask: how much of {W_query} does each rank hold?\nThen step.",
                                      "release": "Memory drops."},
                       "reduce": {"setup": "Predict the root."}}
    toml = '[all-gather]\nsetup = "Ask first"\n'
    assert parse_notes(toml, "n.toml", markdown=False) == {"all-gather": {"setup": "Ask first"}}


def test_notes_join_the_narration_and_keep_braces_literal():
    scenario = find_scenario("all-gather")
    noted = with_notes(scenario, {"setup": "How much of {W_query}?"}, "n.md")
    assert noted.narration["setup"].startswith(scenario.narration["setup"])
    assert noted.narration["setup"].endswith(f"\n\n{NOTE_MARK}How much of {{{{W_query}}}}?")
    assert noted.narration["setup"].format(**{k: 1 for k in ("world_size", "count", "dtype", "bytes")}).endswith(
        "How much of {W_query}?")
    assert noted.narration["collective"] == scenario.narration["collective"]


def test_a_note_for_a_phase_the_scenario_lacks_is_one_line_naming_it():
    with pytest.raises(UsageError, match=r"n.md: all-gather has no phase 'colective' \(its phases: setup, collective"):
        with_notes(find_scenario("all-gather"), {"colective": "x"}, "n.md")


def test_a_note_for_one_unit_follows_the_phase_keys_own_note_in_that_units_phase_only():
    import torch

    from collviz.runtime.context import RankContext
    from collviz.runtime.observation.memory import StorageTracker
    from collviz.runtime.wire.protocol import Phase

    scenario = find_scenario("fsdp")
    noted = with_notes(scenario, {"block0.forward_all_gather": "Only block 0", "forward_all_gather": "Every unit"}, "n.md")
    base = scenario.narration["forward_all_gather"]
    assert noted.narration["forward_all_gather"] == f"{base}\n\n{NOTE_MARK}Every unit"
    assert noted.narration["block0.forward_all_gather"] == f"{base}\n\n{NOTE_MARK}Every unit\n\n{NOTE_MARK}Only block 0"

    class Emitted:
        def __init__(self):
            self.events = []

        def emit(self, kind, **fields):
            self.events.append((kind, fields))

    emitted = Emitted()
    ctx = RankContext(rank=0, world_size=1, backend="gloo", device=torch.device("cpu"), emitter=emitted,
                      tracker=StorageTracker(torch.device("cpu")), narration=noted.narration,
                      narration_values={"world_size": 4, "shard_bytes": "1 KiB", "param_bytes": "4 KiB", "params": "1",
                                        "units": 6, "blocks": 4, "prefetch": "off", "reshard": "on", "timed_steps": 3,
                                        "replicas": 1, "shards": 4, "tp": 1})
    for unit in ("block0", "block1"):
        with ctx.phase("forward_all_gather", f"{unit} forward: all-gather", unit=unit):
            pass
    texts = [fields["narration"] for kind, fields in emitted.events if kind is Phase and fields["edge"] == "begin"]
    assert texts[0].endswith("Only block 0") and "Every unit" in texts[0]
    assert texts[1].endswith("Every unit") and "Only block 0" not in texts[1]
    with pytest.raises(UsageError, match=r"has no phase 'block9.forward_all_gather' .*UNIT one of embed, block0, block1"):
        with_notes(scenario, {"block9.forward_all_gather": "x"}, "n.md")
    with pytest.raises(UsageError, match=r"all-gather has no phase 'block0.setup'"):
        with_notes(find_scenario("all-gather"), {"block0.setup": "x"}, "n.md")


def test_markdown_phase_before_any_scenario_is_refused():
    with pytest.raises(UsageError, match="line 1: phase 'setup' comes before any '## scenario' heading"):
        parse_notes("### setup\nx\n", "n.md", markdown=True)


def test_shipped_lessons_load_and_name_real_scenarios():
    lessons = {lesson.name: lesson for lesson in list_lessons()}
    assert set(lessons) >= {"collectives", "fsdp"}
    assert [i.scenario for i in lessons["collectives"].items] == [
        "broadcast", "reduce", "all-reduce", "gather", "all-gather", "scatter", "reduce-scatter", "all-to-all"]
    fsdp = lessons["fsdp"].items
    assert [i.scenario for i in fsdp[:5]] == ["all-gather", "reduce-scatter", "ring-all-reduce", "ddp", "fsdp"]
    assert fsdp[5].compare == ("ddp", "fsdp")


@pytest.mark.parametrize("body,needle", [
    ('name = "bad"\ntitle = "t"\ndescription = "d"\n', "at least one [[item]]"),
    ('name = "bad"\ntitle = "t"\ndescription = "d"\n[[item]]\nscenario = "nope"\n', "unknown scenario 'nope'"),
    ('name = "bad"\ntitle = "t"\ndescription = "d"\n[[item]]\nscenario = "reduce"\nnotes = { sertup = "x" }\n',
     "reduce has no phase 'sertup'"),
    ('name = "bad"\ntitle = "t"\ndescription = "d"\n[[item]]\n', "give either scenario = NAME or compare = [A, B]"),
    ('name = "other"\ntitle = "t"\ndescription = "d"\n[[item]]\nscenario = "reduce"\n', "must equal the file name"),
    ('name = "bad"\ntitle = "t"\ndescription = "d"\n[[item]]\nscenario = "reduce"\nnotes = { setup = "x", collective = 3 }\n',
     "key 'item[0].notes.collective': expected a string, got an integer (3)"),
    ('name = "bad"\ntitle = "t"\ndescription = "d"\n[[item]]\ncompare = ["ddp"]\n',
     "key 'item[0].compare': expected two scenario names, got a list of 1"),
    ('name = "bad"\ntitle = "t"\ndescription = "d"\n[[item]]\nscenaro = "reduce"\n',
     "key 'item[0].scenaro': unknown key (probably a typo for 'scenario')"),
])
def test_a_broken_lesson_is_one_line_naming_file_and_key(tmp_path, body, needle):
    path = tmp_path / "bad.toml"
    path.write_text(body)
    with pytest.raises(UsageError) as error:
        load_lesson(path)
    assert needle in str(error.value) and str(error.value).startswith("bad.toml: ") and "\n" not in str(error.value)


def test_lesson_list_and_unknown_lesson(capsys):
    assert main(["lesson", "--list"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("collectives ") and "\nfsdp " in out
    assert main(["lesson", "nope"]) == 2
    assert "unknown lesson 'nope'" in capsys.readouterr().err
    with pytest.raises(UsageError, match="unknown lesson"):
        find_lesson("nope")


def test_a_run_with_notes_prints_them_under_their_phases(tmp_path):
    notes = tmp_path / "class.md"
    notes.write_text(MARKDOWN)
    result = subprocess.run([sys.executable, "-m", "collviz", "all-gather", "--gpus", "4", "--backend", "gloo",
                             "--headless", "--notes", str(notes)], capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    setup = next(i for i, line in enumerate(lines) if line.startswith("phase 0  setup"))
    assert lines[setup + 1] == f"  {NOTE_MARK}Ask: how much of {{W_query}} does each rank hold?\nThen step.".split("\n")[0]
    release = next(i for i, line in enumerate(lines) if line.startswith("phase 3  release"))
    assert lines[release + 1] == f"  {NOTE_MARK}Memory drops."


def test_a_teachers_notes_are_pinned_above_the_scenarios_text():
    from collviz.app.widgets.narration import narration_text

    scenario = find_scenario("all-gather")
    noted = with_notes(scenario, {"setup": "Ask: who holds row 3?"}, "n.md").narration["setup"]
    shown = narration_text(noted).plain
    assert shown.startswith(f"{NOTE_MARK.strip()} Ask: who holds row 3?\n\n")
    assert shown.endswith(scenario.narration["setup"])
