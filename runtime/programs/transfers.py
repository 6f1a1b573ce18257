"""Logical transfers: what a collective moved into this rank, read off the provenance it produced.

A collective's result on rank d holds, element by element, data of the ranks its provenance names
(observed with rank tags, see :mod:`collviz.runtime.observation.tensors`). Every other rank s named
there sent data that reached d: one ``Transfer`` per source and contiguous span, kind ``logical``
(the data's origin and destination, not the backend's route, which one call does not expose).
"""

from __future__ import annotations

from ..context import RankContext
from ..wire.protocol import ProvenanceRun, Transfer

__all__ = ["emit_logical_transfers", "spans_by_source"]


def spans_by_source(provenance: list[ProvenanceRun], receiver: int) -> dict[int, list[tuple[int, int]]]:
    """``{source rank: [(start, length), …]}``: the contiguous spans of the result each other rank
    contributed to (adjacent runs from one source merged), sources and spans in order."""
    spans: dict[int, list[list[int]]] = {}
    for run in provenance:
        for src in run.ranks:
            if src == receiver:
                continue
            segments = spans.setdefault(src, [])
            if segments and segments[-1][0] + segments[-1][1] == run.start:
                segments[-1][1] += run.length
            else:
                segments.append([run.start, run.length])
    return {src: [(start, length) for start, length in spans[src]] for src in sorted(spans)}


def emit_logical_transfers(ctx: RankContext, buffer: str, provenance: list[ProvenanceRun], itemsize: int) -> int:
    """Emit the logical transfers into this rank implied by ``provenance`` of ``buffer``; return
    how many bytes arrived (the sum of the transfers)."""
    arrived = 0
    for src, spans in spans_by_source(provenance, ctx.rank).items():
        for start, length in spans:
            arrived += length * itemsize
            ctx.emitter.emit(Transfer, phase=ctx.phase_index, src=src, dst=ctx.rank, bytes=length * itemsize,
                             buffer=buffer, start=start, length=length, kind="logical")
    return arrived
