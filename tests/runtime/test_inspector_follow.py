"""A running job's NCCL Inspector folder followed as its files grow (``collviz replay --follow``,
:func:`collviz.runtime.sessions.live.followed_session`): the test appends lines written to the
documented format (tests/fixtures/nccl_inspector/README.md) between polls; every expected size and
time below is worked out by hand from the lines written here."""

from __future__ import annotations

import time

import pytest

from collviz.app.commands import replay
from collviz.runtime.errors import UsageError
from collviz.runtime.sources.growing import GrowingFiles
from collviz.runtime.sources.nccl_inspector import INSPECTOR_LABEL
from collviz.runtime.wire.protocol import Collective, Phase, RankEnd, RankStart, RunEnd, RunStart
from collviz.runtime.wire.trace import read_trace

from support.inspector_lines import AG0, AR0, WORLD, append, follow, written

def _ends(events) -> dict[tuple[int, str, int], tuple[int, int, int]]:
    """(rank, op, number) → (bytes in, bytes out, duration ns) of each Collective end."""
    return {(e.rank, e.op, e.group_seq): (e.bytes_in, e.bytes_out, e.duration_ns)
            for e in events if isinstance(e, Collective) and e.edge == "end"}


def test_each_poll_shows_exactly_the_calls_written_so_far_each_once(tmp_path):
    folder, first, second = written(tmp_path)
    session = follow(folder, record=tmp_path / "t.cvz")
    one = session.poll(0)
    assert next(e for e in one if isinstance(e, RunStart)).world_size == 3
    assert _ends(one) == {(0, "all_reduce", 1): (1 << 20, 1 << 20, 100_000),
                          (1, "all_reduce", 1): (1 << 20, 1 << 20, 100_000)}, "rank 0's cut all-gather not yet"
    assert session.poll(0) == [], "nothing new written: nothing new shown"

    append(first, AG0[0][40:])  # the rest of the cut line
    append(second, AR0[1] + AG0[1])  # a later dump writes the all-reduce again
    (folder / "node1-pid102.log").write_text(AR0[2])  # a third process starts
    two = session.poll(0)
    assert _ends(two) == {(0, "all_gather", 1): (1 << 18, 3 << 18, 200_000),
                          (1, "all_gather", 1): (1 << 18, 3 << 18, 200_000),
                          (2, "all_reduce", 1): (1 << 20, 1 << 20, 100_000)}
    assert [e.rank for e in two if isinstance(e, RankStart)] == [2]
    steps = {e.name: e.index for e in one + two if isinstance(e, Phase) and e.edge == "begin"}
    assert steps == {f"all_reduce #1 on {WORLD}": 0, f"all_gather #1 on {WORLD}": 1}, "rank 2 joins the step shown"
    narration = next(e.narration for e in one if isinstance(e, Phase))
    assert INSPECTOR_LABEL in narration and "r0 100 µs, algbw 10.49 GB/s, busbw 13.98 GB/s (kernel_gpu)" in narration

    session.reader.idle_s = 0.05
    rest: list = []
    deadline = time.monotonic() + 10
    while not session.finished and time.monotonic() < deadline:
        rest += session.poll(0.02)
    assert session.outcome is not None and (session.outcome.status, session.outcome.exit_code) == ("ok", 0)
    assert "has not grown for 0.05 s" in session.outcome.detail
    assert sorted(e.rank for e in rest if isinstance(e, RankEnd)) == [0, 1, 2]
    assert isinstance(rest[-1], RunEnd) and rest[-1].status == "ok"
    everything = one + two + rest
    begins = [(e.rank, e.phase) for e in everything if isinstance(e, Collective) and e.edge == "begin"]
    assert len(begins) == len(set(begins)) == 5, "each rank's call begun once"
    for end in (e for e in everything if isinstance(e, Collective) and e.edge == "end"):
        begin = next(e for e in everything if isinstance(e, Collective) and e.edge == "begin"
                     and (e.rank, e.phase) == (end.rank, end.phase))
        assert end.t_ns - begin.t_ns == end.duration_ns

    recorded = read_trace(tmp_path / "t.cvz").events
    assert _ends(recorded) == _ends(everything) and len(recorded) == len(everything)


def test_the_recording_replays_headless_with_the_same_calls(tmp_path, capsys):
    folder, _, _ = written(tmp_path)
    session = follow(folder, record=tmp_path / "t.cvz")
    session.poll(0)
    session.stop()
    assert session.outcome is not None and session.outcome.status == "interrupted"
    assert replay.main([str(tmp_path / "t.cvz"), "--headless"]) == 0
    out = capsys.readouterr().out
    assert "all_reduce" in out and "all_gather" not in out


def test_headless_follow_prints_one_line_per_new_step_until_idle(tmp_path, capsys):
    folder, _, _ = written(tmp_path)
    assert replay.main(["--follow", str(folder), "--headless", "--idle", "1"]) == 0
    captured = capsys.readouterr()
    steps = [line for line in captured.out.splitlines() if line.startswith("step ")]
    assert steps == [f"step 1  all_reduce #1 on {WORLD}: 1,048,576 B per rank; NCCL's own figures: "
                     "r0 100 µs, algbw 10.49 GB/s, busbw 13.98 GB/s (kernel_gpu)"]
    assert "left out: a cut last line in 1 files" in captured.err


