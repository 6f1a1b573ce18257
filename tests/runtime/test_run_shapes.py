"""``collviz run --nproc 4`` of a script in the four shapes that tell wrong from right, run once each
way for the module (real gloo ranks): read from Flight Recorder (the default) and ``--observe``d.

The script (below): every rank makes pair A of ranks 0, 1 and pair B of ranks 2, 3 (two groups of the
same size, B without rank 0); an all_reduce of 1,024 float32 on the world; A all-gathers 4 float32
per rank, B 8; rank 3 sleeps :data:`SLEEP_S` and only then joins a second world all_reduce, of 16
float64, where its peers wait for it.

By hand: S (nccl-tests) = 1,024 × 4 = 4,096 B for the first all_reduce, 16 × 8 = 128 B for the
second; A's all_gather 2 ranks × 4 × 4 B = 32 B, B's 2 × 8 × 4 = 64 B. algbw = S / t with t the
slowest rank's time, busbw = algbw × 2·3/4 on the world, × 1/2 on a pair. The times are measured:
the tests compute the figures from them with those formulas, and bound only what sleeping sets
(ranks 0–2 wait at least SLEEP_S; rank 3, arriving last, waits less than any of them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from collviz.runtime.wire.protocol import Collective, Phase, RankStart
from collviz.runtime.wire.trace import read_trace

SLEEP_S = 2.0

SCRIPT = textwrap.dedent(f'''
    import time
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    pair_a = dist.new_group([0, 1])
    pair_b = dist.new_group([2, 3])
    dist.all_reduce(torch.ones(1024))
    if rank in (0, 1):
        dist.all_gather([torch.empty(4) for _ in range(2)], torch.ones(4), group=pair_a)
    else:
        dist.all_gather([torch.empty(8) for _ in range(2)], torch.ones(8), group=pair_b)
    if rank == 3:
        time.sleep({SLEEP_S})
    dist.all_reduce(torch.ones(16, dtype=torch.float64))
''')

DEADLINE_S = 180

CALLS = {  # (first group rank, call number on the group) → (op, group's ranks, bytes in, bytes out, S)
    (0, 1): ("all_reduce", [0, 1, 2, 3], 4_096, 4_096, 4_096),
    (0, 2): ("all_reduce", [0, 1, 2, 3], 128, 128, 128),
    (10, 1): ("all_gather", [0, 1], 16, 32, 32),
    (20, 1): ("all_gather", [2, 3], 32, 64, 64),
}
"""Every call by (10 for pair A, 20 for pair B, 0 for the world; its number on its group)."""


def _key(call: dict) -> tuple[int, int]:
    """A call's key in :data:`CALLS`, from its group's ranks (never its label)."""
    return {(0, 1, 2, 3): 0, (0, 1): 10, (2, 3): 20}[tuple(call["group_ranks"])], call["group_seq"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """The script run to its end both ways: ``--json`` summary, the trace's events, stderr."""
    folder = tmp_path_factory.mktemp("run_shapes")
    (folder / "shapes.py").write_text(SCRIPT)
    found = {}
    for name, options in {"recorder": (), "observed": ("--observe",)}.items():
        trace = folder / f"{name}.cvz"
        result = subprocess.run([sys.executable, "-m", "collviz.app.cli", "run", "--nproc", "4", "--headless", "--json",
                                 "--record", str(trace), *options, str(folder / "shapes.py")], capture_output=True,
                                text=True, timeout=DEADLINE_S, stdin=subprocess.DEVNULL,
                                env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert result.returncode == 0, result.stderr[-2000:]
        found[name] = {"summary": json.loads(result.stdout), "events": read_trace(trace).events,
                       "stderr": result.stderr}
    return found


@pytest.mark.parametrize("way", ["recorder", "observed"])
def test_four_ranks_and_every_call_on_its_own_group(runs, way):
    summary = runs[way]["summary"]
    assert summary["run"]["world_size"] == 4 and summary["outcome"]["status"] == "ok"
    assert {_key(c): (c["op"], c["group_ranks"], *c["bytes_in"].values()) for c in summary["calls"]} == {
        key: (op, ranks, *[bytes_in] * len(ranks)) for key, (op, ranks, bytes_in, _, _) in CALLS.items()}
    for call in summary["calls"]:
        op, ranks, bytes_in, bytes_out, s = CALLS[_key(call)]
        assert sorted(int(r) for r in call["bytes_out"]) == ranks and set(call["bytes_out"].values()) == {bytes_out}
        assert call["algo_bytes"] == s


@pytest.mark.parametrize("way", ["recorder", "observed"])
def test_a_clean_run_warns_of_nothing(runs, way):
    """Rank 3's late arrival and pairs of equal size are no reason for a warning."""
    assert [line for line in runs[way]["stderr"].splitlines() if line.startswith("collviz: warning")] == []


@pytest.mark.parametrize("way", ["recorder", "observed"])
def test_the_two_pairs_are_two_groups(runs, way):
    """Pair A and pair B have the same size: each keeps its own label, and its calls only its ranks."""
    calls = [e for e in runs[way]["events"] if isinstance(e, Collective) and e.edge == "begin" and e.op == "all_gather"]
    labels = {tuple(e.group_ranks): e.group for e in calls}
    assert sorted(labels) == [(0, 1), (2, 3)] and labels[(0, 1)] != labels[(2, 3)]
    assert {(e.rank, e.group) for e in calls} == {(0, labels[(0, 1)]), (1, labels[(0, 1)]),
                                                   (2, labels[(2, 3)]), (3, labels[(2, 3)])}


@pytest.mark.parametrize("way", ["recorder", "observed"])
def test_every_rank_says_its_device(runs, way):
    """On gloo, CPU: each rank's device is cpu, never "device unknown" (read from Flight Recorder,
    the launcher knows it: no GPU is visible; observed, the calls' tensors say it)."""
    devices = {e.rank: e.device for e in runs[way]["events"] if isinstance(e, RankStart)}
    assert devices == {rank: "cpu" for rank in range(4)}


def test_both_ways_name_each_group_alike(runs):
    """One naming, torch's own, read from Flight Recorder or observed: the world ``0 (default_pg)``,
    the pairs by their names (``new_group`` gives them no description), in the calls and the steps."""
    named = {}
    for way in ("recorder", "observed"):
        calls = [e for e in runs[way]["events"] if isinstance(e, Collective) and e.edge == "begin"]
        named[way] = {tuple(e.group_ranks): e.group for e in calls}
    assert named["recorder"] == named["observed"] == {(0, 1, 2, 3): "0 (default_pg)", (0, 1): "1", (2, 3): "2"}
    for way in ("recorder", "observed"):
        steps = {e.name for e in runs[way]["events"] if isinstance(e, Phase) and e.edge == "begin"}
        assert {"all_reduce #1 on group 0 (default_pg)", "all_gather #1 on group 1",
                "all_gather #1 on group 2"} <= steps, (way, steps)


def test_the_recorder_gives_no_time_and_says_why(runs):
    """Flight Recorder times calls only on NCCL: no second, algbw or busbw is made up on gloo."""
    for call in runs["recorder"]["summary"]["calls"]:
        assert (call["seconds"], call["slowest_seconds"], call.get("algbw"), call.get("busbw")) == ({}, None, None, None)


def test_the_rank_its_peers_waited_for_waited_least(runs):
    [second] = [c for c in runs["observed"]["summary"]["calls"] if _key(c) == (0, 2)]
    seconds = {int(rank): took for rank, took in second["seconds"].items()}
    assert sorted(seconds) == [0, 1, 2, 3]
    # rank 3 starts its sleep as the others enter the call, not at the same instant (1.997 s once):
    assert all(seconds[rank] >= 0.9 * SLEEP_S for rank in (0, 1, 2)), seconds
    assert seconds[3] < min(seconds[rank] for rank in (0, 1, 2)), seconds
    assert second["slowest_seconds"] == pytest.approx(max(seconds.values()))


@pytest.mark.parametrize("key, factor", [((0, 1), 2 * 3 / 4), ((0, 2), 2 * 3 / 4), ((10, 1), 1 / 2), ((20, 1), 1 / 2)])
def test_algbw_and_busbw_from_each_calls_slowest_rank_and_its_groups_size(runs, key, factor):
    [call] = [c for c in runs["observed"]["summary"]["calls"] if _key(c) == key]
    slowest = max(call["seconds"].values())
    s = CALLS[key][4]
    assert call["slowest_seconds"] == pytest.approx(slowest)
    assert call["algbw"] == pytest.approx(s / slowest) and call["busbw"] == pytest.approx(s / slowest * factor)
