"""``collviz attach --headless`` on a 4-rank job in the four shapes that tell wrong from right, attached
once for the module while it is stuck (a real gloo job under plain torchrun, the helpers of
:mod:`support.attach_job`).

The job (below): every rank makes pair A of ranks 0, 1 (group ``1``) and pair B of ranks 2, 3 (group
``2``: the same size, no rank 0); an all_reduce on the world, one on its pair; then rank 3 stalls in
its own ``slow_data_loader`` while the others go on: ranks 0 and 1 complete their pair's second
all_reduce and wait in the world's second, rank 2 waits in its pair's second. Each rank waits
somewhere else, for another set of ranks.

By hand, from the script: ranks 0, 1 last completed all_reduce #2 on group 1 and are in all_reduce #2
on group 0; rank 2 last completed all_reduce #1 on group 2 and is in #2 there; rank 3 last completed
all_reduce #1 on group 2 and is in none. World #2 waits for ranks 2 and 3 (ranks 0, 1 in it: rank 2
is missing from it, inside its pair's call); group 2's #2 waits for rank 3 (rank 2 in it). Nothing
waits for rank 0 or 1, and group 1 holds only them.
"""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from support.attach_job import DEADLINE_S, line_of, stalled_job
from support.cli import run_cli

JOB = textwrap.dedent('''
    import os, sys, time
    from pathlib import Path
    import torch
    import torch.distributed as dist
    from torch.distributed.elastic.control_plane import worker_main

    folder = Path(sys.argv[1])
    os.environ["TORCH_WORKER_SERVER_SOCKET"] = str(folder / f"rank{os.environ['RANK']}.sock")

    def slow_data_loader():
        (folder / "stalling").touch()
        while not (folder / "release").exists():
            time.sleep(0.05)  # the stalled line

    def main():
        dist.init_process_group("gloo")
        try:
            rank = dist.get_rank()
            pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
            pair = pairs[rank // 2]
            dist.all_reduce(torch.ones(4))
            dist.all_reduce(torch.ones(4), group=pair)
            if rank == 3:
                slow_data_loader()
            else:
                (folder / f"waiting{rank}").touch()
            dist.all_reduce(torch.ones(4), group=pair)
            dist.all_reduce(torch.ones(4))
            (folder / f"done{rank}").touch()
            while not (folder / "exit").exists():
                time.sleep(0.05)
        finally:
            dist.destroy_process_group()

    if __name__ == "__main__":
        with worker_main():
            main()
''')

STALLED_LINE = line_of(JOB, "the stalled line")
WORLD_2, PAIR_A_2, PAIR_B_1, PAIR_B_2 = ("all_reduce #2 on group 0 (default_pg)", "all_reduce #2 on group 1",
                                         "all_reduce #1 on group 2", "all_reduce #2 on group 2")
STACK = f"job.py:{STALLED_LINE} in slow_data_loader"
PAIR_LINE = line_of(JOB, "group=pair)", 1)
"""The line of the pair's second all_reduce, where rank 2 waits (so it is missing from the world's second)."""


@pytest.fixture(scope="module")
def attached(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """``attach --headless`` (text and ``--json``) while rank 3 stalls, then the job let go."""
    folder = tmp_path_factory.mktemp("attach_shapes")
    found: dict = {"folder": folder}
    with stalled_job(folder, JOB, nproc=4, stalled=3, inside={0: ("0", 2), 1: ("0", 2), 2: ("2", 2)}) as job:
        found["text"] = run_cli("attach", "--headless", str(folder), timeout=DEADLINE_S)
        found["json"] = run_cli("attach", "--headless", "--json", str(folder), timeout=DEADLINE_S)
        job.release()
        found["job"] = job.finish()
    return found


def _wait_blocks(lines: list[str]) -> dict[str, list[str]]:
    """Each ``waiting:`` line with the lines under it (the waits come in the order the ranks entered
    their calls, which the machine's load decides)."""
    blocks: dict[str, list[str]] = {}
    for line in lines:
        if line.startswith("waiting: "):
            current = blocks.setdefault(line, [])
        else:
            current.append(line)
    return blocks


def test_each_rank_where_it_is_and_who_it_waits_for(attached):
    """Rank 2 is both: waiting in its pair's call, and missing from the world's (its stack: the
    job's line inside torch's all_reduce, whose own line number is torch's)."""
    text = attached["text"]
    assert text.returncode == 1, text.stderr
    lines = text.stdout.splitlines()
    assert lines[:5] == [
        f"collviz attach: the worker servers of 4 ranks at {attached['folder']}",
        f"rank 0: last completed {PAIR_A_2}; now in {WORLD_2}",
        f"rank 1: last completed {PAIR_A_2}; now in {WORLD_2}",
        f"rank 2: last completed {PAIR_B_1}; now in {PAIR_B_2}",
        f"rank 3: last completed {PAIR_B_1}; in no collective",
    ]
    [rank_2] = [line for line in lines if line.startswith("  rank 2 ")]
    rank_2_stack = rank_2.removeprefix("  rank 2 is missing from the call, at ")
    assert re.fullmatch(rf"job\.py:{PAIR_LINE} in main, inside all_reduce \(distributed_c10d\.py:\d+\)", rank_2_stack)
    assert _wait_blocks(lines[5:]) == {
        f"waiting: {WORLD_2}: ranks 0, 1 wait for ranks 2, 3": [f"  rank 2 is missing from the call, at {rank_2_stack}",
                                                                f"  rank 3 is missing from the call, at {STACK}"],
        f"waiting: {PAIR_B_2}: rank 2 waits for rank 3": [f"  rank 3 is missing from the call, at {STACK}"]}


def test_the_json_names_each_ranks_own_wait(attached):
    """Rank 3 is missing from two calls; its row names one of them (the later-listed wait)."""
    document = json.loads(attached["json"].stdout)
    rows = {r["rank"]: (r["waiting_in"], r["waiting_for"], r["missing_from"]) for r in document["ranks"]}
    assert rows[3][2] in (WORLD_2, PAIR_B_2)
    assert rows == {0: (WORLD_2, [2, 3], None), 1: (WORLD_2, [2, 3], None), 2: (PAIR_B_2, [3], WORLD_2),
                    3: (None, [], rows[3][2])}
    assert {w["call"]: (w["waiting"], w["missing"]) for w in document["waits"]} == {
        WORLD_2: ([0, 1], [2, 3]), PAIR_B_2: ([2], [3])}
    assert (document["missing"], document["not_read"], document["exit_status"]) == ([2, 3], [], 1)


def test_the_job_goes_on_unharmed(attached):
    code, _, err = attached["job"]
    assert code == 0, err[-2000:]
