"""Outputs never harm what they point at (``runtime/wire/files.py``'s rule): a device, a FIFO and a
symbolic link given as any output path (a Perfetto export, a ``--record`` trace and its index,
compare's traces, a memory snapshot, a screenshot) are still what they were afterwards and get
the output written through them; a full device fails in one line; ``-`` is stdout for an export
and refused where it makes no sense. Every node is a private one in the test's folder
(:mod:`support.nodes`), never the machine's own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from collviz.app.cli import main
from collviz.runtime.errors import EXIT_RECORDING_INCOMPLETE, UsageError
from collviz.runtime.wire.files import write_output
from collviz.runtime.wire.protocol import encode
from collviz.runtime.wire.sidecar import index_path
from collviz.runtime.wire.trace import TraceWriter, read_trace

from support.nodes import KINDS, make_node
from support.paths import FIXTURES
from support.synthetic import all_gather_events


FIXTURE = FIXTURES / "all-gather.cvz"
WRITTEN_THROUGH = ("fifo", "symlink")
"""The kinds whose writes can be read back (the null device keeps nothing, the full one refuses)."""


def _leftovers(folder: Path, *expected: Path) -> list[str]:
    """Names in ``folder`` other than ``expected`` (and a symlink's target): temporaries left behind."""
    keep = {path.name for path in expected} | {f"{path.name}.target" for path in expected}
    return sorted(path.name for path in folder.iterdir() if path.name not in keep)


@pytest.mark.parametrize("kind", KINDS)
def test_write_output_writes_through_each_node_and_leaves_it_as_it_was(tmp_path, kind):
    node = make_node(tmp_path / "out", kind)
    if kind == "full":
        with pytest.raises(UsageError) as caught:
            write_output(node.path, [b"ab", b"c"], "--out")
        assert str(caught.value) == f"--out {node.path}: cannot write (no space left on device)"
    else:
        write_output(node.path, [b"ab", b"c"], "--out")
    assert node.survived()
    assert node.received() == (b"abc" if kind in WRITTEN_THROUGH else b"")
    assert _leftovers(tmp_path, node.path) == []


def test_a_link_to_a_regular_file_keeps_the_file_and_a_plain_file_is_replaced_whole(tmp_path):
    target = tmp_path / "kept.json"
    target.write_bytes(b"old contents, longer than the new")
    (tmp_path / "link.json").symlink_to(target.name)
    inode = target.stat().st_ino
    write_output(tmp_path / "link.json", [b"new"], "--out")
    assert (tmp_path / "link.json").is_symlink() and target.stat().st_ino == inode
    assert target.read_bytes() == b"new"
    write_output(target, [b"newer"], "--out")  # a regular file itself: a new file renamed over it
    assert target.read_bytes() == b"newer" and target.stat().st_ino != inode
    assert _leftovers(tmp_path, target, tmp_path / "link.json") == []


@pytest.mark.parametrize("kind", KINDS)
def test_export_to_each_node(tmp_path, capsys, kind):
    assert main(["export", str(FIXTURE), "--perfetto", str(tmp_path / "plain.json")]) == 0
    expected = (tmp_path / "plain.json").read_bytes()
    capsys.readouterr()
    node = make_node(tmp_path / "out.json", kind)
    status = main(["export", str(FIXTURE), "--perfetto", str(node.path)])
    err = capsys.readouterr().err
    assert node.survived()
    if kind == "full":
        assert (status, err) == (2, f"collviz: error: --perfetto {node.path}: cannot write (no space left on device)\n")
    else:
        assert status == 0, err
        assert node.received() == (expected if kind in WRITTEN_THROUGH else b"")


def test_export_through_a_link_to_an_existing_file_needs_force(tmp_path, capsys):
    (tmp_path / "old.json").write_bytes(b"keep")
    (tmp_path / "link.json").symlink_to("old.json")
    assert main(["export", str(FIXTURE), "--perfetto", str(tmp_path / "link.json")]) == 2
    assert "add --force" in capsys.readouterr().err and (tmp_path / "old.json").read_bytes() == b"keep"


def _export_to_stdout(stdout) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "collviz", "export", str(FIXTURE), "--perfetto", "-"],
                          stdout=stdout, stderr=subprocess.PIPE, timeout=120, stdin=subprocess.DEVNULL)


def test_export_dash_is_stdout_and_a_full_stdout_fails_in_one_line(tmp_path):
    assert main(["export", str(FIXTURE), "--perfetto", str(tmp_path / "plain.json")]) == 0
    shown = _export_to_stdout(subprocess.PIPE)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == (tmp_path / "plain.json").read_bytes() and json.loads(shown.stdout)["traceEvents"]
    assert b"to stdout" in shown.stderr and not (tmp_path / "-").exists() and not Path("-").exists()
    full = make_node(tmp_path / "full", "full")
    with open(full.path, "wb") as device:
        failed = _export_to_stdout(device)
    assert failed.returncode == 2
    assert failed.stderr.decode() == "collviz: error: --perfetto stdout: cannot write (no space left on device)\n"
    assert full.survived()


