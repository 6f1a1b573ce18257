"""Checks on a trace's events that no reader downstream should have to make.

A trace can be damaged in ways its framing does not catch (a record that decodes but lies) or
written by something that was not collviz. :func:`checked_events` keeps what is consistent and
says what it dropped: events from ranks outside the run's world, negative durations, repeated
sequence numbers; sequence gaps are reported. An impossible world size (below 1 or above
:data:`MAX_WORLD_SIZE`) makes the trace unreadable: one :class:`~.protocol.ProtocolError`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .protocol import LAUNCHER_RANK, AnyEvent, Collective, ProtocolError, RunStart, Span

__all__ = ["MAX_WORLD_SIZE", "Skipped", "checked_events", "gaps_note"]

MAX_WORLD_SIZE = 16_384
"""The largest world size a trace may claim (far beyond any run collviz records)."""


@dataclass(frozen=True)
class Skipped:
    """The place of an event the reader skipped (a newer minor version's type), so that its
    sequence number is not counted as a gap."""

    rank: int
    seq: int


def checked_events(events: list[AnyEvent | Skipped]) -> tuple[list[AnyEvent], list[str]]:
    """``events`` without the inconsistent ones (and without :class:`Skipped` places), and one
    phrase per kind of problem found."""
    start = next((e for e in events if isinstance(e, RunStart)), None)
    if start is not None and not 1 <= start.world_size <= MAX_WORLD_SIZE:
        raise ProtocolError(f"its RunStart claims an impossible world size, {start.world_size} "
                            f"(1 to {MAX_WORLD_SIZE:,})")
    world = start.world_size if start is not None else MAX_WORLD_SIZE
    dropped: Counter[str] = Counter()
    gaps = 0
    last_seq: dict[int, int] = {}
    kept: list[AnyEvent] = []
    keep = kept.append
    for event in events:
        rank, seq = event.rank, event.seq
        if not LAUNCHER_RANK <= rank < world:
            dropped["from ranks outside the world"] += 1
            continue
        previous = last_seq.get(rank, -1)
        if seq <= previous:
            dropped["repeating an earlier sequence number"] += 1
            continue
        if seq > previous + 1 and previous >= 0:
            gaps += 1
        last_seq[rank] = seq
        if isinstance(event, (Collective, Span)) and event.duration_ns is not None and event.duration_ns < 0:
            dropped["with negative durations"] += 1
        elif not isinstance(event, Skipped):
            keep(event)
    notes = [f"dropped {count} event{'s' if count > 1 else ''} {why}" for why, count in sorted(dropped.items())]
    if gaps:
        notes.append(gaps_note(gaps))
    return kept, notes


def gaps_note(gaps: int) -> str:
    """The phrase for ``gaps`` (≥ 1) places where a rank's sequence numbers skip."""
    return f"{gaps} gap{'s' if gaps > 1 else ''} in ranks' event sequences (events lost before recording)"
