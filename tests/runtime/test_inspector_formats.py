"""NCCL Inspector output in every layout NCCL writes (:mod:`collviz.runtime.sources.inspector_records`):
NCCL's own README examples copied line for line (pretty-printed), NCCL 2.30's p2p records, float
numbers, v4.3's header per ``dump_stats`` marker, equal-size communicators side by side, and the
reader's bounds. Every expected value is worked out by hand from the files
(tests/fixtures/nccl_inspector/README.md), not by the reader."""

from __future__ import annotations

import json
import random

import pytest

from collviz.runtime.errors import UsageError
from collviz.runtime.sources import open_artifacts
from collviz.runtime.wire.protocol import Collective, Phase, RunStart, Transfer

from support.garble import garbled
from support.paths import FIXTURES

INSPECTOR = FIXTURES / "nccl_inspector"
PP = "0x5a1b2c3d4e5f60"


def _ends(events) -> dict[tuple[int, str], Collective]:
    names = {(e.rank, e.index): e.name for e in events if isinstance(e, Phase) and e.edge == "begin"}
    return {(e.rank, names[(e.rank, e.phase)]): e for e in events if isinstance(e, Collective) and e.edge == "end"}


def test_nccls_own_readme_examples_pretty_printed_open_side_by_side():
    """NCCL's README's two examples: an AllReduce on rank 2 of 8 of 0x7f8c496ae9f661 and a verbose
    ReduceScatter on rank 4 of 8 of 0xe62dedaa97644a, written by two processes: two equal-size
    communicators with no process in common, both shown (ranks 0–7 and 8–15)."""
    run = open_artifacts([INSPECTOR / "readme_examples"])
    assert run.exit_status == 0
    assert next(e for e in run.events if isinstance(e, RunStart)).world_size == 16
    ends = _ends(run.events)
    ar = ends[(2, "all_reduce #1408 on 0x7f8c496ae9f661")]  # coll_sn 1407 + 1
    assert (ar.bytes_in, ar.duration_ns, ar.group_ranks) == (17_179_869_184, 61_974_000, list(range(8)))
    rs = ends[(12, "reduce_scatter #1232 on 0xe62dedaa97644a")]  # rank 4 of the second, after the first's 8
    assert (rs.bytes_in, rs.bytes_out, rs.duration_ns) == (8 * 2_147_483_648, 2_147_483_648, 41_057_000)
    assert rs.t_ns - rs.duration_ns == 1_752_867_229_235_181_000  # its channel's kernel start (verbose)
    assert rs.group_ranks == list(range(8, 16))
    assert run.warnings == [
        "communicator 0xe62dedaa97644a (8 ranks) shares no process with those placed before it: shown side by "
        "side, as ranks 8–15 of the job",
        "no record of ranks 0, 1, 3–11, 13–15 (16 in the job)"]


@pytest.mark.parametrize("layout", ["v230_p2p", "v43"])
def test_p2p_records_are_transfers_and_float_and_unprefixed_fields_are_read(layout):
    """Rank 0 sends 1 MiB to rank 1 (p2p_sn 0, 50 µs; rank 1's Recv of it) and both all-reduce
    8 MiB in 5663 µs; the same calls in one record a line (the all-reduce's fields unprefixed, its
    time a float) and in v4.3's layout (a dump_stats marker with its real field names, then
    payloads without a header, coll_perf before p2p_perf, as its writer writes them)."""
    run = open_artifacts([INSPECTOR / layout])
    assert run.exit_status == 0 and run.warnings == []
    ends = _ends(run.events)
    assert (ends[(0, f"send #1 on {PP}")].bytes_in, ends[(0, f"send #1 on {PP}")].duration_ns) == (1 << 20, 50_000)
    assert (ends[(1, f"recv #1 on {PP}")].bytes_out, ends[(1, f"recv #1 on {PP}")].duration_ns) == (1 << 20, 50_000)
    transfers = [(e.src, e.dst, e.bytes) for e in run.events if isinstance(e, Transfer)]
    assert transfers == [(0, 1, 1 << 20), (0, 1, 1 << 20)]  # the send's and the receive's record of it
    for rank in (0, 1):
        ar = ends[(rank, f"all_reduce #1 on {PP}")]
        assert (ar.bytes_in, ar.duration_ns) == (8 << 20, 5_663_000)
        assert ar.group == f"{PP} (PP Group 0: all_reduce calls, 2 ranks)"  # NCCL 2.30's comm_name
    told = {e.name: e.narration for e in run.events if isinstance(e, Phase) and e.edge == "begin"}
    assert "r0 (peer r1 of the communicator) 50 µs, algbw 20.97 GB/s" in told[f"send #1 on {PP}"]
    assert "r1 5,663 µs, algbw 1.48 GB/s, busbw 1.48 GB/s (kernel_gpu)" in told[f"all_reduce #1 on {PP}"]


