"""NCCL Inspector output (:mod:`collviz.runtime.sources.nccl_inspector`), from files written to its
documented format (tests/fixtures/nccl_inspector/README.md); every expected value below is worked
out by hand from those files, not by the reader."""

from __future__ import annotations

import shutil

import pytest

from collviz.runtime.errors import UsageError
from collviz.runtime.sources import open_artifacts
from collviz.runtime.sources.nccl_inspector import INSPECTOR_LABEL
from collviz.runtime.wire.protocol import Collective, Phase, RunStart

from support.paths import FIXTURES


INSPECTOR = FIXTURES / "nccl_inspector"
BASE_US = 1764097200000000
WORLD = "0x7f8c496ae9f661"
SUB = "0xe62dedaa97644a"


def _ends(events) -> dict[tuple[int, str], Collective]:
    """(rank, step name) → the call's end event."""
    names = {(e.rank, e.index): e.name for e in events if isinstance(e, Phase) and e.edge == "begin"}
    return {(e.rank, names[(e.rank, e.phase)]): e for e in events if isinstance(e, Collective) and e.edge == "end"}


def _narrations(events) -> dict[str, str]:
    return {e.name: e.narration for e in events if isinstance(e, Phase) and e.edge == "begin"}


def test_a_jobs_folder_opens_one_step_per_call_with_nccls_sizes_and_times():
    run = open_artifacts([INSPECTOR / "job"])
    assert run.kind == "nccl-inspector" and run.exit_status == 0
    start = next(e for e in run.events if isinstance(e, RunStart))
    assert start.world_size == 4 and start.backend == "nccl"
    ends = _ends(run.events)
    steps = list(_narrations(run.events))
    assert steps == [f"all_reduce #1 on {WORLD}", f"all_gather #1 on {WORLD}", f"reduce_scatter #1 on {SUB}",
                     f"all_reduce #4 on {WORLD}"]  # coll_sn + 1, in the order the dumps wrote them
    for rank in range(4):
        ar = ends[(rank, f"all_reduce #1 on {WORLD}")]
        assert (ar.bytes_in, ar.bytes_out, ar.duration_ns, ar.group_ranks) == (1 << 20, 1 << 20, 100_000, [0, 1, 2, 3])
        ag = ends[(rank, f"all_gather #1 on {WORLD}")]
        assert (ag.bytes_in, ag.bytes_out, ag.algo_bytes, ag.duration_ns) == (1 << 18, 1 << 20, 1 << 20, 200_000)
        assert ar.t_ns == (BASE_US + 1000) * 1000  # no verbose trace: the call ends at the dump that wrote it
    # the 2-rank communicator's members are the processes of global ranks 0 and 2
    rs = {rank: ends.get((rank, f"reduce_scatter #1 on {SUB}")) for rank in range(4)}
    assert rs[1] is None and rs[3] is None
    assert (rs[0].group_ranks, rs[0].bytes_in, rs[0].bytes_out, rs[0].duration_ns) == ([0, 2], 1 << 20, 1 << 19, 100_000)
    assert rs[0].group == f"{SUB} (reduce_scatter calls, 2 ranks)"
    assert {r for r in range(4) if (r, f"all_reduce #4 on {WORLD}") in ends} == {0, 1}


def test_nccls_own_bandwidths_are_shown_labelled_and_agree_with_the_size_and_time():
    run = open_artifacts([INSPECTOR / "job"])
    told = _narrations(run.events)
    assert INSPECTOR_LABEL in told[f"all_reduce #1 on {WORLD}"]
    assert "r3 100 µs, algbw 10.49 GB/s, busbw 15.73 GB/s (kernel_gpu)" in told[f"all_reduce #1 on {WORLD}"]
    assert "r2 100 µs, algbw 10.49 GB/s, busbw 5.24 GB/s" in told[f"reduce_scatter #1 on {SUB}"]
    assert "r1 50 µs, algbw 20.97 GB/s, busbw 31.46 GB/s" in told[f"all_reduce #4 on {WORLD}"]
    # collviz's own algbw from the same call (S / t) is the one NCCL wrote: 2^20 B / 100 µs
    ar = _ends(run.events)[(0, f"all_reduce #1 on {WORLD}")]
    assert ar.algo_bytes / (ar.duration_ns / 1e9) / 1e9 == pytest.approx(10.48576)


def test_calls_the_inspector_did_not_write_are_said_sampled_and_absent_ranks_unknown(tmp_path):
    run = open_artifacts([INSPECTOR / "job"])
    assert any(w.startswith("4 calls numbered between the records") and "sampled" in w for w in run.warnings)
    for name in ("node0-pid1001.log", "node0-pid1002.log", "node1-pid2001.log"):
        shutil.copy(INSPECTOR / "job" / name, tmp_path / name)
    three = open_artifacts([tmp_path])
    assert next(e for e in three.events if isinstance(e, RunStart)).world_size == 4
    assert any("no record of rank 3 (4 in the job)" in w for w in three.warnings)
    assert 3 not in {e.rank for e in three.events if isinstance(e, Collective)}


def test_a_verbose_file_places_calls_at_their_kernels_start_and_a_0_us_call_is_untimed():
    run = open_artifacts([INSPECTOR / "verbose"])
    ends = _ends(run.events)
    bcast = "broadcast #1 on 0xd152c00f111816"
    assert [ends[(r, bcast)].t_ns - ends[(r, bcast)].duration_ns for r in (0, 1)] == [(BASE_US + 110) * 1000,
                                                                                      (BASE_US + 112) * 1000]
    assert "r0 8 µs, algbw 0.51 GB/s, busbw 0.51 GB/s (kernel_gpu, 2 channels)" in _narrations(run.events)[bcast]
    tiny = ends[(0, "all_reduce #1 on 0xd152c00f111816")]
    assert tiny.duration_ns is None and tiny.bytes_in == 64
    assert "0 µs: below NCCL's 1 µs resolution, no bandwidth" in _narrations(run.events)["all_reduce #1 on 0xd152c00f111816"]
    assert any("2 records with an execution time of 0 µs" in w for w in run.warnings)


