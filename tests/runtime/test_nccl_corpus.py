"""Real NCCL logs, as jobs printed them (``tests/fixtures/nccl/real/``, each file's source in its
README), opened as collviz runs.

Every expected value below was worked out by hand from the lines of the file it names: which
``comm … rank R nranks N`` lines it holds (the ranks present and the job's size), what each
``Trees`` line says (``children->rank->parent`` since NCCL 2.7; a rank's line names its children
too), what each per-call line says (opCount in hex, numbered from #1: opCount 0x1a is call #27).
Then the same logs with their lines reordered or prefixed as other launchers print them, and
hostile variants of a log.
"""

from __future__ import annotations

import os
import random
import tracemalloc
from collections import defaultdict
from pathlib import Path

import pytest

from collviz.runtime.errors import UsageError
from collviz.runtime.sources import open_artifacts
from collviz.runtime.sources.nccl_lines import LogReader
from collviz.runtime.wire.protocol import Phase, RankStart, Transfer

from support.nccl_readings import calls as _calls
from support.nccl_readings import hops as _hops
from support.nccl_readings import shape as _shape
from support.nccl_readings import tree as _tree
from support.paths import FIXTURES


REAL = FIXTURES / "nccl" / "real"
MADE = FIXTURES / "nccl" / "job-4ranks.log"
FLOAT32 = 4


def _open(path: Path):
    return open_artifacts([path])


SIXTEEN = "channels 00, 01, 02, 03, 04, 05, 06, 07 …"


def test_one_process_driving_four_gpus_with_init_complete_last():
    """nccl#671: 4 ranks of one process; rank 0's Trees line comes before its Init COMPLETE: on
    even channels rank 0 is the root with child 3, on odd ones its parent is 3."""
    run = _open(REAL / "nccl-671-one-process-4-gpus.log")
    assert _shape(run) == (4, [0, 1, 2, 3]) and not any("no lines of rank" in w for w in run.warnings)
    devices = {e.rank: e.device for e in run.events if isinstance(e, RankStart)}
    assert devices == {0: "cuda:0 (busId 6000) on como", 1: "cuda:1 (busId 7000) on como",
                       2: "cuda:2 (busId a000) on como", 3: "cuda:3 (busId b000) on como"}
    hops = _hops(run)
    assert hops == {"NCCL tree, channels 00, 02, 04, 06 on world": _tree({3: 0}),
                    "NCCL tree, channels 01, 03, 05, 07 on world": _tree({0: 3})}
    labels = {e.buffer for e in run.events if isinstance(e, Transfer) and (e.src, e.dst) == (3, 0)}
    assert any("via P2P/direct pointer" in label for label in labels)  # rank 3 printed 3[b000] -> 0[6000]


def test_eight_ranks_of_nccl_tests_in_one_process():
    """nccl-tests#213: comm lines of ranks 1, 2, 0, 5 of 8; rank 2's tree 3 -> 2 -> 1 on 16 channels;
    rank 4's Trees line (5/-1/-1->4->3) has no comm line in the excerpt, but says its thread is
    rank 4 (child 5, parent 3): one chain 5 -> 4 -> 3 -> 2 -> 1."""
    run = _open(REAL / "nccl-tests-213-eight-ranks-one-process.log")
    assert _shape(run) == (8, [0, 1, 2, 4, 5])
    assert "the log has no lines of ranks 3, 6, 7 (the job has 8 ranks)" in run.warnings
    assert _hops(run) == {f"NCCL tree, {SIXTEEN} on world": _tree({3: 2, 2: 1, 4: 3, 5: 4})}


def test_a_64_rank_socket_job_of_which_two_ranks_say_who_they_are():
    """nccl#226 (NCCL 2.4 era): two comm lines, ranks 15 and 19 of 64; each other host's line says
    its rank: ``a -> b [send]`` is printed by a, ``a -> b [receive]`` by b, ``Trees [0] p->r->…`` by
    r (2.4: parent first). By hand: senders 35, 43, 39; receivers 34->33, 16->32, 36->40, 50->52,
    42->41, 43->42, 39->38; trees of 23, 27, 31, 35 (parents 22, 26, 30, 34). Link lines alone
    draw no ring."""
    run = _open(REAL / "nccl-226-64-ranks-socket.log")
    assert _shape(run) == (64, [15, 19, 23, 27, 31, 32, 33, 35, 38, 39, 40, 41, 42, 43, 52])
    assert _hops(run) == {"NCCL tree, channel 00 on world": _tree({23: 22, 27: 26, 31: 30, 35: 34})}
    assert _calls(run) == {}


