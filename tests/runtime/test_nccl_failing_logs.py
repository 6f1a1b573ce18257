"""A failing job's NCCL log reads as failing, and whatever part of a log there is reads.

Real logs pasted into public issues (``tests/fixtures/nccl/real/``, each file's source in its
README): WARN lines with and without a source location, on a rank the log names or not, on a
helper thread that prints another device's number; a log without a ``comm … nranks`` line;
ring lines NCCL cut at 20 ranks; six init records glued on one line; a log of ``Destroy`` lines
only. Every expected value was read off the file's lines by hand (worked out in each test's
docstring), never from the reader. Then the same logs changed as a crash or a terminal changes
them: a NUL byte, every line glued into one, a WARN line dropped anywhere.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from collviz.runtime.errors import UsageError
from collviz.runtime.sources import open_artifacts
from collviz.runtime.sources.nccl_records import records
from collviz.runtime.wire.protocol import Phase, RankEnd, RankStart, RunEnd

from support.nccl_readings import hops, shape, tree
from support.paths import FIXTURES

REAL = FIXTURES / "nccl" / "real"
FOUR_GPUS = REAL / "nccl-671-one-process-4-gpus.log"


def _end(run) -> RunEnd:
    [end] = [e for e in run.events if isinstance(e, RunEnd)]
    return end


def _errors(run) -> dict[int, str]:
    """rank → the error its RankEnd carries, for each rank that ended in error."""
    return {e.rank: e.error for e in run.events if isinstance(e, RankEnd) and e.status == "error"}


def _devices(run) -> dict[int, str]:
    return {e.rank: e.device for e in run.events if isinstance(e, RankStart)}


@pytest.mark.parametrize(("line", "expected"), [
    # nccl#1405: a plugin's source location between the device and the level
    ("kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer "
     "10.216.210.236<54862> with status=12",
     [("kp-ddp-worker-0", 3468, 3905, "4", "WARN", "ib_plugin.c:1615", "NET/IB : Got completion from peer "
       "10.216.210.236<54862> with status=12")]),
    # nccl#1283: Ray's prefix and a timestamp before NCCL's
    ("(train_rft pid=2657296) 2024-05-11 14:10:52.227 n176-080-198:2657296:2658232 [0] include/alloc.h:102 NCCL "
     "WARN Cuda failure 1 'invalid argument'",
     [("n176-080-198", 2657296, 2658232, "0", "WARN", "include/alloc.h:102", "Cuda failure 1 'invalid argument'")]),
    # issue #41's spelling: the host cut off, the location kept
    ("[0] transport/net_ib.cc:1075 NCCL WARN NET/IB : error 12",
     [(None, 0, 0, "0", "WARN", "transport/net_ib.cc:1075", "NET/IB : error 12")]),
    # an ERROR-level record reads as a warning does
    ("node1:10:11 [3] NCCL ERROR unhandled system error",
     [("node1", 10, 11, "3", "ERROR", "", "unhandled system error")]),
    # an INFO line without NCCL's prefix is some other program's text
    ("NCCL INFO NCCL version 2.24.3+cuda12.2", []),
    # two records glued: each keeps its own fields
    ("a:1:2 [5] NCCL INFO comm 0x1 rank 5 nranks 16 - Init COMPLETE       b:3:4 [2] NCCL INFO comm 0x2 rank 2",
     [("a", 1, 2, "5", "INFO", "", "comm 0x1 rank 5 nranks 16 - Init COMPLETE"),
      ("b", 3, 4, "2", "INFO", "", "comm 0x2 rank 2")]),
])
def test_records_of_a_line(line, expected):
    assert [tuple(r) for r in records(line)] == expected


def test_six_init_records_glued_on_one_line_and_an_ib_warning():
    """DeepEP#106: the first physical line holds (after the excerpt's cut first record) the init
    records of ranks 5, 1, 0, 4, 6, 2 of 16 (busId 9c000, 16000, 3000, 84000, b6000, 1c000), rank
    2's commId cut by a line break (``0x`` then ``599e…`` on the next line); then pid 11978's proxy
    thread on GPU 0 — rank 0 — warns ``error 12 … vendor err 129``. One communicator, failed."""
    run = open_artifacts([REAL / "deepep-106-init-records-glued-on-one-line-ib-warn.log"])
    assert shape(run) == (16, [0, 1, 2, 4, 5, 6])
    host = "VM-17-82-centos"
    assert _devices(run) == {5: f"cuda:5 (busId 9c000) on {host}", 1: f"cuda:1 (busId 16000) on {host}",
                             0: f"cuda:0 (busId 3000) on {host}", 4: f"cuda:4 (busId 84000) on {host}",
                             6: f"cuda:6 (busId b6000) on {host}", 2: f"cuda:2 (busId 1c000) on {host}"}
    warning = ("NCCL WARN NET/IB : Got completion from peer 172.21.17.89<38536> with error 12, opcode 32715, "
               "len 0, vendor err 129 (ib_plugin.c:1075)")
    assert run.exit_status == 1
    # the record names 16 ranks; the six glued records are ranks 0-2 and 4-6
    unknown = " (10 of 16 ranks unknown: ranks 3, 7–15, not in the log)"
    assert _end(run).status == "failed" and _end(run).detail == f"{warning} on rank 0 ({host}){unknown}"
    assert _errors(run) == {0: f"{warning} on {host}"}
    assert "the log has no lines of ranks 3, 7–15 (the job has 16 ranks)" in run.warnings
    assert not any("nccl comm 1" in name for name in hops(run))


def test_rings_nccl_cut_at_twenty_ranks_are_drawn_as_far_as_printed():
    """nccl#1453: rank 0 of 24 (``nRanks 24``, NVLS heads) prints channels 00 and 01 with 20 ranks
    each, NCCL <= 2.22's most: 0 7 6 5 4 3 2 1 8 15 14 13 12 11 10 9 16 23 22 21 and 0 7 6 5 4 3 2
    9 8 15 14 13 12 11 10 17 16 23 22 21. The 19 hops each shows, no hop back to 0 (21 -> 0 would
    be invented: ranks 17-20 are not on the line), and a warning."""
    run = open_artifacts([REAL / "nccl-1453-24-ranks-rings-cut-at-20.log"])
    assert shape(run) == (24, [0])
    first = [0, 7, 6, 5, 4, 3, 2, 1, 8, 15, 14, 13, 12, 11, 10, 9, 16, 23, 22, 21]
    second = [0, 7, 6, 5, 4, 3, 2, 9, 8, 15, 14, 13, 12, 11, 10, 17, 16, 23, 22, 21]
    assert hops(run) == {"NCCL ring (cut), channel 00 on world": {(a, b, 1) for a, b in zip(first, first[1:])},
                         "NCCL ring (cut), channel 01 on world": {(a, b, 1) for a, b in zip(second, second[1:])}}
    assert ("the ring of channels 00, 01 on world is cut in the log: the line names 20 of 24 ranks (NCCL up to 2.22 "
            "prints at most 20); drawn as far as printed, not closed") in run.warnings
    assert run.exit_status == 0


def test_a_ring_line_cut_with_dots_is_a_prefix(tmp_path):
    """NCCL 2.23 on ends a line it cut with ``...``: the 6 ranks shown of 8, 5 hops, no closing hop."""
    path = tmp_path / "dots.log"
    path.write_text("h:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0\n"
                    "h:1:2 [0] NCCL INFO Channel 00/02 :    0   1   2   3   4   5...\n")
    run = open_artifacts([path])
    assert hops(run) == {"NCCL ring (cut), channel 00 on world": {(r, r + 1, 1) for r in range(5)}}
    assert any("channel 00 on world is cut in the log: the line ends cut after 6 ranks" in w for w in run.warnings)


def test_a_log_without_comm_lines_names_ranks_by_their_own_lines():
    """nccl-tests#188 (16 GPUs on two hosts, both named ``user``): no ``comm`` line. Each thread's
    lines say its rank: ``Trees … ->7->`` (pid 16906), ``->4->`` (16903), ``->0->`` (16899, also
    ``9[1] -> 0[0] [receive]``), links sent by 11 (695834), 8 (695831), 12 (695835), 15 (695838),
    6 (16905). Rank 0 prints the ring 0 1 2 3 4 5 6 7 8 15 14 13 12 11 10 9 on channels 00 and 01
    (16 ranks, whole); trees: 7's parent 6 and child 0, 4's parent 3 and child 5, 0's parent 7 and
    child 1. No line prints nranks: at least 16 ranks. pid 16899's thread on GPU 0 warns (rank 0)."""
    run = open_artifacts([REAL / "nccl-tests-188-sixteen-ranks-no-comm-line-socket-warn.log"])
    assert shape(run) == (16, [0, 4, 6, 7, 8, 11, 12, 15])
    ring = [0, 1, 2, 3, 4, 5, 6, 7, 8, 15, 14, 13, 12, 11, 10, 9]
    assert hops(run) == {"NCCL ring, channels 00, 01 on world": {(a, ring[(i + 1) % 16], 1) for i, a in enumerate(ring)},
                         "NCCL tree, channels 00, 01 on world": tree({7: 6, 0: 7, 4: 3, 5: 4, 1: 0})}
    assert ("no line of the log prints the job's rank count (comm … nranks N): it has at least 16 ranks, those its "
            "ring, tree and link lines name") in run.warnings
    assert "the log has no lines of ranks 1–3, 5, 9, 10, 13, 14 (the job has at least 16 ranks)" in run.warnings
    assert run.exit_status == 1
    assert _end(run).detail == ("NCCL WARN socketFinalizeAccept: wrong type 4 != 3 (misc/socket.cc:441) on rank 0 (user)"
                                " (8 of 16 ranks unknown: ranks 1–3, 5, 9, 10, 13, 14, not in the log)")


