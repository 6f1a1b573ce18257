"""Provenance observed in several tag passes: the passes cover every rank, the merge is exact,
a tag type's sign bit names a rank like any other bit (over real gloo too), and passes started
asynchronously are observed as synchronous ones are."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import pytest
import torch

from collviz.runtime.observation.tensors import (
    PendingTags, TagPass, merge_provenance, observe_provenance, provenance_from_tags, tag_passes)
from collviz.runtime.wire.protocol import ProvenanceRun
from collviz.runtime.wire.trace import read_trace

from support.cli import run_cli


_UNSIGNED = {torch.uint8: np.uint8, torch.int32: np.uint32, torch.int64: np.uint64}


@pytest.mark.parametrize(("dtype", "world", "passes"), [
    (torch.float32, 4, 1), (torch.float32, 32, 1), (torch.float32, 33, 2), (torch.float32, 64, 2),
    (torch.float16, 64, 6), (torch.uint8, 64, 8), (torch.float64, 64, 1), (torch.float64, 65, 2),
])
def test_passes_cover_every_rank_once(dtype, world, passes):
    found = tag_passes(dtype, world)
    assert len(found) == passes
    covered = [r for tag_pass in found for r in range(tag_pass.first, tag_pass.stop)]
    assert covered == list(range(world))
    for tag_pass in found:  # the last rank of a pass holds exactly its one bit (the sign bit at 32 or 64)
        bit = tag_pass.stop - 1 - tag_pass.first
        top = tag_pass.tags(torch.zeros(1), tag_pass.stop - 1)
        assert top.dtype == tag_pass.tag_type and top.element_size() == dtype.itemsize
        if top.dtype.is_floating_point:
            assert top.item() == 2.0**bit
        else:
            assert int(top.numpy().view(_UNSIGNED[top.dtype])[0]) == 1 << bit


@pytest.mark.parametrize(("tag_type", "world"), [(torch.int32, 32), (torch.int64, 64), (torch.uint8, 8)])
def test_any_subset_summed_in_any_order_names_exactly_its_ranks(tag_type, world):
    """Distinct powers of two never carry: each partial sum (a running sum in the tag type itself,
    in a shuffled order) stays in range, and every prefix decodes to the ranks summed so far."""
    tag_pass = TagPass(tag_type, 0, world)
    chooser = random.Random(world)
    for _ in range(20):
        subset = chooser.sample(range(world), chooser.randint(1, world))
        tags = torch.cat([tag_pass.tags(torch.zeros(1), r) for r in subset])
        running = torch.cumsum(tags, dim=0, dtype=tag_type)
        for length in range(1, len(subset) + 1):
            runs = provenance_from_tags(running[length - 1:length])
            assert runs == [ProvenanceRun(0, 1, sorted(subset[:length]))]
    everyone = torch.stack([tag_pass.tags(torch.zeros(2), r) for r in range(world)]).sum(dim=0, dtype=tag_type)
    assert [int(v) for v in everyone.numpy().view(_UNSIGNED[tag_type])] == [2**world - 1] * 2
    assert provenance_from_tags(everyone) == [ProvenanceRun(0, 2, list(range(world)))]


def test_passes_started_asynchronously_are_waited_for_in_order():
    """observe_provenance starts every pass before it waits on any, then reads each one's tags."""
    log: list[str] = []

    class Work:
        def __init__(self, name: str) -> None:
            self.name = name

        def wait(self) -> None:
            log.append(f"wait {self.name}")

    def received(tag_pass: TagPass) -> PendingTags:
        log.append(f"start {tag_pass.first}")
        return PendingTags(tag_pass.tags(torch.zeros(1), tag_pass.first), Work(str(tag_pass.first)))

    runs = observe_provenance(torch.float32, 40, received)
    assert log == ["start 0", "start 32", "wait 0", "wait 32"]
    assert runs == [ProvenanceRun(0, 1, [0, 32])]