def _lines(name: str) -> list[str]:
    return (INSPECTOR / "job" / name).read_text().splitlines()


def test_a_file_still_being_written_opens_without_its_cut_last_line(tmp_path):
    lines = _lines("node0-pid1001.log")
    (tmp_path / "node0-pid1001.log").write_text("\n".join(lines) + "\n" + lines[0][:57])
    run = open_artifacts([tmp_path])
    assert any("its last line is cut short (the file was being written)" in w for w in run.warnings)
    # its 3 calls on the world communicator; the 2-rank one's other member has no file here
    assert sum(isinstance(e, Collective) and e.edge == "end" for e in run.events) == 3
    assert any(f"communicator {SUB}: 1 of its 2 ranks can be placed" in w for w in run.warnings)


def test_damaged_lines_are_warned_and_left_out(tmp_path):
    good = _lines("node0-pid1001.log")
    bad = [good[0].replace('"coll_msg_size_bytes":1048576', '"coll_msg_size_bytes":' + "9" * 31),
           good[0].replace('"rank":0', '"rank":' + "9" * 40),
           good[0].replace('"coll_sn":0', '"coll_sn":' + "9" * 19),
           good[0].replace('"n_ranks":4', '"n_ranks":0'),
           good[0].replace('"coll_algobw_gbs":10.48576', '"coll_algobw_gbs":1e999'),
           '{"header": {"id": "0x1", "rank": 0', "garbage"]
    (tmp_path / "node0-pid1001.log").write_text("\n".join(good[1:2] + bad + good[2:]) + "\n")
    run = open_artifacts([tmp_path])
    assert any("2 lines with a call number or size that cannot be: damaged input" in w for w in run.warnings)
    assert any("2 lines with a rank or n_ranks that cannot be" in w for w in run.warnings)
    assert any("3 lines with broken JSON" in w for w in run.warnings)  # 1e999, the cut object, garbage
    assert sum(isinstance(e, Collective) and e.edge == "end" for e in run.events) == 2  # good[1:] less the 2-rank one


def test_hostile_inspector_files_are_one_line_refusals(tmp_path):
    record = _lines("node0-pid1001.log")[0]
    cases = {
        "all damaged": (record.replace('"n_ranks":4', '"n_ranks":-1') + "\n" + record.replace('"rank":0', '"rank":7'),
                        "no usable record (all_damaged.log: 2 lines with a rank or n_ranks that cannot be: "
                        "damaged input, left out)"),
        "only a cut line": (record[:80], "damaged JSON"),
        "unknown op only": (record.replace('"AllReduce"', '"Invalid"') + "\n", "no usable record"),
    }
    for name, (text, needle) in cases.items():
        path = tmp_path / f"{name.replace(' ', '_')}.log"
        path.write_text(text)
        with pytest.raises(UsageError) as refused:
            open_artifacts([path])
        assert needle in str(refused.value) and "\n" not in str(refused.value), (name, str(refused.value))


def test_inspector_output_and_an_nccl_log_are_not_mixed(tmp_path):
    shutil.copy(INSPECTOR / "job" / "node0-pid1001.log", tmp_path / "node0-pid1001.log")
    shutil.copy(FIXTURES / "nccl" / "job-4ranks.log", tmp_path / "nccl.log")
    with pytest.raises(UsageError, match="NCCL Inspector output .* open one kind at a time"):
        open_artifacts([tmp_path])


def test_a_communicator_of_processes_driving_several_gpus_is_said_unplaceable(tmp_path):
    # one process with ranks 0 and 1 of the world and rank 0 of a 2-rank communicator: which GPU's is it?
    lines = _lines("node0-pid1001.log")
    two = lines[0].replace('"rank":0', '"rank":1')
    sub = next(line for line in lines if SUB in line)
    (tmp_path / "node0-pid1001.log").write_text("\n".join([lines[0], two, sub]) + "\n")
    run = open_artifacts([tmp_path])
    assert any(f"communicator {SUB}: 0 of its 2 ranks can be placed" in w for w in run.warnings)
    assert not any(isinstance(e, Collective) and SUB in e.group for e in run.events)


def test_collviz_replay_headless_reads_a_folder_and_refuses_garbage_in_one_line(tmp_path):
    from support.cli import run_cli

    done = run_cli("replay", str(INSPECTOR / "job"), "--headless")
    assert done.returncode == 0, done.stderr
    assert f"all_reduce #4 on {WORLD}" in done.stdout and "15.7 GB/s" in done.stdout
    bad = tmp_path / "host-pid1.log"
    bad.write_text(_lines("node0-pid1001.log")[0].replace('"rank":0', '"rank":9') + "\n{\n")
    refused = run_cli("replay", str(bad), "--headless")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


async def test_every_step_of_an_inspector_import_at_100x30_shows_its_call_s_figures():
    """In the viewer at its smallest size each step's call shows S, t, algbw and busbw."""
    from collviz.app.app import make_app
    from support.screens import walk_every_step

    run = open_artifacts([INSPECTOR / "job"])
    walk = await walk_every_step(make_app(events=run.events), (100, 30))
    assert walk.hidden == [] and walk.cut == [] and walk.checked >= 4
