"""The training scenarios' command line and scenario files: options that do not apply, compare's
estimates, and file errors, each a one-line message. Nothing here launches ranks."""

from __future__ import annotations

import re

import pytest

from collviz.app.cli import main
from collviz.runtime.scenario_files.loading import ScenarioError, load_scenario
from collviz.runtime.programs.program import RunOptions
from collviz.runtime.programs.training.ring import build

from support.paths import SCENARIOS


@pytest.mark.parametrize("argv, words", [
    (["fsdp", "--root", "1"], "--root does not apply to fsdp"),
    (["tp", "--prefetch"], "--prefetch/--no-prefetch does not apply to tp"),
    (["all-reduce", "--no-reshard-after-forward"], "does not apply to all-reduce"),
    (["ring-all-reduce", "--size", "6"], "multiple of 4"),
    (["ring-all-reduce", "--gpus", "3", "--size", "32"], "multiple of 3 × 4 B"),
    (["compare", "ddp", "tp"], "compare runs ddp, fsdp, hsdp, fsdp-tp, pp scenarios, not tp"),
    (["compare"], "two scenarios"),
])
def test_options_that_do_not_apply_are_one_line_errors(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("collviz: error: ") and words in err and err.count("\n") == 1


def test_compare_estimates_show_formula_and_numbers(capsys):
    assert main(["compare", "--params", "7e9", "--gpus", "8"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ESTIMATES (analytic, nothing was run)")
    assert f"({16 * 7 * 10**9:,} B)   = 16·P = 16 × 7e+09 B" in out
    assert f"({16 * 7 * 10**9 // 8:,} B)   = 16·P/N = 16 × 7e+09 / 8 B" in out
    assert "DDP / FSDP ≈ 8.00" in out


def test_training_scenario_errors_name_file_key_and_problem(tmp_path):
    text = (SCENARIOS / "tp.toml").read_text()
    bad = tmp_path / "tp.toml"
    bad.write_text(text.replace("d_model = 8", "d_modle = 8"))
    with pytest.raises(ScenarioError, match=r"tp.toml: key 'settings.d_modle': unknown key \(probably a typo for 'd_model'\)"):
        load_scenario(bad)
    bad.write_text(re.sub(r'^fc1 = ".*"$', 'fc1 = "uses {nothing}"', text, flags=re.M))
    with pytest.raises(ScenarioError, match=r"key 'narration.fc1': unknown placeholder \{nothing\}"):
        load_scenario(bad)
    bad.write_text(text.replace("hidden = 16", "hidden = 0"))
    with pytest.raises(ScenarioError, match=r"key 'settings.hidden': 0 is less than 1"):
        load_scenario(bad)


@pytest.mark.parametrize("world_size, count", [(2, 8), (3, 9), (4, 8), (5, 10), (16, 16), (64, 64)])
def test_the_ring_default_count_rounds_up_to_one_chunk_per_rank(world_size, count):
    program = build(load_scenario(SCENARIOS / "ring-all-reduce.toml"), world_size, RunOptions())
    assert (program.count, program.chunk) == (count, count // world_size)
