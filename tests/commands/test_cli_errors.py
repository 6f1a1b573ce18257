"""Bad input: one line on stderr, exit status 2, never a traceback."""

from __future__ import annotations


import pytest

from collviz.app.cli import main
from collviz.runtime.wire.protocol import version_text
from collviz.runtime.wire.trace import TRACE_MAGIC

from support.cli import run_cli
from support.cli import run_main
from support.paths import SCENARIOS


def _trace_with_version(path, major: int, minor: int) -> None:
    import msgspec

    header = msgspec.msgpack.encode({"format": "collviz-trace", "version": [major, minor]})
    path.write_bytes(TRACE_MAGIC + len(header).to_bytes(4, "little") + header)


CASES = [
    ("gpus zero", ["all-reduce", "--gpus", "0", "--headless"], "--gpus 0"),
    ("gpus negative", ["all-reduce", "--gpus", "-1", "--headless"], "--gpus -1"),
    ("gpus too many", ["all-reduce", "--gpus", "1000", "--headless"], "--gpus 1000"),
    ("gpus not a number", ["all-reduce", "--gpus", "four", "--headless"], "invalid int value"),
    ("unknown scenario", ["all-reduse", "--headless"], "unknown scenario 'all-reduse'"),
    ("nccl without gpu", ["all-reduce", "--gpus", "2", "--backend", "nccl", "--headless"], "--backend nccl needs a GPU, but none is visible"),
    ("op on non-reducing", ["all-gather", "--op", "max", "--headless"], "all_gather has no reduce op"),
    ("avg on integers", ["all-reduce", "--op", "avg", "--dtype", "int32", "--headless"], "--op avg needs a floating-point dtype"),
    ("bad size", ["all-reduce", "--size", "lots", "--headless"], "--size 'lots'"),
    ("size not divisible", ["reduce-scatter", "--size", "20", "--headless"], "multiple of 4"),
    ("root out of range", ["broadcast", "--gpus", "3", "--root", "5", "--headless"], "--root 5"),
    ("record into missing folder", ["all-reduce", "--headless", "--record", "/nonexistent/t.cvz"], "does not exist"),
    ("memory snapshot on CPU", ["all-gather", "--headless", "--memory-viz", "/nonexistent/mv"],
     "a CUDA memory snapshot records the CUDA caching allocator, and this run is on CPU (gloo)"),
    ("missing trace", ["replay", "/nonexistent/t.cvz", "--headless"], "does not exist"),
    ("unknown option", ["all-reduce", "--gpu", "4"], "unrecognized arguments"),
    ("zero timeout", ["all-reduce", "--timeout", "0", "--headless"], "--timeout 0"),
    ("zero iterations", ["all-reduce", "--iters", "0", "--headless"], "--iters 0"),
    ("step without viewer", ["all-reduce", "--step", "--headless"], "--step needs the viewer"),
    ("root without one", ["all-reduce", "--root", "1", "--headless"], "all_reduce has no root"),
    ("unknown dtype", ["all-reduce", "--dtype", "float8", "--headless"], "invalid choice: 'float8'"),
    ("options the desync takes not", ["desync", "--op", "max", "--headless"], "desync takes no --op"),
    ("odd rank missing", ["desync", "--gpus", "2", "--headless"], "run it with --gpus > 2"),
    ("replay a folder", ["replay", "/", "--headless"], "/: nothing to open"),
    ("listen without port", ["view", "--listen", "localhost", "--headless"], "expected HOST:PORT"),
    ("worker outside torchrun", ["worker", "all-reduce", "--viewer", "tcp://127.0.0.1:5555"], "runs under torchrun"),
    ("command where a scenario goes", ["--gpus", "4"], "expected a scenario name"),
    ("absurd size", ["all-reduce", "--size", "99999999999999999999999GiB", "--headless"], "must be between 1 B and 1 TiB"),
    ("absurd iterations", ["all-reduce", "--iters", "10000000000000000000000", "--headless"], "between 1 and 100,000"),
    ("nan timeout", ["all-reduce", "--timeout", "nan", "--headless"], "--timeout nan"),
    ("infinite timeout", ["all-reduce", "--timeout", "inf", "--headless"], "--timeout inf"),
    ("tiny timeout", ["all-reduce", "--timeout", "1e-9", "--headless"], "between 1 and 86400"),
    ("more memory than the machine", ["all-gather", "--size", "512GiB", "--gpus", "64", "--headless"], "is available"),
    ("bench beyond memory", ["bench", "--sizes", "1K:512G", "--gpus", "64"], "is available"),
    ("bench zero warmup ok, negative not", ["bench", "--warmup", "-1"], "--warmup -1"),
    ("compare nan params", ["compare", "--params", "nan"], "positive, finite"),
    ("compare infinite params", ["compare", "--params", "inf"], "positive, finite"),
    ("scenario is a device", ["/dev/zero", "--headless"], "not a regular file"),
    ("secret file is a device", ["view", "--listen", "127.0.0.1:5999", "--secret-file", "/dev/zero", "--headless"],
     "not a regular file"),
    # a name no file can have (a NUL byte, a lone surrogate): refused by the parser of every command taking a path
    ("trace named with a NUL", ["replay", "\x00"], "argument PATH: '\\x00' cannot name a file: it holds a NUL byte"),
    ("artifact named with a NUL", ["export", "a\x00.cvz", "--perfetto", "out.json"], "argument PATH: 'a\\x00.cvz'"),
    ("export to a NUL", ["export", "t.cvz", "--perfetto", "\x00"], "argument --perfetto: '\\x00' cannot name"),
    ("script named with a NUL", ["run", "--nproc", "2", "x\x00.py"], "argument SCRIPT.py: 'x\\x00.py' cannot name"),
    ("first word a script with a NUL", ["x\x00.py"], "argument SCRIPT.py: 'x\\x00.py' cannot name"),
    ("record to a NUL", ["all-reduce", "--record", "\x00"], "argument --record: '\\x00' cannot name"),
    ("notes named with a NUL", ["all-reduce", "--notes", "\x00"], "argument --notes: '\\x00' cannot name"),
    ("lesson traces in a NUL", ["lesson", "collectives", "--traces", "\x00"], "argument --traces: '\\x00' cannot"),
    ("serve a NUL", ["serve", "a\x00.cvz"], "argument TARGET: 'a\\x00.cvz' cannot name a file: it holds a NUL"),
    ("secret file named with a NUL", ["view", "--listen", "127.0.0.1:5999", "--secret-file", "\x00"],
     "argument --secret-file: '\\x00' cannot name"),
    ("trace named with a lone surrogate", ["replay", "\ud800"], "'\\ud800' cannot name a file: it cannot be encoded"),
]