@pytest.mark.parametrize("argv", [
    ["all-reduce", "--headless", "--record", "-"],
    ["bench", "--sizes", "1K:1K", "--record", "-"],
    ["lesson", "basics", "--record", "-"],
])
def test_dash_is_refused_where_the_output_is_not_one_document(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("collviz: error: --record -: ") and "stdout" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_trace_writer_writes_through_each_node(tmp_path, kind):
    node = make_node(tmp_path / "t.cvz", kind)
    events = all_gather_events(world=2)
    writer = TraceWriter(node.path)
    writer.write(encode(event) for event in events)
    writer.close()
    assert node.survived()
    assert writer.error == ("recording stopped at event 0: no space left on device" if kind == "full" else None)
    if kind in WRITTEN_THROUGH:
        copy = tmp_path / "copy.cvz"
        copy.write_bytes(node.received())
        assert read_trace(copy).events == events
    assert index_path(node.path).exists() == (kind == "symlink")  # an index only beside a regular file


@pytest.mark.parametrize("kind", KINDS)
def test_a_node_where_the_index_goes_is_left_alone(tmp_path, kind):
    trace = tmp_path / "t.cvz"
    node = make_node(index_path(trace), kind)
    events = all_gather_events(world=2)
    writer = TraceWriter(trace)
    writer.write(encode(event) for event in events)
    writer.close()
    assert writer.error is None and read_trace(trace).events == events
    assert node.survived() and node.received(timeout=0.2) == b""  # no writer comes to the FIFO


@pytest.mark.parametrize("kind", WRITTEN_THROUGH)
def test_record_on_the_command_line_writes_through(tmp_path, kind):
    node = make_node(tmp_path / "t.cvz", kind)
    result = subprocess.run(
        [sys.executable, "-m", "collviz", "all-reduce", "--gpus", "2", "--backend", "gloo", "--headless",
         "--record", str(node.path)], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    assert node.survived()
    copy = tmp_path / "copy.cvz"
    copy.write_bytes(node.received())
    assert read_trace(copy).events[0].scenario == "all-reduce"


def test_compare_writes_its_traces_through_nodes(tmp_path):
    full = make_node(tmp_path / "ddp.cvz", "full")
    link = make_node(tmp_path / "fsdp.cvz", "symlink")
    result = subprocess.run(
        [sys.executable, "-m", "collviz", "compare", "ddp", "fsdp", "--gpus", "2", "--backend", "gloo", "--headless",
         "--record", str(tmp_path)], capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL,
    )
    assert full.survived() and link.survived()
    assert result.returncode == EXIT_RECORDING_INCOMPLETE and "no space left on device" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert read_trace(link.path).events[0].scenario == "fsdp"


@pytest.mark.parametrize("kind", KINDS)
def test_a_memory_snapshot_writes_through_each_node(tmp_path, monkeypatch, capsys, kind):
    import torch

    from collviz.runtime.observation.memory_snapshot import snapshot_path, write_memory_snapshot

    monkeypatch.setattr(torch.cuda.memory, "_dump_snapshot", lambda name: Path(name).write_bytes(b"snapshot"))
    node = make_node(snapshot_path(tmp_path, 3), kind)
    write_memory_snapshot(tmp_path, 3)
    err = capsys.readouterr().err
    assert node.survived()
    if kind == "full":
        assert err.count("\n") == 1 and err.startswith("collviz: rank 3: CUDA memory snapshot not written")
        assert err.rstrip().endswith("cannot write (no space left on device)")
    else:
        assert err == ""
    assert node.received() == (b"snapshot" if kind in WRITTEN_THROUGH else b"")
    assert _leftovers(tmp_path, node.path) == []


async def test_a_screenshot_writes_through_each_node(tmp_path, monkeypatch):
    from collviz.app import overlays
    from collviz.app.app import make_app

    stamps = iter(KINDS)
    monkeypatch.setattr(overlays.time, "strftime", lambda _format: next(stamps))
    app = make_app(events=all_gather_events(), screenshot_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        step = app.current_view().step + 1
        nodes = [make_node(tmp_path / f"collviz-all-gather-step{step}-{kind}.svg", kind) for kind in KINDS]
        for _ in KINDS:
            await pilot.press("s")
            await pilot.pause()
        notes = [str(note.message) for note in app._notifications]
    for node in nodes:
        assert node.survived(), node.kind
        received = node.received()
        assert received.startswith(b"<svg") if node.kind in WRITTEN_THROUGH else received == b""
    assert f"screenshot {nodes[0].path}: cannot write (no space left on device)" in notes
    assert _leftovers(tmp_path, *(node.path for node in nodes)) == []
