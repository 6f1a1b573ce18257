"""Each warning an NCCL log or a set of profiler traces can give, made to appear by one change to the
four-shape fixtures (``tests/fixtures/nccl/job-4ranks-two-pairs.log``, :mod:`support.profiler_shapes`)
— and Flight Recorder's for a group its dumps' ``pg_config`` leaves out, on a job of two pairs —
and absent from the fixture as it is (rank 3 absent from the log's last call, its kernel four times
its peers', each pair holding other calls than the world's: no reason for any of them).

Every expected sentence is written from the change made (the ranks, files and counts it leaves).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from collviz.runtime.sources import open_artifacts

from support.fr_dumps import dump, entry
from support.paths import FIXTURES
from support.profiler_shapes import trace, write_traces

LOG = FIXTURES / "nccl" / "job-4ranks-two-pairs.log"
RANK_3 = "gpu-node-9:5203:"
"""How each of rank 3's lines starts (its host and pid)."""


def _log(tmp_path: Path, keep=lambda line: True, extra: tuple[str, ...] = ()) -> list[str]:
    """The warnings of the log with only the lines ``keep`` takes, and ``extra`` lines after them."""
    lines = [line for line in LOG.read_text().splitlines() if keep(line)] + list(extra)
    (tmp_path / "nccl.log").write_text("\n".join(lines) + "\n")
    return open_artifacts([tmp_path / "nccl.log"]).warnings


def test_the_log_as_it_is_warns_of_nothing():
    """Rank 3 printed no all_reduce #2, and pair B no call rank 0 made: neither is a warning."""
    assert open_artifacts([LOG]).warnings == []


def test_a_rank_without_a_line_is_named(tmp_path):
    assert _log(tmp_path, lambda line: not line.startswith(RANK_3)) == [
        "the log has no lines of rank 3 (the job has 4 ranks)"]


def test_a_log_without_per_call_lines_is_topology_only(tmp_path):
    assert _log(tmp_path, lambda line: "opCount" not in line and "Bytes -> Algo" not in line) == [
        "the log has no per-call lines (NCCL_DEBUG_SUBSYS=COLL,TUNING prints them): topology only"]


def test_point_to_point_calls_are_counted_and_left_out(tmp_path):
    """Rank 0 sends to its pair's rank 1, which receives: two lines, two calls not shown."""
    send = ("gpu-node-9:5200:5200 [0] NCCL INFO Send: opCount 1 sendbuff 0x7f0000000000 recvbuff 0x7f0000000000 "
            "count 4 datatype 7 op 0 root 1 comm 0x7e22b000 [nranks=2] stream 0x5500a000")
    receive = ("gpu-node-9:5201:5201 [1] NCCL INFO Recv: opCount 1 sendbuff 0x7f0010000000 recvbuff 0x7f0010000000 "
               "count 4 datatype 7 op 0 root 0 comm 0x7e22b010 [nranks=2] stream 0x5500a100")
    assert _log(tmp_path, extra=(send, receive)) == ["2 point-to-point calls (Send/Recv) are not shown"]


def _traces(tmp_path: Path, change=None, ranks=range(4)) -> list[str]:
    """The warnings of the profiler traces of ``ranks``, each first given to ``change(rank, trace)``."""
    for rank in ranks:
        content = trace(rank)
        if change is not None:
            change(rank, content)
        (tmp_path / f"trace_{rank}.json").write_text(json.dumps(content))
    return open_artifacts([tmp_path]).warnings


def test_the_traces_as_they_are_warn_of_nothing(tmp_path):
    """Rank 3's four-times-longer kernel, and two groups of two ranks each with one call: no warning."""
    assert open_artifacts([write_traces(tmp_path)]).warnings == []


def test_a_missing_ranks_trace_is_named(tmp_path):
    assert _traces(tmp_path, ranks=(0, 1, 2)) == ["no trace of rank 3 (4 in the job)"]


def test_a_second_trace_of_a_rank_is_left_out(tmp_path):
    write_traces(tmp_path)
    shutil.copy(tmp_path / "trace_2.json", tmp_path / "trace_2_again.json")
    assert open_artifacts([tmp_path]).warnings == ["rank 2 has two traces: trace_2_again.json left out"]


def test_ranks_holding_different_numbers_of_a_groups_calls_are_said(tmp_path):
    """Rank 3's trace holds the world's all_reduce twice (a second row and kernel): r0–r2 hold 1, r3 2."""
    def repeat_the_world_call(rank: int, content: dict) -> None:
        if rank == 3:
            again = [json.loads(json.dumps(e)) for e in content["traceEvents"] if e["args"]["External id"] == 20]
            for event in again:
                event["args"]["External id"] = 30
                event["ts"] += 10_000
            content["traceEvents"] += again

    assert _traces(tmp_path, repeat_the_world_call) == [
        "the ranks' traces hold different numbers of calls on group 0 (default_pg) (r0: 1, r1: 1, r2: 1, r3: 2): "
        "calls are matched in order"]


def test_a_call_without_its_kernel_is_untimed_and_said(tmp_path):
    def lose_a_kernel(rank: int, content: dict) -> None:
        if rank == 2:
            content["traceEvents"] = [e for e in content["traceEvents"] if e["name"] == "record_param_comms"
                                      or e["args"]["External id"] != 21]

    assert _traces(tmp_path, lose_a_kernel) == [
        "rank 2: 1 of 2 calls have no time of their own in the trace (their work slice or kernel was not found)"]