def test_a_fraction_of_a_microsecond_is_kept_and_a_fractional_count_is_damaged(tmp_path):
    line = (INSPECTOR / "v230_p2p" / "node0-pid300.log").read_text().splitlines()[1]
    half = line.replace('"exec_time_us": 5663.0', '"exec_time_us": 12.5')
    odd = line.replace('"sn": 0', '"sn": 0.5')
    (tmp_path / "h-pid1.log").write_text(half + "\n" + odd + "\n")
    run = open_artifacts([tmp_path])
    [end] = [e for e in run.events if isinstance(e, Collective) and e.edge == "end"]
    assert end.duration_ns == 12_500
    assert "r0 12.5 µs" in next(e.narration for e in run.events if isinstance(e, Phase) and e.edge == "begin")
    assert "h-pid1.log: 1 line with a call number or size that cannot be: damaged input, left out" in run.warnings


def test_a_v43_payload_before_any_marker_is_damaged_and_a_proxy_trace_is_said_not_drawn(tmp_path):
    """A payload before any marker has no header; a proxy_trace payload (its keys as the v4.4 writer
    writes a proxy_op record) is counted and said not drawn, not damaged."""
    marker, coll, p2p = (INSPECTOR / "v43" / "node0-pid300.log").read_text().splitlines()
    proxy = json.dumps({"proxy_trace": {"record_type": "proxy_op", "record_sn": 1, "parent_type": "p2p",
                                        "parent_sn": 0, "proxy_op_sn": 0, "rank": 0, "channel_id": 0, "peer": 1,
                                        "direction": "send", "timing_source": "proxy_cpu"}})
    (tmp_path / "h-pid1.log").write_text("\n".join([coll, marker, p2p, proxy, proxy]) + "\n")
    run = open_artifacts([tmp_path])
    assert sum(isinstance(e, Collective) and e.edge == "end" for e in run.events) == 1  # the send after the marker
    assert "h-pid1.log: 2 proxy_trace records (NCCL's proxy tracing): not drawn" in run.warnings
    assert ("h-pid1.log: 1 line with no header (and no dump_stats marker before it): damaged input, left out"
            in run.warnings)
    assert not any("dropped" in w for w in run.warnings)  # its marker counts no drop


def test_nccls_documented_dump_stats_marker_names_the_records_nccl_dropped(tmp_path):
    """The dump_stats marker of an Inspector README (readme_dump_stats/, copied line for line: 512
    collective records dropped since the last dump, rank 2 of 8 of 0x7f8c496ae9f661), followed by a
    coll_perf payload as the v4.4 writer writes it: the payload takes the marker's header, the drop
    is said."""
    marker = (INSPECTOR / "readme_dump_stats" / "marker.json").read_text()
    coll = (INSPECTOR / "v43" / "node0-pid300.log").read_text().splitlines()[1]
    (tmp_path / "example-hostname-pid1639453.log").write_text(marker + coll + "\n")
    run = open_artifacts([tmp_path])
    [end] = [e for e in run.events if isinstance(e, Collective) and e.edge == "end"]
    assert (end.rank, end.bytes_in, end.duration_ns, end.group_ranks) == (2, 8 << 20, 5_663_000, list(range(8)))
    assert run.warnings == [
        "example-hostname-pid1639453.log: 512 collective records dropped since the last dump (NCCL's dump_stats: "
        "its ring overwrote them): the calls shown are a sample",
        "no record of ranks 0, 1, 3–7 (8 in the job)"]


def test_a_real_inspector_record_with_a_float_time_reads_as_worked_by_hand():
    """real_datadog/: a record of a real job copied verbatim into DataDog/datadog-agent's tests (rank
    1 of 3, AllReduce coll_sn 8995, 2,360,832 B in 5663.0 µs). By hand: 2360832 B / 5663 µs =
    0.416887 GB/s algbw, × 2·2/3 = 0.555850 busbw — NCCL's own figures, shown rounded."""
    run = open_artifacts([INSPECTOR / "real_datadog"])
    assert run.exit_status == 0
    assert run.warnings == ["no record of ranks 0, 2 (3 in the job)"]
    end = _ends(run.events)[(1, "all_reduce #8996 on 0xad56c683b0c4ef")]  # coll_sn 8995 + 1
    assert (end.bytes_in, end.bytes_out, end.duration_ns, end.group_ranks) == (2_360_832, 2_360_832, 5_663_000,
                                                                               [0, 1, 2])
    told = next(e.narration for e in run.events if isinstance(e, Phase) and e.edge == "begin")
    assert "r1 5,663 µs, algbw 0.42 GB/s, busbw 0.56 GB/s (kernel_gpu)" in told