def test_a_log_of_destroy_lines_only_reads_as_its_ranks():
    """aks-rdma-infiniband#30: seven ``comm … rank R nranks 16 cudaDev D busId B - Destroy COMPLETE``
    lines (ranks 15, 1, 13, 14, 6, 5, 7), once refused as having no communicator."""
    run = open_artifacts([REAL / "aks-rdma-infiniband-30-destroy-lines-only.log"])
    assert shape(run) == (16, [1, 5, 6, 7, 13, 14, 15])
    assert _devices(run)[15] == "cuda:7 (busId e00000) on nccl-tests-worker-1"
    assert _devices(run)[1] == "cuda:1 (busId 200000) on nccl-tests-worker-0"
    assert run.exit_status == 0 and _end(run).status == "ok"


def test_warnings_of_a_log_that_names_no_rank():
    """nccl#1405: three ``ib_plugin.c:1615 NCCL WARN`` lines of kp-ddp-worker-0's GPU 4, no rank
    anywhere: one rank, numbered, said so; the run failed on the first (``status=12 opcode=0``)."""
    run = open_artifacts([REAL / "nccl-1405-ib-plugin-warn-rank-not-printed.log"])
    assert shape(run) == (1, [0]) and _devices(run) == {0: "cuda:4 on kp-ddp-worker-0"}
    assert run.exit_status == 1
    assert _end(run).detail == (
        "NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err "
        "129 (Recv) localGid fd00:1148:9000:5000:4:200:3:ff22 remoteGidsfd00:1148:9000:5000:4:200:3:ff1f "
        "(ib_plugin.c:1615) on rank 0 (kp-ddp-worker-0) (and 2 more WARN/ERROR lines)")
    assert any("ranks that printed WARN lines are numbered by host and device" in w for w in run.warnings)


