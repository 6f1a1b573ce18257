"""Files handled as a recorder should: private traces and exports, nothing overwritten or
destroyed unless asked, atomic exports, and a full disk that stops the recording, not the run."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from collviz.app.cli import main
from collviz.runtime.errors import EXIT_RECORDING_INCOMPLETE
from collviz.runtime.wire.protocol import RunEnd
from collviz.runtime.wire.trace import TraceWriter, read_trace

from support.nodes import make_node
from support.paths import FIXTURES


FIXTURE = FIXTURES / "all-gather.cvz"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_trace_is_private_and_a_write_error_stops_only_the_recording(tmp_path):
    trace = TraceWriter(tmp_path / "t.cvz")
    trace.write([b"\x80"])  # a msgpack empty map: any payload is stored as given
    trace.close()
    assert _mode(tmp_path / "t.cvz") == 0o600
    full = TraceWriter(make_node(tmp_path / "full", "full").path)
    full.write([b"\x80", b"\x80"])
    full.close()
    assert full.error == "recording stopped at event 0: no space left on device"
    null = TraceWriter(make_node(tmp_path / "null", "null").path)
    null.write([b"\x80"])
    null.close()  # fsync on a device that cannot sync is not a failure
    assert null.error is None and null.events_written == 1


def test_export_is_private_atomic_and_never_overwrites_its_input(tmp_path, capsys):
    trace = shutil.copy(FIXTURE, tmp_path / "ag.cvz")
    before = Path(trace).read_bytes()
    assert main(["export", str(trace), "--perfetto", str(trace)]) == 2
    assert "that is the trace being read" in capsys.readouterr().err
    assert Path(trace).read_bytes() == before
    out = tmp_path / "ag.json"
    assert main(["export", str(trace), "--perfetto", str(out)]) == 0
    assert _mode(out) == 0o600 and out.read_text().startswith("{")
    assert main(["export", str(trace), "--perfetto", str(out)]) == 2
    assert "add --force" in capsys.readouterr().err
    assert main(["export", str(trace), "--perfetto", str(out), "--force"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ag.cvz", "ag.json"]  # no temporary left


NAME_MAX = os.pathconf("/", "PC_NAME_MAX")  # 255 bytes on Linux filesystems


@pytest.mark.parametrize("argv", [
    ["all-reduce", "--headless", "--record", "{long}.cvz"],
    ["bench", "--sizes", "1K:1K", "--record", "{long}.cvz"],
    ["export", str(FIXTURE), "--perfetto", "{long}.json"],
    ["export", str(FIXTURE), "--perfetto", "{long}/out.json"],
])
def test_a_file_name_longer_than_the_filesystem_allows_is_one_line(tmp_path, capsys, argv):
    argv = [arg.format(long=tmp_path / ("a" * (NAME_MAX + 45))) for arg in argv]
    longest = max(len(part) for part in Path(argv[-1]).parts)  # ASCII: one byte a character
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("collviz: error: --") and "Traceback" not in err
    assert f"cannot write there: file name too long ({longest} bytes in one name)" in err


def test_a_trace_writer_given_a_name_too_long_says_so_in_one_line(tmp_path):
    from collviz.runtime.errors import UsageError

    with pytest.raises(UsageError) as caught:
        TraceWriter(tmp_path / ("a" * (NAME_MAX + 1)))
    assert str(caught.value).endswith(": file name too long") and "\n" not in str(caught.value)


@pytest.mark.parametrize("command", [["all-reduce"], ["bench", "--sizes", "1K:1K"]])
def test_record_refuses_an_existing_file_without_force(tmp_path, capsys, command):
    existing = tmp_path / "t.cvz"
    existing.write_bytes(b"keep me")
    assert main([*command, "--gpus", "2", "--headless", "--record", str(existing)] if command[0] != "bench"
                else [*command, "--gpus", "2", "--record", str(existing)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the file exists" in err[0] and "--force" in err[0]
    assert existing.read_bytes() == b"keep me"


def test_recording_onto_a_full_disk_finishes_the_run_and_says_so(tmp_path):
    full = make_node(tmp_path / "full", "full")
    result = subprocess.run(
        [sys.executable, "-m", "collviz", "all-reduce", "--gpus", "2", "--backend", "gloo", "--headless",
         "--record", str(full.path)], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert full.survived()
    assert result.returncode == EXIT_RECORDING_INCOMPLETE, result.stderr
    assert "result: ok" in result.stdout
    assert "collviz: recording stopped at event 0: no space left on device; the run itself went on" in result.stderr
    assert "Traceback" not in result.stderr


def test_record_to_a_null_device_is_a_clean_run(tmp_path):
    null = make_node(tmp_path / "null", "null")
    result = subprocess.run(
        [sys.executable, "-m", "collviz", "all-reduce", "--gpus", "2", "--backend", "gloo", "--headless",
         "--record", str(null.path)], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    assert f"trace written to {null.path}" in result.stderr
    assert null.survived() and sorted(tmp_path.iterdir()) == [null.path]  # no index beside a device


def test_force_overwrites_and_the_new_trace_is_private(tmp_path):
    existing = tmp_path / "t.cvz"
    existing.write_bytes(b"old")
    existing.chmod(0o644)
    result = subprocess.run(
        [sys.executable, "-m", "collviz", "all-reduce", "--gpus", "2", "--backend", "gloo", "--headless",
         "--record", str(existing), "--force"], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    assert isinstance(read_trace(existing).events[-1], RunEnd)
    assert _mode(existing) == 0o600


def test_run_folders_of_killed_launchers_are_removed_and_kept_ones_stay(tmp_path):
    from collviz.runtime.sessions.local import LAUNCHER_PID_FILE, RUN_FOLDER_PREFIX, remove_stale_run_folders

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / f"{RUN_FOLDER_PREFIX}killed"
    live = tmp_path / f"{RUN_FOLDER_PREFIX}running"
    kept = tmp_path / f"{RUN_FOLDER_PREFIX}failed-run-logs"
    for folder in (left, live, kept):
        folder.mkdir()
    (left / LAUNCHER_PID_FILE).write_text(dead.stdout.strip())
    (live / LAUNCHER_PID_FILE).write_text(str(os.getpid()))
    assert remove_stale_run_folders(tmp_path) == [str(left)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, kept.name])
