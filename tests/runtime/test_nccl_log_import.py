"""An NCCL log opened as a collviz run: its topology, algorithm choices and init times, and a log
too large to hold read a line at a time. The log is the hand-written fixture
``tests/fixtures/nccl/job-4ranks.log`` (no GPU here to capture one)."""

from __future__ import annotations

import gzip
from collections import defaultdict

import pytest

from collviz.runtime.sources import open_artifacts
from collviz.runtime.sources.nccl_log import TOPOLOGY_LABEL
from collviz.runtime.wire.protocol import Phase, Transfer

from support.artifact_imports import NCCL_LOG, call_begins, only


def test_nccl_log_gives_topology_choices_and_init_times():
    """The fixture: 4 ranks in a ring 0→1→2→3→0 and a chain tree 3→2→1→0 on two channels, a
    2-rank communicator of ranks 0 and 2, two all-reduces and one all-gather."""
    run = open_artifacts([NCCL_LOG])
    assert run.exit_status == 0
    names = {e.index: e.name for e in only(run.events, Phase)}
    transfers = defaultdict(set)
    for t in only(run.events, Transfer):
        assert t.kind == "p2p" and TOPOLOGY_LABEL in t.buffer
        transfers[names[t.phase]].add((t.src, t.dst, t.hop))
    assert transfers["NCCL ring, channels 00, 01 on world"] == {(r, (r + 1) % 4, 1) for r in range(4)}
    parent = {1: 0, 2: 1, 3: 2}
    depth = {1: 1, 2: 2, 3: 3}
    up = {(child, p, 3 - depth[child] + 1) for child, p in parent.items()}
    down = {(p, child, 3 + depth[child]) for child, p in parent.items()}
    assert transfers["NCCL tree, channels 00, 01 on world"] == up | down
    assert transfers["NCCL ring, channel 00 on nccl comm 1"] == {(0, 2, 1), (2, 0, 1)}
    begins = {(e.rank, e.index): e.t_ns for e in only(run.events, Phase) if e.edge == "begin"}
    took = {e.rank: e.t_ns - begins[(e.rank, e.index)] for e in only(run.events, Phase)
            if e.edge == "end" and names[e.index] == "NCCL init of world"}
    assert took == {0: 530_000_000, 1: 520_000_000, 2: 540_000_000, 3: 510_000_000}
    calls = {(c.rank, c.group, c.group_seq): c for c in call_begins(run.events)[0] + call_begins(run.events)[2]}
    assert (calls[(0, "world", 1)].count, calls[(0, "world", 1)].bytes_in) == (262144, 1 << 20)  # opCount 0: call #1
    pair = calls[(2, "nccl comm 1", 1)]
    assert (pair.op, pair.dtype, pair.count, pair.bytes_out, pair.group_ranks) == ("all_gather", "bfloat16", 1024,
                                                                                    4096, [0, 2])
    narration = {e.name: e.narration for e in only(run.events, Phase) if e.edge == "begin"}
    assert "RING/LL128 on ranks 0–3" in narration["all_reduce #1 on world"]
    assert "RING/SIMPLE" in narration["all_reduce #2 on world"]
    assert "network transport: Socket" in narration["NCCL init of world"]


def test_a_log_too_large_to_hold_is_streamed(monkeypatch, tmp_path):
    """A log past the bound on logs read whole (lowered here to 512 bytes; the fixture is 12 KiB)
    is read a line at a time, plain or gzip-compressed, and opens as the fixture read whole does."""
    import collviz.runtime.sources.detect as detect

    whole = open_artifacts([NCCL_LOG])
    packed = tmp_path / "job-4ranks.log.gz"
    packed.write_bytes(gzip.compress(NCCL_LOG.read_bytes()))
    assert packed.stat().st_size > 512
    monkeypatch.setattr(detect, "STREAMED_LOG_BYTES", 512)
    monkeypatch.setattr(detect, "read_artifact", lambda path: pytest.fail(f"{path} was read whole"))
    for path in (NCCL_LOG, packed):
        streamed = open_artifacts([path])
        assert (streamed.events, streamed.warnings) == (whole.events, whole.warnings)


def test_streamed_lines_end_without_their_newline_and_a_huge_line_is_cut(tmp_path):
    from collviz.runtime.sources.reading import MAX_LINE_CHARS, stream_lines

    path = tmp_path / "lines.log"
    path.write_bytes(b"first\r\n" + b"x" * (MAX_LINE_CHARS * 2 + 5) + b"\nlast \xff")
    assert list(stream_lines(path)) == ["first", "x" * MAX_LINE_CHARS, "last \ufffd"]