def test_two_processes_driving_eight_gpus_each():
    run = _open(REAL / "nccl-629-two-processes-eight-gpus-each.log")
    assert _shape(run) == (16, [2, 4, 5, 8, 9, 12, 14, 15])
    devices = {e.rank: e.device for e in run.events if isinstance(e, RankStart)}
    assert devices[15] == "cuda:7 (busId e7000) on A03-R28-I49-3-9000018"
    assert devices[2] == "cuda:2 (busId 64000) on A03-R28-I49-2-6000166"


def test_a_two_node_tree_printed_after_its_comm_line():
    """nccl#1357 (2.19+ order): rank 13's line 15/-1/-1->13->14 on all 16 channels; the first line,
    of a thread with no comm line in the excerpt, is rank 12's (``…->12->…``): child 14 and parent
    11 on channels 0, 1, 4, 5, 8, 9, 12, 13; child 14 and parent 4 on 2, 6; parent 11 alone on 3,
    7, 11, 15; the root with children 14 and 4 on 10, 14."""
    run = _open(REAL / "nccl-1357-two-nodes-trees.log")
    assert _shape(run) == (16, [12, 13, 14])
    thirteen = {15: 13, 13: 14}
    assert _hops(run) == {
        "NCCL tree, channels 00, 01, 04, 05, 08, 09, 12, 13 on world": _tree({12: 11, 14: 12, **thirteen}),
        "NCCL tree, channels 02, 06 on world": _tree({12: 4, 14: 12, **thirteen}),
        "NCCL tree, channels 03, 07, 11, 15 on world": _tree({12: 11, **thirteen}),
        "NCCL tree, channels 10, 14 on world": _tree({14: 12, 4: 12, **thirteen})}


def test_mpirun_tag_output_is_a_log_not_json():
    """aws-k8s-tester#454: every line starts with [1,N]<stdout>: (the file's first character is '[')."""
    path = REAL / "aws-k8s-tester-454-mpirun-tag-output.log"
    assert path.read_text().startswith("[")
    assert _shape(_open(path)) == (32, [0, 3, 4, 5, 6, 7, 9, 22])


def test_a_cloudwatch_prefixed_libfabric_log():
    """aws-ofi-nccl#715: one Init START line (rank 4 of 16); the network named with its space."""
    run = _open(REAL / "aws-ofi-nccl-715-cloudwatch-libfabric.log")
    assert _shape(run) == (16, [4])
    [init] = [e for e in run.events if isinstance(e, Phase) and e.edge == "begin" and e.rank == 4
              and e.name == "NCCL init of world"]
    assert "network transport: AWS Libfabric\n" in init.narration


def test_per_call_lines_only_of_a_128_rank_job():
    """nccl#1193: 4 AllReduce lines of 3 ranks (Ray's prefix), no init; numbered by host name:
    fqztx, hzhzd, srrss. opCount 0x139d = 5021 (call #5022), 0x139e call #5023; datatype 7 float32."""
    run = _open(REAL / "nccl-1193-ray-coll-only.log")
    assert _shape(run) == (128, [0, 1, 2])
    first, second = 7382228, 7066572
    assert _calls(run) == {0: [("all_reduce", 5022, first, first * FLOAT32, first * FLOAT32)],
                           1: [("all_reduce", 5023, second, second * FLOAT32, second * FLOAT32)],
                           2: [("all_reduce", 5022, first, first * FLOAT32, first * FLOAT32),
                               ("all_reduce", 5023, second, second * FLOAT32, second * FLOAT32)]}
    assert any("numbered by host and device" in w for w in run.warnings)


def test_per_call_lines_of_one_process_driving_two_gpus():
    """nccl#203: threads on GPUs 0 and 1 of one process; opCounts 0x1a-0x1c on both, 0x1d on GPU 1."""
    run = _open(REAL / "nccl-203-one-process-two-gpus-coll.log")
    assert _shape(run) == (2, [0, 1])
    counts = [64, 237184, 386560]
    calls = _calls(run)
    assert [(c[1], c[2]) for c in calls[0]] == list(zip([27, 28, 29], counts))
    assert [(c[1], c[2]) for c in calls[1]] == list(zip([27, 28, 29, 30], counts + [8192]))