def test_warnings_of_three_hosts_numbered_by_host():
    """nccl#928 (``NCCL_DEBUG=trace``, the first line after the issue's ``error log ``` text): WARN
    lines of H100-2 GPU 1, H100-1 GPU 1, H100-5 GPU 3, no rank printed: numbered by host, H100-1
    is 0, H100-2 is 1, H100-5 is 2; the first warning is H100-2's."""
    run = open_artifacts([REAL / "nccl-928-ib-warns-of-three-hosts.log"])
    assert shape(run) == (3, [0, 1, 2])
    assert _devices(run) == {0: "cuda:1 on H100-1", 1: "cuda:1 on H100-2", 2: "cuda:3 on H100-5"}
    assert _end(run).detail == (
        "NCCL WARN NET/IB : Got completion from peer fe80::966d:ae03:8b:df78%ib0<53249> with error 4, opcode 32564, "
        "len 32564, vendor err 81 (Send) (transport/net_ib.cc:1295) on rank 1 (H100-2) (and 2 more WARN/ERROR lines, "
        "on ranks 0, 2 too)")
    assert set(_errors(run)) == {0, 1, 2}


def test_a_helper_threads_warning_goes_to_its_process_rank():
    """DeepSpeedExamples#310: 8 processes of gpu1, one rank each (pid 5021 is rank 0, 5022 rank 1,
    5023 rank 2, 5024 rank 3); NCCL's IB async thread prints ``[0]`` in every one of them, so the
    four warnings are ranks 0, 2, 1, 3's — not four times rank 0's."""
    run = open_artifacts([REAL / "deepspeedexamples-310-async-event-warn-on-helper-thread.log"])
    assert shape(run) == (8, list(range(8)))
    text = "NCCL WARN NET/IB : Got async event : client reregistration (transport/net_ib.cc:93) on gpu1"
    assert _errors(run) == dict.fromkeys([0, 1, 2, 3], text)
    assert _end(run).detail == (f"{text.removesuffix(' on gpu1')} on rank 0 (gpu1) (and 3 more WARN/ERROR lines, "
                                "on ranks 1–3 too)")