def test_a_group_naming_a_rank_beyond_the_job_is_damaged_input(tmp_path):
    def name_rank_9(rank: int, content: dict) -> None:
        if rank == 2:
            content["distributedInfo"]["pg_config"][1]["ranks"] = [2, 9]

    assert _traces(tmp_path, name_rank_9) == [
        "rank 2: group 2 (tp_b) names rank 9 of a 4-rank job: damaged input, its ranks taken as unknown"]


def test_two_processes_claiming_one_rank_leave_the_second_out(tmp_path):
    """A process 5299 prints itself as rank 3 of the world too: a second job in the log."""
    other = [line.replace(":5203:5203 [3]", ":5299:5299 [3]").replace("0x7e11a030", "0x7e99a030")
             for line in LOG.read_text().splitlines() if line.startswith(RANK_3) and "nranks 4" in line]
    assert len(other) == 2 and _log(tmp_path, extra=tuple(other)) == [
        "two processes say they are rank 3 (one is gpu-node-9:5299): the log holds more than one job; "
        "the second is left out"]


def test_call_lines_alone_are_numbered_by_host_and_device(tmp_path):
    assert _log(tmp_path, lambda line: "opCount" in line or "Bytes -> Algo" in line) == [
        "the log has per-call lines but no init lines (comm … rank R nranks N): its ranks are numbered by host and "
        "device, not as the job numbered them"]


def test_a_rank_printing_calls_but_never_its_rank_is_left_out(tmp_path):
    """Rank 3's init, comm and ring lines gone, its call lines kept: 1 rank unnamed, and then absent."""
    kept = _log(tmp_path, lambda line: not line.startswith(RANK_3) or "opCount" in line or "Bytes -> Algo" in line)
    assert kept == ["1 ranks print calls but never their rank (their init lines are not in the log): left out",
                    "the log has no lines of rank 3 (the job has 4 ranks)"]


def test_ring_lines_of_a_thread_that_says_two_ranks_are_not_drawn(tmp_path):
    """Process 5299 prints no comm line, and its two Ring lines put it at rank 1 and at rank 2."""
    stray = ("gpu-node-9:5299:5299 [5] NCCL INFO Ring 00 : 0 -> 1 -> 2",
             "gpu-node-9:5299:5299 [5] NCCL INFO Ring 01 : 1 -> 2 -> 3")
    assert _log(tmp_path, extra=stray) == [
        "2 ring, tree or link lines of threads whose rank the log never names: not drawn"]


def test_a_line_too_long_is_cut_to_its_first_characters(tmp_path):
    """64 KiB = 65,536 characters are read of a line of 70,000."""
    long_line = "gpu-node-9:5200:5200 [0] NCCL INFO " + "x" * 70_000
    assert _log(tmp_path, extra=(long_line,)) == [
        "1 lines longer than 65,536 characters: only their first 65,536 are read"]


def _pair_dumps(folder: Path, configs: dict[str, str]) -> list[str]:
    """The warnings of a 4-rank job's dumps (:mod:`support.fr_dumps`): an all_reduce on the world, then
    each rank's pair's (group ``1``: ranks 0, 1; ``2``: ranks 2, 3), all completed; ``pg_config`` as
    ``configs`` gives it (name → its ranks as torch writes them), ``pg_status`` numbered per process
    as torch's gloo numbers it (each rank's own groups ``0`` and ``1``, whatever their names)."""
    for rank in range(4):
        pair = ("1", "undefined") if rank < 2 else ("2", "undefined")
        made = dump([entry(1), entry(1, group=pair, record_id=2)])
        made["pg_config"] = {name: {"name": name, "desc": "", "ranks": ranks} for name, ranks in configs.items()}
        made["pg_status"] = {"0": made["pg_status"]["0"], "1": made["pg_status"]["0"]}
        (folder / f"rank_{rank}.json").write_text(json.dumps(made))
    return open_artifacts([folder]).warnings


def test_groups_not_in_pg_config_are_the_ranks_whose_calls_name_them(tmp_path):
    """gloo's dumps name no group but a blank one: each pair is taken from the ranks whose entries
    name it — 0, 1 and 2, 3 — never from pg_status, whose '1' is group 1 on ranks 0, 1 and group 2 on
    ranks 2, 3."""
    assert _pair_dumps(tmp_path, {"": "[]"}) == [
        "group 1: its ranks are not in the dumps' pg_config; taken as the ranks whose dumps mention it: 0, 1",
        "group 2: its ranks are not in the dumps' pg_config; taken as the ranks whose dumps mention it: 2, 3"]


def test_groups_pg_config_names_are_taken_without_a_warning(tmp_path):
    assert _pair_dumps(tmp_path, {"0": "[0, 1, 2, 3]", "1": "[0, 1]", "2": "[2, 3]"}) == []


def test_a_default_group_keyed_blank_in_pg_config_is_read_as_one_group(tmp_path):
    """pg_config keys the world '' where the entries name it '0': one group of ranks 0–3, said once."""
    assert _pair_dumps(tmp_path, {"": "[0, 1, 2, 3]", "1": "[0, 1]", "2": "[2, 3]"}) == [
        "group 0 (default_pg) is keyed '' in the dumps' pg_config but '0' in their entries (torch's own analyser "
        "fails on this): read as one group"]