def test_per_call_lines_of_a_tensor_parallel_pair():
    """torchtitan#1369: an all-gather sends `count` elements and receives count × 2; a reduce-scatter
    receives `count` and sends count × 2 (2 ranks, float32)."""
    run = _open(REAL / "torchtitan-1369-tp-coll-only.log")
    count = 2097152
    gather = ("all_gather", count, count * FLOAT32, 2 * count * FLOAT32)
    scatter = ("reduce_scatter", 2 * count, 2 * count * FLOAT32, count * FLOAT32)

    def numbered(op, number):
        return (op[0], number, *op[1:])

    calls = _calls(run)
    assert calls[1] == [numbered(gather, 14), numbered(scatter, 15), numbered(gather, 16)]
    assert calls[0] == [numbered(scatter, 15), numbered(gather, 16), ("all_reduce", 17, 1, 4, 4),
                        ("all_reduce", 18, 1, 4, 4)]


def test_torchrun_rank_prefix_and_ring_orders():
    """torchtitan#1570: rank 0 of 4 prints the ring order 0 1 2 3 on channels 00-09."""
    run = _open(REAL / "torchtitan-1570-rank-prefix-channels.log")
    assert _shape(run) == (4, [0])
    assert _hops(run) == {f"NCCL ring, {SIXTEEN} on world": {(0, 1, 1), (1, 2, 1), (2, 3, 1), (3, 0, 1)}}


def _same_reading(run, reference) -> None:
    assert _shape(run) == _shape(reference)
    assert _hops(run) == _hops(reference)
    assert _calls(run) == _calls(reference)


def test_nccl_up_to_2_18_prints_init_complete_last(tmp_path):
    """The made 4-rank log without its Init START and nRanks lines (NCCL <= 2.18 prints neither: its
    Init COMPLETE line is the first to name the communicator): the same rings, trees and calls."""
    lines = [line for line in MADE.read_text().splitlines() if "Init START" not in line and "nRanks" not in line]
    assert len(lines) < len(MADE.read_text().splitlines())
    (tmp_path / "old.log").write_text("\n".join(lines))
    reference = _open(MADE)
    assert len(_hops(reference)) == 4  # the world's ring and tree, the pair's ring and tree
    _same_reading(_open(tmp_path / "old.log"), reference)


def test_topology_lines_repeated_before_their_communicator_read_once(tmp_path):
    """The old-format log (Init COMPLETE after the lines naming its channels) with each ring, tree
    and link line printed 3,000 times over: the same reading, and the reader keeps a few records,
    not one per line (before, a 1 GB such log held 4.8 GB)."""
    old = [line for line in MADE.read_text().splitlines() if "Init START" not in line and "nRanks" not in line]
    topology = ("Channel", "Trees")
    repeated = [copy for line in old for copy in ([line] * 3000 if any(word in line for word in topology) else [line])]
    assert len(repeated) - len(old) == 2999 * sum(any(word in line for word in topology) for line in old) > 60_000
    (tmp_path / "repeated.log").write_text("\n".join(repeated))
    (tmp_path / "old.log").write_text("\n".join(old))
    _same_reading(_open(tmp_path / "repeated.log"), _open(tmp_path / "old.log"))
    tracemalloc.start()
    try:
        reader = LogReader()
        for line in repeated:
            reader.feed(line)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 1 << 20  # a record per line was ~400 bytes: > 25 MB here


def test_lines_interleaved_in_any_order_across_threads(tmp_path):
    """Each thread's lines keep their order; the threads' lines are shuffled together."""
    text = (REAL / "nccl-671-one-process-4-gpus.log").read_text().splitlines()
    by_thread = defaultdict(list)
    for line in text:
        by_thread[line.split(" ")[0]].append(line)
    rng = random.Random(7)
    queues = [list(lines) for lines in by_thread.values()]
    mixed = []
    while any(queues):
        queue = rng.choice([q for q in queues if q])
        mixed.append(queue.pop(0))
    (tmp_path / "mixed.log").write_text("\n".join(mixed))
    _same_reading(_open(tmp_path / "mixed.log"), _open(REAL / "nccl-671-one-process-4-gpus.log"))


LAUNCHERS = {
    "mpirun --tag-output": lambda n, line: f"[1,{n}]<stdout>:{line}",
    "torchrun --tee": lambda n, line: f"[default{n}]:{line}",
    "srun -l": lambda n, line: f"{n}: {line}",
    "a bare rank": lambda n, line: f"[{n}] {line}",
    "a timestamp": lambda n, line: f"2026-11-25 18:00:0{n},123 INFO {line}",
}


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_every_launchers_prefix_reads_the_same(launcher, tmp_path):
    source = REAL / "nccl-671-one-process-4-gpus.log"
    prefix = LAUNCHERS[launcher]
    lines = [prefix(int(line.split("[")[1][0]), line) for line in source.read_text().splitlines()]
    (tmp_path / "prefixed.log").write_text("\n".join(lines))
    _same_reading(_open(tmp_path / "prefixed.log"), _open(source))