def test_a_long_line_without_a_newline_is_one_cut_line(tmp_path):
    """The reader skips a stretch that is not JSON to its line's end, once (no rescan per character;
    the 100 MB line is benchmarks/inspector_scale.py's)."""
    first = (INSPECTOR / "v230_p2p" / "node0-pid300.log").read_text()
    path = tmp_path / "node0-pid300.log"
    path.write_text(first + "x" * 10_000_000)
    from collviz.runtime.sources.nccl_inspector import import_inspector

    warnings: list[str] = []
    run = import_inspector([(path, path.read_text())], warnings)
    assert warnings == ["node0-pid300.log: its last line is cut short (the file was being written): left out",
                        "no record of rank 1 (2 in the job)"]
    assert sum(isinstance(e, Collective) and e.edge == "end" for e in run.events) == 2


@pytest.mark.parametrize("layout", ["readme_examples", "v230_p2p", "v43"])
def test_garbled_inspector_records_open_or_get_one_line(tmp_path, layout):
    """Pretty-printed records, p2p records with float fields and v4.3's layout, each value replaced
    by wrong kinds, impossible sizes and floats (whole, fractional), 20 ways each: each set opens
    (with warnings) or is refused in one line, never a traceback."""
    from collviz.runtime.sources.inspector_records import values_of

    files = {path.name: [value for _, value in values_of(path.read_text())]
             for path in sorted((INSPECTOR / layout).iterdir())}
    for seed in range(20):
        rng = random.Random(seed)
        target = tmp_path / str(seed)
        target.mkdir()
        for name, values in files.items():
            indent = 2 if layout == "readme_examples" else None
            (target / name).write_text("\n".join(json.dumps(garbled(v, rng, 0.05 + seed / 100), indent=indent)
                                                 for v in values) + "\n")
        try:
            open_artifacts([target])
        except UsageError as refused:
            assert "\n" not in str(refused), (seed, str(refused))


def test_the_documented_p2p_record_names_a_peer_its_communicator_lacks():
    """RCCL's Inspector README's p2p_perf example, copied line for line under the header it says it
    shares ("same as above": rank 4 of 8 of 0xe62dedaa97644a): a Recv of 1,048,576 B in 4 µs
    (262.144 GB/s, as 1048576 B / 4 µs is) from ``p2p_peer`` 10 — no rank of an 8-rank
    communicator. The record cannot be placed: refused in one line naming why."""
    folder = INSPECTOR / "readme_p2p"
    record = json.loads((folder / "example-hostname-pid438776.log").read_text())
    perf = record["p2p_perf"]
    assert perf["p2p_msg_size_bytes"] / perf["p2p_exec_time_us"] / 1e3 == perf["p2p_algobw_gbs"] == 262.144
    assert perf["p2p_peer"] >= record["header"]["n_ranks"]
    with pytest.raises(UsageError) as refused:
        open_artifacts([folder])
    assert str(refused.value).endswith("NCCL Inspector output with no usable record (example-hostname-pid438776.log: "
                                       "1 line with a peer that cannot be: damaged input, left out)")


def test_the_v42_layout_a_marker_then_payloads_with_their_own_header_reads_as_v43(tmp_path):
    """The pinned writer of ``dump_stats`` (NVIDIA/nccl inspector_json.cc at 35d819ec, v4.2) writes
    the marker, then payloads that still carry header and metadata: ``v43/`` rewritten so, with the
    marker's counts saying 2 collective records dropped on process 300. The same four calls; the
    drop warned once, on its file."""
    for path in sorted((INSPECTOR / "v43").iterdir()):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        marker, payloads = lines[0], lines[1:]
        marker["metadata"]["inspector_output_format_version"] = "v4.2"
        if path.name == "node0-pid300.log":
            marker["dump_stats"].update(coll_dropped_total=2, coll_dropped_since_last_dump=2)
        written = [marker] + [{"header": marker["header"], "metadata": marker["metadata"], **p} for p in payloads]
        (tmp_path / path.name).write_text("".join(json.dumps(value) + "\n" for value in written))
    run = open_artifacts([tmp_path])
    assert sorted(_ends(run.events)) == [(0, f"all_reduce #1 on {PP}"), (0, f"send #1 on {PP}"),
                                         (1, f"all_reduce #1 on {PP}"), (1, f"recv #1 on {PP}")]
    assert run.warnings == ["node0-pid300.log: 2 collective records dropped since the last dump (NCCL's dump_stats: "
                            "its ring overwrote them): the calls shown are a sample"]
