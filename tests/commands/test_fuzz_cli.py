"""The command line under hypothesis: any argument list ends in an exit status (2 with one line
for bad input), never a traceback. Nothing is launched: a command that gets as far as starting
workers or opening the viewer raises :class:`Launched` instead, which counts as accepted input.
Paths given are private device nodes and names in a temporary folder (the working directory), never
the machine's own /dev/null or /dev/zero: a value may land in an output option."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from collviz.app import cli

from support.hypothesis_profiles import examples
from support.nodes import make_node


COMMANDS = ["all-reduce", "all-gather", "reduce-scatter", "broadcast", "fsdp", "ddp", "tp", "desync", "bench",
            "compare", "replay", "export", "view", "worker", "list", "run", "lesson", "--version", "--help",
            "ring-all-reduce", "nope"]
OPTIONS = ["--gpus", "--size", "--iters", "--timeout", "--dtype", "--op", "--root", "--record", "--force", "--headless",
           "--step", "--backend", "--sizes", "--warmup", "--params", "--perfetto", "--listen", "--secret-file",
           "--prefetch", "--no-prefetch", "--json", "--explain", "--viewer", "-b", "-e", "-f", "-g"]
VALUES = ["0", "-1", "4", "64", "1000", "nan", "inf", "-inf", "1e-9", "1e308", "99999999999999999999999GiB", "16MiB",
          "1K:16M", "8:4", "128M", "1.5k", "float8", "int8", "sum", "avg", "gloo", "nccl", "{zero}", "{null}",
          "/nonexistent/x", "[bold]x[/]", "127.0.0.1:0", "[::1]:5555", "tcp://127.0.0.1:1", "", " ", "é", "\x00", "x.py"]


NODES = ("zero", "null")
"""Private device nodes the values ``{zero}`` and ``{null}`` stand for."""


class Launched(Exception):
    """The input was accepted all the way to starting processes."""


@pytest.fixture
def no_launch(monkeypatch):
    def launched(*args, **kwargs):
        raise Launched

    from collviz.app import app
    from collviz.runtime.sessions import listening, local

    monkeypatch.setattr(local.LocalSession, "start", launched)
    monkeypatch.setattr(listening.RemoteSession, "start", launched)
    monkeypatch.setattr(app, "run_viewer", launched)


@pytest.fixture
def private_folder(tmp_path, monkeypatch) -> dict[str, str]:
    """A temporary working directory holding private ``zero`` and ``null`` device nodes: what the
    ``{zero}`` and ``{null}`` values become."""
    monkeypatch.chdir(tmp_path)
    return {kind: str(make_node(tmp_path / kind, kind).path) for kind in NODES}


@settings(max_examples=examples(400), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(COMMANDS),
       st.lists(st.one_of(st.sampled_from(OPTIONS), st.sampled_from(VALUES), st.text(max_size=12)), max_size=6))
@example("replay", ["\x00"])  # a path no file can have: os.open's ValueError was a traceback (issue 38)
def test_any_command_line_ends_in_an_exit_status(no_launch, private_folder, capsys, command, rest):
    rest = [arg.format_map(private_folder) if arg in ("{zero}", "{null}") else arg for arg in rest]
    try:
        status = cli.main([command, *rest])
    except Launched:
        return
    except SystemExit as exit_:  # argparse's own --help
        status = exit_.code
    err = capsys.readouterr().err
    assert status in (0, 1, 2), (status, err)
    if status == 2:
        errors = [line for line in err.splitlines() if line.startswith("collviz: error: ")]
        assert len(errors) == 1, err