def _hostile() -> dict[str, tuple[bytes, str]]:
    """Name → (a log's bytes, what the import must do: 'opens' (4 ranks), 'one line at most', or the
    one-line error's words)."""
    real = (REAL / "nccl-671-one-process-4-gpus.log").read_bytes()
    rng = random.Random(3)
    garbled = bytearray(real)
    for at in rng.sample(range(len(garbled)), 200):
        garbled[at] = rng.randrange(0, 256)
    big = "9" * 5000
    call = ("como:60725:60748 [0] NCCL INFO AllReduce: opCount {} sendbuff 0x1 recvbuff 0x1 count {} datatype 7 op 0 "
            "root 0 comm 0x7f785b102010 [nranks=4] stream 0x1\n")
    return {
        "truncated mid-line": (real[:-30], "opens"),
        "garbled": (bytes(garbled), "one line at most"),
        "ranks beyond any job": (f"h:1:2 [0] NCCL INFO comm 0x1 rank 5 nranks {10**30} cudaDev 0 - Init COMPLETE\n"
                                 f"h:1:2 [0] NCCL INFO comm 0x2 rank {big} nranks 4 - Init COMPLETE\n"
                                 f"h:{big}:2 [0] NCCL INFO comm 0x3 rank 1 nranks 4 - Init COMPLETE\n".encode(),
                                 "no communicator"),
        "a huge opCount and count": (real + (call.format("f" * 16, 8) + call.format("5", "9" * 20)).encode(), "opens"),
        "only NCCL's marker": (b"NCCL INFO\n" * 1000, "without NCCL INFO lines"),
        "huge": (real, "opens"),  # grown past the bounded read below, sparse: a crash's NUL bytes, streamed
    }


def test_hostile_logs_open_or_get_one_line(tmp_path):
    for name, (data, outcome) in _hostile().items():
        path = tmp_path / f"{name.replace(' ', '-')}.log"
        path.write_bytes(data)
        if name == "huge":
            os.truncate(path, 300 * 1024 * 1024)
        try:
            run = _open(path)
        except UsageError as refused:
            assert outcome not in ("opens",) and "\n" not in str(refused), (name, str(refused))
            assert outcome == "one line at most" or outcome in str(refused), (name, str(refused))
            continue
        finally:
            path.unlink()
        assert outcome in ("opens", "one line at most"), name
        if outcome == "opens":
            assert _shape(run) == (4, [0, 1, 2, 3]), name
    (tmp_path / "damaged.log").write_bytes(_hostile()["a huge opCount and count"][0])
    text = "\n".join(_open(tmp_path / "damaged.log").warnings)
    assert "1 lines name a rank or an opCount that cannot be" in text  # opCount 2^64 - 1
    assert "1 calls with a size beyond any device: damaged input" in text  # 10^20 float32 elements


@pytest.mark.parametrize(("line", "rank", "parents", "children"), [
    # NCCL 2.5 (nccl#300): each tree both ways, down->rank->up | up->rank->down
    ("73e9f9f45158:6243:6442 [3] NCCL INFO Trees [0] -1/-1/-1->3->2|2->3->-1/-1/-1 [1] 1/-1/-1->3->2|2->3->1/-1/-1",
     3, {0: 2, 1: 2}, {0: [], 1: [1]}),
    # NCCL 2.4 (nccl#246): parent->rank->children
    ("gpu1:134116:134566 [5] NCCL INFO Trees [0] 4->5->6/-1/-1", 5, {0: 4}, {0: [6]}),
    # NCCL 2.4's other form (nccl-tests#329): Tree channel : parent -> rank -> children
    ("a4df80236412:808:815 [0] NCCL INFO Tree 12 : -1 -> 0 -> -1/-1/-1", 0, {12: -1}, {12: []}),
    # NCCL 2.7 on (nccl#1357): children->rank->parent, a root with two children
    ("qh100-gpu20:39633:39689 [4] NCCL INFO Trees [10] 14/4/-1->12->-1", 12, {10: -1}, {10: [14, 4]}),
])
def test_every_versions_trees_line(line, rank, parents, children):
    """A real Trees line of each NCCL format, then a comm line on the same thread (written here: the
    issues' excerpts do not hold one) naming the rank: the line's parent and children, by hand."""
    from collviz.runtime.sources.nccl_lines import LogReader

    reader = LogReader()
    reader.feed(line)
    thread = line.split(" ")[0]
    reader.feed(f"{thread} [0] NCCL INFO comm 0x1 rank {rank} nranks 16 cudaDev 0 busId 0 - Init COMPLETE")
    [comm] = reader.comms()
    assert (comm.trees, comm.children) == (parents, children)
