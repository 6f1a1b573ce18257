"""The headless summary of an import too large to hold as events, from its call table.

:func:`~..reports.summary.render_summary` and :func:`~..reports.summary_json.summary_document`
read a run's whole event log; a whole job's Flight Recorder dumps would be four events per call and
rank (8M for 1,024 ranks × 2,000 calls). :class:`TableSummary` gives the same text and document
from the :class:`~.call_table.CallTable`: the same report functions, given per step only the
events its lines read (the end of each timed call, else the first rank's untimed one) made from
the table's rows, and the run's own start and end events (its RunEnd counting every event the
import stands for), so a large import reads exactly as it would as events.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import msgspec
import numpy as np

from ..observation.fingerprints import Disagreement
from ..reports.summary import ending_lines, head_lines, phase_lines, untimed_reason
from ..reports.summary_json import assemble, call_entries
from ..wire.protocol import AnyEvent, Collective, Mismatch, RankStart, RunEnd, RunStart, Stall
from .call_table import NO_VALUE, CallTable, algo_bytes_of

__all__ = ["TableSummary"]


class _End(NamedTuple):
    """The fields of a call's end event that the JSON document reads (:class:`~..reports.summary_json.CallEnd`)."""

    rank: int
    phase: int
    op: str
    group: str
    group_ranks: list[int]
    group_seq: int
    dtype: str
    bytes_in: int
    bytes_out: int
    algo_bytes: int
    duration_ns: int | None
    edge: str = "end"
    iteration: int = 0
    clock: str = ""

    @classmethod
    def of(cls, event: Collective) -> _End:
        """The fields of ``event``."""
        return cls(event.rank, event.phase, event.op, event.group, event.group_ranks, event.group_seq, event.dtype,
                   event.bytes_in, event.bytes_out, event.algo_bytes, event.duration_ns, event.edge, event.iteration,
                   event.clock)


class TableSummary:
    """A run's summary from ``table`` (its steps named ``step_names``), its ``start`` and ``end``
    events (the RunEnd counting every event), its ``stalls``, the calls that disagree
    (``mismatches``) and the ranks whose devices the RankStarts give (``devices``)."""

    def __init__(self, table: CallTable, step_names: Sequence[str], start: RunStart, end: RunEnd, stalls: list[Stall],
                 mismatches: list[Disagreement], devices: list[tuple[int, str]]) -> None:
        self.table, self.step_names, self.start, self.end = table, step_names, start, end
        self.stalls, self.mismatches, self.devices = stalls, mismatches, devices
        self._starts = table.step_starts()
        self._lists = [list(members) for members in table.members]
        done = table.completed
        self._took = np.maximum.reduceat(np.where(done, np.maximum(table.duration_ns, 0), 0), self._starts[:-1]) \
            if len(table) else np.zeros(0, dtype=np.int64)
        self._algo: dict[tuple[str, int, int, int], int] = {}
        self._ends = np.add.reduceat(done.astype(np.int64), self._starts[:-1]) if len(table) else self._took

    @classmethod
    def of(cls, table: CallTable, step_names: Sequence[str], events: Sequence[AnyEvent], left_out: int = 0) -> TableSummary:
        """The summary of ``table`` with the run's own RunStart, RankStarts, Stalls, Mismatches and
        RunEnd among ``events`` (which may hold no call's events: ``left_out`` counts those they lack)."""
        end = next(e for e in events if isinstance(e, RunEnd))
        mismatches = [Disagreement(e.group, tuple(e.group_ranks), e.group_seq, e.calls, e.odd_ranks)
                      for e in events if isinstance(e, Mismatch)]
        return cls(table, step_names, next(e for e in events if isinstance(e, RunStart)),
                   msgspec.structs.replace(end, events=end.events + left_out), [e for e in events if isinstance(e, Stall)],
                   mismatches, [(e.rank, e.device) for e in events if isinstance(e, RankStart)])

    def text(self) -> str:
        """The text :func:`~..reports.summary.render_summary` gives for the run's events."""
        lines = head_lines(self.start, self.devices, [])
        untimed = untimed_reason(self.start)
        for index, name in enumerate(self.step_names):
            took = int(self._took[index]) if self._ends[index] else None
            lines.extend(phase_lines(index, name, took, None, self._shown_ends(index), self.start.world_size, untimed))
        lines.append("")
        ending: list[AnyEvent] = [*self.stalls, self.end]
        lines.extend(ending_lines(ending, self.mismatches))
        return "\n".join(lines)

    def document(self) -> dict:
        """The document :func:`~..reports.summary_json.summary_document` gives for the run's events."""
        phases, calls = [], []
        for index, name in enumerate(self.step_names):
            took = float(self._took[index]) / 1e9 if self._ends[index] else None
            phases.append({"index": index, "name": name, "key": "", "slowest_seconds": took})
            calls.extend(call_entries(self._all_ends(index), self.start.world_size))
        return assemble(self.start, self.end, phases, calls, [], {}, [stall.text for stall in self.stalls],
                        [found.text for found in self.mismatches])

    def _all_ends(self, index: int) -> list[_End]:
        """Every completed call of step ``index`` as the fields of its end event."""
        table = self.table
        rows = np.arange(int(self._starts[index]), int(self._starts[index + 1]))
        rows = rows[table.completed[rows]]
        if not len(rows):
            return []
        group, op = int(table.group[rows[0]]), int(table.op[rows[0]])
        if (table.group[rows] != group).any() or (table.op[rows] != op).any():  # not one call: each row its own
            return [_End.of(self._end(int(row), index)) for row in rows]
        name, ranks = table.ops[op], self._lists[group]
        durations = [None if d == NO_VALUE else d for d in table.duration_ns[rows].tolist()]
        return [_End(rank, index, name, table.groups[group], ranks, seq, table.dtypes[dtype], bytes_in, bytes_out,
                     self._algo_bytes(name, len(ranks), bytes_in, bytes_out), duration)
                for rank, seq, dtype, bytes_in, bytes_out, duration in zip(
                    table.rank[rows].tolist(), table.seq[rows].tolist(), table.dtype[rows].tolist(),
                    table.bytes_in[rows].tolist(), table.bytes_out[rows].tolist(), durations)]

    def _algo_bytes(self, op: str, ranks: int, bytes_in: int, bytes_out: int) -> int:
        key = (op, ranks, bytes_in, bytes_out)
        found = self._algo.get(key)
        if found is None:
            found = self._algo[key] = algo_bytes_of(op, ranks, bytes_in, bytes_out)
        return found

    def _shown_ends(self, index: int) -> list[AnyEvent]:
        """The end events of step ``index`` its summary lines read: every timed one, else the first."""
        table = self.table
        rows = slice(int(self._starts[index]), int(self._starts[index + 1]))
        timed = np.flatnonzero(table.completed[rows] & (table.duration_ns[rows] > 0)) + rows.start
        if len(timed):
            return [self._end(int(row), index) for row in timed]
        done = np.flatnonzero(table.completed[rows])
        return [self._end(int(done[0]) + rows.start, index)] if len(done) else []

    def _end(self, row: int, index: int) -> Collective:
        return self.table.event(row, self.start.run, index, self._lists[self.table.group[row]], "end")