@pytest.mark.parametrize("form", ["--headless", "--json"])
def test_headless_replay_of_a_failed_log_exits_1_naming_the_warning(form):
    log = REAL / "deepep-106-init-records-glued-on-one-line-ib-warn.log"
    done = subprocess.run([sys.executable, "-m", "collviz", "replay", str(log), form], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    first = ("NCCL WARN NET/IB : Got completion from peer 172.21.17.89<38536> with error 12, opcode 32715, len 0, "
             "vendor err 129 (ib_plugin.c:1075) on rank 0 (VM-17-82-centos) "
             "(10 of 16 ranks unknown: ranks 3, 7–15, not in the log)")
    if form == "--json":
        outcome = json.loads(done.stdout)["outcome"]
        assert (outcome["status"], outcome["detail"]) == ("failed", first)
    else:
        assert f"result: failed — {first}" in done.stdout


def test_every_line_glued_into_one_reads_the_same(tmp_path):
    """The 4-GPU log of nccl#671 with all its lines joined by spaces: the same ranks, devices and trees."""
    glued = tmp_path / "glued.log"
    glued.write_text("   ".join(FOUR_GPUS.read_text().splitlines()) + "\n")
    run, reference = open_artifacts([glued]), open_artifacts([FOUR_GPUS])
    assert (shape(run), hops(run), _devices(run)) == (shape(reference), hops(reference), _devices(reference))


def test_nul_bytes_a_crash_left_are_passed_over(tmp_path):
    data = FOUR_GPUS.read_bytes()
    crashed = tmp_path / "crashed.log"
    crashed.write_bytes(data[:10] + b"\x00" + data[10:] + b"\x00" * 4096)
    run, reference = open_artifacts([crashed]), open_artifacts([FOUR_GPUS])
    assert (shape(run), hops(run)) == (shape(reference), hops(reference))
    assert "4,097 NUL bytes passed over (what a crash leaves in a log where it was writing)" in run.warnings


def test_a_warning_anywhere_fails_the_run_on_its_rank(tmp_path):
    """A WARN line of como's pid 60725, GPU 2 (rank 2 in nccl#671) put between any two lines."""
    lines = FOUR_GPUS.read_text().splitlines()
    warning = "como:60725:60799 [2] transport/net_socket.cc:540 NCCL WARN NET/Socket : peer closed the connection"
    for at in random.Random(5).sample(range(len(lines) + 1), 5):
        path = tmp_path / f"warn-{at}.log"
        path.write_text("\n".join([*lines[:at], warning, *lines[at:]]))
        run = open_artifacts([path])
        assert run.exit_status == 1 and list(_errors(run)) == [2], at
        assert _end(run).detail.endswith("(transport/net_socket.cc:540) on rank 2 (como)"), at


def test_a_folder_of_refused_files_names_each_reason(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "data.json").write_text('{"a": 1}')
    with pytest.raises(UsageError) as refused:
        open_artifacts([tmp_path])
    assert str(refused.value) == (
        f"{tmp_path}: nothing to open (data.json: JSON that is neither a Flight Recorder dump, a torch.profiler trace "
        "nor NCCL Inspector output; notes.txt: text without NCCL INFO lines); expected Flight Recorder dumps (JSON or "
        "pickle, one per rank), torch.profiler traces (one per rank), an NCCL_DEBUG=INFO log or NCCL Inspector output")


def test_rings_printed_by_a_rank_without_comm_line_are_drawn():
    """nccl#1412 (one process of swat1-04 driving GPUs 0-7 of 16 ranks): comm lines of ranks 6, 3,
    5, 7 only. GPU 0's thread prints five ring orders and no rank of its own: they are the
    communicator's (channels 00 and 04 the same ring: 0 5 4 7 6 3 2 1 8 13 12 15 14 11 10 9; 01: 0
    5 4 7 6 3 10 9 8 13 12 15 14 11 2 1; 02: 0 5 4 7 14 11 10 9 8 13 12 15 6 3 2 1; 03: 0 5 12 15 14
    11 10 9 8 13 4 7 6 3 2 1). GPU 1's thread prints only ``Trees``, ``…->1->0``: rank 1, parent 0,
    child 2 on channels 0, 2, 3, 4, 6, 7, none on 1 and 5. Once dropped without a word."""
    run = open_artifacts([REAL / "nccl-1412-sixteen-ranks-rings-of-a-rank-without-comm-line.log"])
    assert shape(run) == (16, [1, 3, 5, 6, 7])

    def ring(order):
        return {(a, order[(i + 1) % len(order)], 1) for i, a in enumerate(order)}

    assert hops(run) == {
        "NCCL ring, channels 00, 04 on world": ring([0, 5, 4, 7, 6, 3, 2, 1, 8, 13, 12, 15, 14, 11, 10, 9]),
        "NCCL ring, channel 01 on world": ring([0, 5, 4, 7, 6, 3, 10, 9, 8, 13, 12, 15, 14, 11, 2, 1]),
        "NCCL ring, channel 02 on world": ring([0, 5, 4, 7, 14, 11, 10, 9, 8, 13, 12, 15, 6, 3, 2, 1]),
        "NCCL ring, channel 03 on world": ring([0, 5, 12, 15, 14, 11, 10, 9, 8, 13, 4, 7, 6, 3, 2, 1]),
        "NCCL tree, channels 00, 02, 03, 04, 06, 07 on world": tree({2: 1, 1: 0}),
        "NCCL tree, channels 01, 05 on world": tree({1: 0})}
    [init] = {e.narration for e in run.events if isinstance(e, Phase) and e.name == "NCCL init of world" and e.narration}
    assert "hosts: swat1-04 (ranks 1, 3, 5–7)" in init.splitlines()


def test_a_warning_whose_host_is_cut_off(tmp_path):
    """Issue 41's spelling of a warning, ``[0] transport/net_ib.cc:1075 NCCL WARN …``, alone: one
    rank (GPU 0, no host), in error, the run failed naming it."""
    path = tmp_path / "cut.log"
    path.write_text("[0] transport/net_ib.cc:1075 NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, "
                    "vendor err 129\n")
    run = open_artifacts([path])
    text = "NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129 (transport/net_ib.cc:1075)"
    assert (shape(run), _devices(run), run.exit_status) == ((1, [0]), {0: "cuda:0"}, 1)
    assert _errors(run) == {0: f"{text} on a host the log does not name"}
    assert _end(run).detail == f"{text} on rank 0 (a host the log does not name)"