@pytest.mark.parametrize("label,args,needle", CASES, ids=[c[0] for c in CASES])
def test_bad_arguments(capsys, label, args, needle):
    status, err = run_main(capsys, *args)
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("collviz: error: ") and needle in lines[0], lines[0]


def test_console_script_error_is_one_line_without_traceback():
    result = run_cli("all-reduce", "--gpus", "0", timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == "collviz: error: --gpus 0: must be between 1 and 64 (one process per rank on this machine)"


def test_malformed_scenario_file(capsys, tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text('name = "broken"\ndescription = "x"\nkind = "collective"\ncollective = "all_reduce"\n'
                    'default_gpus = 2\nreduce_op = "mean"\nbuffer_name = "g"\n')
    status, err = run_main(capsys, str(path), "--headless")
    assert status == 2
    line = err.strip()
    assert "\n" not in line and "broken.toml" in line and "reduce_op" in line and "mean" in line


@pytest.mark.parametrize("kind", ["truncated header", "future version", "not a trace", "corrupt record"])
def test_bad_trace_files(capsys, tmp_path, kind):
    path = tmp_path / "t.cvz"
    if kind == "truncated header":
        path.write_bytes(TRACE_MAGIC + b"\x40\x00")
        needle = "truncated"
    elif kind == "future version":
        _trace_with_version(path, 99, 1)
        needle = "99.1"
    elif kind == "not a trace":
        path.write_text("hello")
        needle = "not a collviz trace"
    else:
        _trace_with_version(path, 1, 0)
        with path.open("ab") as f:
            f.write((5).to_bytes(4, "little") + b"\xc1\xc1\xc1\xc1\xc1")
        needle = "no intact event in it"
    status, err = run_main(capsys, "replay", str(path), "--headless")
    assert status == 2, err
    assert len(err.strip().splitlines()) == 1 and needle in err
    if kind == "future version":
        assert version_text() in err  # both versions are named


def test_scenario_file_that_is_a_fifo_or_nested_too_deeply(capsys, tmp_path):
    import os

    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    status, err = run_main(capsys, str(fifo), "--headless")
    assert status == 2 and "not a regular file" in err
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    status, err = run_main(capsys, str(deep), "--headless")
    assert status == 2 and err.strip().endswith("invalid TOML (nested too deeply)")


@pytest.mark.parametrize("name", ["reduce", "all-gather", "fsdp", "tp"])
def test_help_is_written_for_the_scenario_with_its_real_defaults(name, capsys):
    """Defaults are read here from the scenario file itself; options a scenario does not take are hidden."""
    import tomllib

    data = tomllib.loads((SCENARIOS / f"{name}.toml").read_text())
    with pytest.raises(SystemExit) as stop:
        main([name, "--help"])
    assert stop.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    options = text.split("examples:")[0]
    assert data["description"] in text and f"(default {data['default_gpus']})" in text
    if data.get("kind", "collective") == "collective":
        assert f"element type (default {data.get('dtype', 'float32')})" in text
        assert ("--prefetch" in options) is False
    else:
        assert "--dtype" not in options and "--size" not in options
        settings = ", ".join(f"{key} {value}" for key, value in data["settings"].items())
        assert settings in text
        assert ("--prefetch" in options) == (name == "fsdp")


def test_view_help_describes_the_listener_not_the_worker(capsys):
    """``collviz view --help`` says what the listener binds, whom it accepts and when it ends; the
    worker's own help (torchrun's entry point) is not repeated there."""
    with pytest.raises(SystemExit) as stop:
        main(["view", "--help"])
    assert stop.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Listens on HOST:PORT (and PORT+1) for the events of ranks that torchrun starts elsewhere" in text
    assert "accepts only events signed with the shared secret" in text and "ends when every rank has reported" in text
    assert "Runs as torchrun's entry point" not in text
