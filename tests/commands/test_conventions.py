"""The command line behaves as its users' other tools do: unknown arguments are errors, a closed
pipe ends quietly, no terminal means headless, ``--json`` where a script wants it, a one-line
``--version``, shell completion, and the command table with nothing importing it back."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from collviz.app.cli import COMMANDS

from support.cli import run_cli
from support.paths import ROOT


def test_every_listed_command_has_its_own_module_with_a_parser_and_a_main():
    import importlib

    for command in COMMANDS:
        module = importlib.import_module(f"collviz.app.commands.{command.module}")
        assert callable(module.main) and callable(module.build_parser), command.name
        assert (ROOT / "app" / "commands" / f"{command.module}.py").is_file()


def _imports_cli(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name == "collviz.app.cli" for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.module == "collviz.app.cli" or (node.module == "collviz.app" and
                                                     any(alias.name == "cli" for alias in node.names))
    return False


def test_nothing_imports_the_dispatcher_back_not_even_inside_a_function():
    importers = [str(path.relative_to(ROOT)) for path in [*(ROOT / "app").rglob("*.py"), *(ROOT / "runtime").rglob("*.py")]
                 if any(_imports_cli(node) for node in ast.walk(ast.parse(path.read_text())))]
    assert importers == []


@pytest.mark.parametrize("argv", [["list", "--bogus"], ["list", "--json", "extra"], ["doctor", "--bogus"],
                                  ["completion", "tcsh"], ["replay"], ["export", "x.cvz"]])
def test_unknown_or_missing_arguments_are_one_line_and_exit_2(argv):
    result = run_cli(*argv)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("collviz: error: ") and result.stderr.count("\n") == 1


def test_a_closed_pipe_ends_quietly_with_status_0():
    shell = f"{sys.executable} -m collviz.app.cli --help | head -1; echo status ${{PIPESTATUS[0]}}"
    result = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=60)
    assert result.stdout.splitlines()[0].startswith("usage: collviz")
    assert result.stdout.splitlines()[-1] == "status 0"
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr


def test_version_is_one_line():
    import collviz

    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout == f"collviz {collviz.__version__}\n"


def test_without_a_terminal_a_run_goes_headless_says_so_and_ends_with_the_summary(tmp_path):
    out = tmp_path / "out.txt"
    with open(out, "w") as stdout:
        result = subprocess.run([sys.executable, "-m", "collviz.app.cli", "all-reduce", "--gpus", "2",
                                 "--backend", "gloo"], stdin=subprocess.DEVNULL, stdout=stdout,
                                stderr=subprocess.PIPE, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "stdin is not a terminal: running headless" in result.stderr
    assert out.read_text().rstrip().splitlines()[-1].startswith("result: ok")


def test_json_documents_for_list_and_a_headless_run():
    listed = json.loads(run_cli("list", "--json").stdout)
    assert {"all-reduce", "fsdp", "hang"} <= {entry["name"] for entry in listed}
    run = run_cli("all-reduce", "--gpus", "2", "--backend", "gloo", "--json")
    document = json.loads(run.stdout)
    assert document["format"] == "collviz-summary" and document["outcome"]["status"] == "ok"
    (call,) = [c for c in document["calls"] if c["op"] == "all_reduce"]
    assert call["group_ranks"] == [0, 1] and set(call["seconds"]) == {"0", "1"}
    assert call["slowest_seconds"] == max(call["seconds"].values())
    # nccl-tests: algbw = S / t, busbw = algbw × 2(n−1)/n = algbw at n = 2
    assert call["algbw"] == pytest.approx(call["algo_bytes"] / call["slowest_seconds"])
    assert call["busbw"] == pytest.approx(call["algbw"])


def test_compare_estimates_as_json_say_they_are_estimates():
    document = json.loads(run_cli("compare", "--params", "7e9", "--gpus", "8", "--json").stdout)
    assert document["estimates_only"] is True
    ddp, fsdp = document["per_rank"]
    assert ddp["bytes"] == 16 * 7e9 and fsdp["bytes"] == 16 * 7e9 / 8


def test_bash_completion_completes_commands_scenarios_options_and_values(tmp_path):
    script = tmp_path / "collviz.bash"
    script.write_text(run_cli("completion", "bash").stdout)

    def complete(*words: str) -> list[str]:
        line = " ".join(f'"{w}"' for w in ("collviz", *words))
        shell = f'source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words)}; _collviz; echo "${{COMPREPLY[@]}}"'
        return subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=30).stdout.split()

    assert complete("fs") == ["fsdp", "fsdp-tp"]
    assert "replay" in complete("") and "hang" in complete("")
    assert complete("all-reduce", "--alg") == ["--algo"]
    assert {"ring", "tree", "library"} <= set(complete("all-reduce", "--algo", ""))
    assert complete("lesson", "") == ["collectives", "fsdp"]
    assert complete("list", "--") == ["--help", "--json"]
    assert complete("all-reduce", "--backend", "") == ["auto", "nccl", "gloo"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_are_written(shell):
    result = run_cli("completion", shell)
    assert result.returncode == 0 and "collviz" in result.stdout
    assert ("bashcompinit" in result.stdout) if shell == "zsh" else ("complete -c collviz" in result.stdout)


def test_doctor_reports_versions_and_which_backend_runs_here():
    result = run_cli("doctor")
    assert result.returncode == 0
    assert result.stdout.startswith("collviz ") and "torch " in result.stdout
    assert "backend table (--backend auto takes the first row that applies): nccl" in result.stdout
    assert "  --gpus 4: " in result.stdout and "  --gpus 1: " in result.stdout


def test_schema_prints_the_json_schema_that_ships_beside_the_scenarios():
    shipped = json.loads((ROOT / "scenarios" / "collviz-scenario.schema.json").read_text())
    assert json.loads(run_cli("schema").stdout) == shipped
    lesson = json.loads((ROOT / "scenarios" / "collviz-lesson.schema.json").read_text())
    assert json.loads(run_cli("schema", "--lesson").stdout) == lesson


def test_a_browser_tab_is_a_screen_though_its_streams_are_pipes(monkeypatch):
    """textual-serve runs each tab's viewer with pipes for stdin and stdout and names its web
    driver in TEXTUAL_DRIVER: the viewer must not fall back to headless there."""
    from collviz.app.commands.options import no_terminal

    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    assert no_terminal() == "stdin is not a terminal"  # pytest's stdin is not a terminal
    monkeypatch.setenv("TEXTUAL_DRIVER", "textual.drivers.web_driver:WebDriver")
    assert no_terminal() is None