def test_a_simulated_64_rank_all_gather_is_observed_block_by_block():
    """Each pass sums the ranks' tags as an all-gather would place them; the merge names rank r for
    block r, and an all-reduce's sum names all 64."""
    world, block = 64, 3
    like = torch.zeros(block)

    def gathered(tag_pass):
        return torch.cat([tag_pass.tags(like, r) for r in range(world)])

    def summed(tag_pass):
        return sum(tag_pass.tags(like, r).to(torch.int64) for r in range(world)).to(tag_pass.tag_type)

    assert observe_provenance(torch.float32, world, gathered) == [
        ProvenanceRun(r * block, block, [r]) for r in range(world)]
    assert observe_provenance(torch.float32, world, summed) == [ProvenanceRun(0, block, list(range(world)))]
    assert observe_provenance(torch.float32, world, lambda tag_pass: None) is None


def test_merge_splits_at_every_boundary_and_joins_equal_neighbours():
    first = [ProvenanceRun(0, 4, [0]), ProvenanceRun(4, 4, [])]
    second = [ProvenanceRun(0, 2, [40]), ProvenanceRun(2, 6, [])]
    assert merge_provenance([first, second]) == [
        ProvenanceRun(0, 2, [0, 40]), ProvenanceRun(2, 2, [0]), ProvenanceRun(4, 4, [])]


_TOP_BITS = """
import json, os, socket, sys
import torch, torch.distributed as dist
from collviz.runtime.observation.tensors import TagPass, provenance_from_tags
world, record = 3, sys.argv[1]
with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
for rank in range(world):
    if os.fork() == 0:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        found = {}
        for tag_type, width in ((torch.int32, 32), (torch.int64, 64)):
            tag_pass = TagPass(tag_type, first=world - width, stop=world)  # rank r holds bit width - world + r
            mine = tag_pass.tags(torch.zeros(2), rank)
            summed = mine.clone()
            dist.all_reduce(summed)
            kept = torch.zeros(2, dtype=tag_type)
            dist.reduce_scatter_tensor(kept, tag_pass.tags(torch.zeros(2 * world), rank))
            gathered = torch.zeros(2 * world, dtype=tag_type)
            dist.all_gather_into_tensor(gathered, mine)
            found[str(tag_type)] = {name: [[r.start, r.length, r.ranks] for r in provenance_from_tags(t, tag_pass.first)]
                                    for name, t in (("all_reduce", summed), ("reduce_scatter", kept),
                                                    ("all_gather", gathered))}
        with open(f"{record}.{rank}", "w") as out:
            json.dump(found, out)
        os._exit(0)
status = 0
for _ in range(world):
    status = status or os.waitstatus_to_exitcode(os.wait()[1])
os._exit(status)
"""


def test_the_sign_bit_sums_exactly_over_real_gloo(tmp_path):
    """Three gloo ranks tag with the top three bits of int32 and int64 (the sign bit is rank 2's):
    every rank's tags arrive intact through all_reduce, reduce_scatter and all_gather."""
    record = tmp_path / "found"
    result = subprocess.run([sys.executable, "-c", _TOP_BITS, str(record)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in range(3):
        found = json.loads(tmp_path.joinpath(f"found.{rank}").read_text())
        for tag_type in ("torch.int32", "torch.int64"):
            assert found[tag_type] == {
                "all_reduce": [[0, 2, [0, 1, 2]]],
                "reduce_scatter": [[0, 2, [0, 1, 2]]],
                "all_gather": [[0, 2, [0]], [2, 2, [1]], [4, 2, [2]]],
            }


def test_a_run_needing_two_passes_observes_every_rank(tmp_path):
    """uint8 tags hold 8 ranks, so a 9-rank all-gather takes two passes, started back to back:
    block r of every rank's gathered buffer comes from rank r alone, rank 8's included."""
    trace = tmp_path / "all-gather.cvz"
    result = run_cli("all-gather", "--gpus", "9", "--dtype", "uint8", "--backend", "gloo", "--headless",
                     "--record", str(trace))
    assert result.returncode == 0, result.stderr
    gathered = [e for e in read_trace(trace).events if type(e).__name__ == "Buffer" and e.moment == "after"]
    assert sorted(e.rank for e in gathered) == list(range(9))
    for event in gathered:
        block = event.provenance[0].length
        assert event.provenance == [ProvenanceRun(r * block, block, [r]) for r in range(9)]
