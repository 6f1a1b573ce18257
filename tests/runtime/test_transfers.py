"""Logical transfers read off a result's provenance (runtime/programs/transfers.py): one per source
rank and contiguous span, the receiver's own data never counted as sent to it."""

from __future__ import annotations

from collviz.runtime.programs.transfers import spans_by_source
from collviz.runtime.wire.protocol import ProvenanceRun


def test_each_other_rank_sends_its_contiguous_spans_once():
    provenance = [ProvenanceRun(0, 2, [0]), ProvenanceRun(2, 2, [1]), ProvenanceRun(4, 3, [1, 3]),
                  ProvenanceRun(7, 1, [0, 2]), ProvenanceRun(8, 2, [1])]
    # elements 2–6 came from rank 1 in one piece (two runs side by side), 8–9 in another
    assert spans_by_source(provenance, receiver=0) == {1: [(2, 5), (8, 2)], 2: [(7, 1)], 3: [(4, 3)]}
    assert spans_by_source(provenance, receiver=1) == {0: [(0, 2), (7, 1)], 2: [(7, 1)], 3: [(4, 3)]}