def test_a_reading_takes_at_most_its_share_and_the_rest_comes_next(tmp_path):
    line = "x" * 1023 + "\n"  # 1 KiB: a 16 KiB share holds 16 of them
    (tmp_path / "a.log").write_text(line * 40)
    files = GrowingFiles(tmp_path, budget=1)
    assert [len(found[0][1]) for found in (files.read(), files.read(), files.read())] == [16, 16, 8]
    assert files.read() == [] and files.cut_lines == []


def test_a_folder_where_no_record_comes_ends_failed_saying_so(tmp_path, capsys):
    (tmp_path / "node0-pid100.log").write_text("not json\n")
    assert replay.main(["--follow", str(tmp_path), "--headless", "--idle", "1"]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path}: no NCCL Inspector record in 1 s" in err and "left out: 1 line with broken JSON" in err


@pytest.mark.parametrize("argv, words", [
    (["--follow", "{tmp}/none"], "--follow reads a folder"),
    (["--follow", "{tmp}", "{tmp}"], "--follow follows one folder"),
    (["--follow", "{tmp}", "--idle", "-1"], "--idle -1"),
    (["{tmp}/t.cvz", "--idle", "3"], "--idle goes with --follow"),
])
def test_bad_follow_options_are_one_line_errors(tmp_path, argv, words):
    with pytest.raises(UsageError, match=words):
        replay.main([arg.format(tmp=tmp_path) for arg in argv])


def test_a_v43_folder_followed_gives_its_payloads_the_markers_header(tmp_path):
    """The v4.3 fixture (a dump_stats marker, then an all-reduce and a send or receive, per process)
    written line by line into a followed folder: the same three calls as the import reads, the
    send's transfer of 1 MiB from rank 0 to rank 1 included."""
    from collviz.runtime.wire.protocol import Transfer

    from support.paths import FIXTURES

    folder = tmp_path / "insp"
    folder.mkdir()
    for path in sorted((FIXTURES / "nccl_inspector" / "v43").iterdir()):
        append(folder / path.name, path.read_text())
    events = follow(folder).poll(0)
    ends = sorted((e.rank, e.op) for e in events if isinstance(e, Collective) and e.edge == "end")
    assert ends == [(0, "all_reduce"), (0, "send"), (1, "all_reduce"), (1, "recv")]
    assert {(e.src, e.dst, e.bytes) for e in events if isinstance(e, Transfer)} == {(0, 1, 1 << 20)}


def test_a_followed_folder_reports_records_nccl_dropped_and_counts_proxy_traces_as_not_drawn(tmp_path):
    """The v4.3 fixture, then a second dump of process 300: a ``dump_stats`` marker counting 512
    collective and 3 point-to-point records NCCL's ring overwrote, and a ``proxy_trace`` payload
    (the key the writer prints; its body is not read). Neither is damage: the drops are announced
    once and said at the end as a sample, the proxy trace as not drawn."""
    import json

    from support.paths import FIXTURES

    folder = tmp_path / "insp"
    folder.mkdir()
    for path in sorted((FIXTURES / "nccl_inspector" / "v43").iterdir()):
        append(folder / path.name, path.read_text())
    marker = json.loads((FIXTURES / "nccl_inspector" / "v43" / "node0-pid300.log").read_text().splitlines()[0])
    marker["dump_stats"].update(coll_records=0, coll_dropped_total=512, coll_dropped_since_last_dump=512,
                                p2p_records=0, p2p_dropped_total=3, p2p_dropped_since_last_dump=3)
    append(folder / "node0-pid300.log", json.dumps(marker) + "\n" + '{"proxy_trace": {}}\n')
    said: list[str] = []
    session = follow(folder, announce=said.append)
    session.poll(0)
    dropped = [line for line in said if "dropped" in line]
    assert dropped == [
        "node0-pid300.log: 512 collective records dropped since the last dump (NCCL's dump_stats: its ring "
        "overwrote them): the calls shown are a sample",
        "node0-pid300.log: 3 point-to-point records dropped since the last dump (NCCL's dump_stats: its ring "
        "overwrote them): the calls shown are a sample"]
    assert session.reader.damaged == {}, "a proxy trace and a marker are not damaged input"
    session.reader.idle_s = 0.05
    deadline = time.monotonic() + 10
    while not session.finished and time.monotonic() < deadline:
        session.poll(0.02)
    assert session.outcome is not None and session.outcome.status == "ok"
    detail = session.outcome.detail
    assert "(left out: node0-pid300.log: 1 proxy_trace record (NCCL's proxy tracing): not drawn)" in detail
    assert "512 collective records dropped" in detail and "3 point-to-point records dropped" in detail
    assert "damaged" not in detail and "with a proxy_trace" not in detail
