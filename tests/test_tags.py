"""Provenance observed in several tag passes: the passes cover every rank, the merge is exact."""

from __future__ import annotations

import pytest
import torch

from collviz.runtime.observation.tensors import merge_provenance, observe_provenance, tag_passes
from collviz.runtime.wire.protocol import ProvenanceRun


@pytest.mark.parametrize(("dtype", "world", "passes"), [
    (torch.float32, 4, 1), (torch.float32, 31, 1), (torch.float32, 32, 2), (torch.float32, 64, 3),
    (torch.float16, 64, 6), (torch.uint8, 64, 8), (torch.float64, 64, 2),
])
def test_passes_cover_every_rank_once(dtype, world, passes):
    found = tag_passes(dtype, world)
    assert len(found) == passes
    covered = [r for tag_pass in found for r in range(tag_pass.first, tag_pass.stop)]
    assert covered == list(range(world))
    for tag_pass in found:  # every rank's bit fits the tag type exactly
        top = torch.tensor(2 ** (tag_pass.stop - 1 - tag_pass.first), dtype=torch.float64)
        assert top.to(tag_pass.tag_type).to(torch.float64) == top


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
