"""Every call of an import as one table: a row per call and rank, arrays rather than objects.

:class:`CallTable` holds what :class:`~.run.Call` holds, a column per field, its rows sorted by
step, then rank: the order an import's events are emitted in. A source with few calls builds its
steps of :class:`~.run.Call` objects and the table from them (:meth:`CallTable.from_steps`); a
Flight Recorder import of a whole job builds the table straight from its dumps' columns, with no
object per call. The checks (:mod:`.call_checks`) and the summary of a large import
(:mod:`.table_summary`) read the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..observation.metrics import BUS_FACTOR_OPS, algo_bytes
from ..wire.protocol import Collective

if TYPE_CHECKING:
    from .run import Call, Step

__all__ = ["CallTable", "NO_VALUE", "algo_bytes_of"]

NO_VALUE = -1
"""A duration or root the call does not have (a real one is positive, a root not negative)."""


def algo_bytes_of(op: str, ranks: int, bytes_in: int, bytes_out: int) -> int:
    """S of the nccl-tests formulas for a call of ``op`` on ``ranks`` ranks, or its input bytes where the op has none."""
    return algo_bytes(op, ranks or 1, bytes_in, bytes_out) if op in BUS_FACTOR_OPS else bytes_in


@dataclass
class CallTable:
    """Calls as columns, row ``i`` of every array one call on one rank; rows sorted by ``step``
    then ``rank``.

    ``group``, ``op``, ``dtype`` and ``where`` index ``groups`` (labels, ``0 (default_pg)``),
    ``ops``, ``dtypes`` and ``places``; ``members[g]`` are group ``g``'s ranks (a label whose calls
    name different ranks is a group per set of ranks, as the checks key a call by both). ``duration_ns``
    and ``root`` are :data:`NO_VALUE` where the call has none. ``step_count``: the steps of the
    import, some of which may hold no call (NCCL's links).
    """

    groups: list[str]
    members: list[tuple[int, ...]]
    ops: list[str]
    dtypes: list[str]
    places: list[str]
    rank: np.ndarray
    step: np.ndarray
    group: np.ndarray
    seq: np.ndarray
    op: np.ndarray
    dtype: np.ndarray
    count: np.ndarray
    bytes_in: np.ndarray
    bytes_out: np.ndarray
    t_ns: np.ndarray
    duration_ns: np.ndarray
    completed: np.ndarray
    root: np.ndarray
    where: np.ndarray
    step_count: int
    group_ids: list[str] = field(default_factory=list)
    """Each group's identity where its label may not be one (see :attr:`~.run.Call.group_id`); empty: the labels are."""
    backends: list[str] = field(default_factory=list)
    """The backend that numbered each group's calls, where the source says; empty: not said."""

    def __len__(self) -> int:
        return len(self.rank)

    def step_starts(self) -> np.ndarray:
        """Where each step's rows begin, and after the last one where the rows end (``step_count + 1`` numbers)."""
        return np.searchsorted(self.step, np.arange(self.step_count + 1))

    def rows_of(self, step: int) -> range:
        """The rows of one step."""
        found = np.searchsorted(self.step, [step, step + 1])
        return range(int(found[0]), int(found[1]))

    def row_of(self, step: int, rank: int) -> int | None:
        """The row of ``rank``'s call in ``step``, or None where it made none there."""
        rows = self.rows_of(step)
        at = rows.start + int(np.searchsorted(self.rank[rows.start:rows.stop], rank))
        return at if at < rows.stop and self.rank[at] == rank else None

    def event(self, row: int, run: str, phase: int, group_ranks: list[int], edge: Literal["begin", "end"]) -> Collective:
        """The Collective begin or end event of ``row`` as an import emits it (``phase``: its step's
        index; ``group_ranks``: its group's one list); an end carries the duration, if any, and comes
        that much after the begin."""
        op = self.ops[self.op[row]]
        root, duration = int(self.root[row]), int(self.duration_ns[row])
        bytes_in, bytes_out = int(self.bytes_in[row]), int(self.bytes_out[row])
        timed = edge == "end" and duration != NO_VALUE
        return Collective(run=run, rank=int(self.rank[row]), seq=0, t_ns=int(self.t_ns[row]) + (duration if timed else 0),
                          phase=phase, edge=edge, op=op, group=self.groups[self.group[row]], group_ranks=group_ranks,
                          group_seq=int(self.seq[row]), dtype=self.dtypes[self.dtype[row]], count=int(self.count[row]),
                          bytes_in=bytes_in, bytes_out=bytes_out,
                          algo_bytes=algo_bytes_of(op, len(group_ranks), bytes_in, bytes_out),
                          root=None if root == NO_VALUE else root, duration_ns=duration if timed else None)

    def call_text(self, row: int) -> str:
        """``all_reduce #3 on group 0 (default_pg)``."""
        return f"{self.ops[self.op[row]]} #{self.seq[row]} on group {self.groups[self.group[row]]}"

    @classmethod
    def from_steps(cls, steps: Sequence[Step]) -> CallTable:
        """The calls of ``steps`` (a rank's second call in one step replaces its first, as the events do).
        A group's ranks are hashed once per tuple object (its calls share one: a 10,000-rank tuple
        hashed per call made an import quadratic)."""
        tables: dict[str, dict] = {"groups": {}, "ops": {}, "dtypes": {}, "places": {}}
        group_of: dict[tuple[str, int], int] = {}
        rows: list[tuple] = []
        for index, step in enumerate(steps):
            calls: dict[int, Call] = {call.rank: call for call in step.calls}
            for rank in sorted(calls):
                call = calls[rank]
                known = (call.group, id(call.group_ranks))
                group = group_of.get(known)
                if group is None:
                    group = group_of[known] = _index(tables["groups"], (call.group, call.group_ranks))
                rows.append((rank, index, group, call.group_seq,
                             _index(tables["ops"], call.op), _index(tables["dtypes"], call.dtype), call.count,
                             call.bytes_in, call.bytes_out, call.t_ns,
                             NO_VALUE if call.duration_ns is None else call.duration_ns, call.completed,
                             NO_VALUE if call.root is None else call.root, _index(tables["places"], call.where)))
        columns = list(zip(*rows)) if rows else [()] * 14
        kinds = (np.int32, np.int32, np.int32, np.int64, np.int32, np.int32, np.int64, np.int64, np.int64, np.int64,
                 np.int64, np.bool_, np.int64, np.int32)
        names = ("rank", "step", "group", "seq", "op", "dtype", "count", "bytes_in", "bytes_out", "t_ns", "duration_ns",
                 "completed", "root", "where")
        arrays: dict[str, Any] = {name: np.asarray(column, dtype=kind)  # every column an array, none of the name lists
                                         for name, column, kind in zip(names, columns, kinds)}
        groups = list(tables["groups"])
        return cls(groups=[g for g, _ in groups], members=[m for _, m in groups], ops=list(tables["ops"]),
                   dtypes=list(tables["dtypes"]), places=list(tables["places"]), step_count=len(steps), **arrays)


def _index(table: dict, value: object) -> int:
    found = table.get(value)
    if found is None:
        found = table[value] = len(table)
    return found
