"""A job's Flight Recorder dumps, read into columns (:mod:`.fr_columns`), as one
:class:`~.call_table.CallTable`: every rank's calls side by side, matched across ranks by group and
sequence number, in one step order every rank's own order agrees with (:func:`~.run.order_steps`
over the distinct pairs of consecutive calls, not over every rank's every call).

Each group is resolved once (``resolve``: its label and ranks, as :mod:`.flight_recorder` decides
them, at its first appearance in rank order), and each rank whose dump starts later on a group than
the others' is said (its buffer overflowed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .call_table import NO_VALUE, CallTable
from .fr_columns import DumpColumns
from .names import itemsize
from .run import order_steps

__all__ = ["RankDump", "JobTable", "group_identity", "job_table"]


@dataclass(frozen=True)
class RankDump:
    """One rank's dump, read: the rank (from its file's name), the file, its columns."""

    rank: int
    path: Path
    columns: DumpColumns


@dataclass
class JobTable:
    """The job's calls (``table``), each step's name (``all_reduce #3 on group 0 (default_pg)``)
    and first time, and each rank's last step."""

    table: CallTable
    step_names: list[str]
    step_t_ns: np.ndarray
    last_step: dict[int, int]


class _Strings:
    """Strings interned over every dump: each dump's own table mapped onto one."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def mapped(self, local: list[str]) -> np.ndarray:
        return np.asarray([self.index.setdefault(s, len(self.index)) for s in local], dtype=np.int32)

    def values(self) -> list[str]:
        return list(self.index)


def group_identity(name: str, backend: str) -> str:
    """A recorder group's identity (:attr:`~.run.Call.group_id`): its name and the backend that
    numbered its calls."""
    return f"{name}/{backend}"


def job_table(dumps: Sequence[RankDump], resolve: Callable[[str, str], tuple[str, tuple[int, ...]]],
              warnings: list[str]) -> JobTable:
    """The calls of ``dumps`` (in rank order) as one table; ``resolve(name, description)`` gives a
    group's label and ranks (a group whose calls name two backends, made with
    ``"cpu:gloo,cuda:nccl"``, is two groups, each label ending ``on <backend>``: each backend numbers
    its own calls); ``warnings`` gains where a rank's dump starts late on a group."""
    groups: dict[tuple[str, str], int] = {}  # (name, backend) → index: each backend of a group numbers its own calls
    resolved: list[tuple[str, tuple[int, ...]]] = []
    identities: list[tuple[str, str]] = []  # each group's (name, backend), in the order of resolved
    backends: dict[str, set[str]] = {}
    for dump in dumps:
        for name, _, backend in dump.columns.groups:
            backends.setdefault(name, set()).add(backend)
    ops, dtypes, places = _Strings(), _Strings(), _Strings()
    parts: dict[str, list[np.ndarray]] = {name: [] for name in ("rank", "group", "seq", "op", "dtype", "in_count",
                                                                  "out_count", "t_ns", "duration_ns", "completed", "where")}
    mapped: dict[tuple[int, ...], tuple[np.ndarray, ...]] = {}
    """The job's numbering of a dump's groups, ops, types and places, by the identity of its columns:
    dumps read once per shape share them (:mod:`.fr_alike`), and are numbered once."""
    for dump in dumps:
        c = dump.columns
        same = (id(c.groups), id(c.group), id(c.ops), id(c.op), id(c.dtypes), id(c.dtype), id(c.places), id(c.where))
        numbered = mapped.get(same)
        if numbered is None:
            local = np.zeros(len(c.groups), dtype=np.int32)
            for g in dict.fromkeys(c.group.tolist()):  # in order of first appearance
                name, description, backend = c.groups[g]
                if (name, backend) not in groups:
                    groups[name, backend] = len(resolved)
                    identities.append((name, backend))
                    label, members = resolve(name, description)
                    resolved.append((f"{label} on {backend}" if len(backends[name]) > 1 else label, members))
                local[g] = groups[name, backend]
            numbered = mapped[same] = (local[c.group], ops.mapped(c.ops)[c.op], dtypes.mapped(c.dtypes)[c.dtype],
                                       places.mapped(c.places)[c.where])
        parts["rank"].append(np.full(len(c), dump.rank, dtype=np.int32))
        for name, values in zip(("group", "op", "dtype", "where"), numbered):
            parts[name].append(values)
        for name in ("seq", "in_count", "out_count", "t_ns", "duration_ns", "completed"):
            parts[name].append(getattr(c, name))
    rows = {name: np.concatenate(arrays) for name, arrays in parts.items()}
    _truncation_warnings(rows["rank"], rows["group"], rows["seq"], [label for label, _ in resolved], warnings)
    labels = [label for label, _ in resolved]
    label_ids = {label: n for n, label in enumerate(dict.fromkeys(labels))}
    step, step_keys = _steps(rows, np.asarray([label_ids[label] for label in labels], dtype=np.int64)[rows["group"]],
                             list(label_ids))
    order = np.lexsort((rows["rank"], step))
    rows = {name: values[order] for name, values in rows.items()}
    step = step[order]
    itemsizes = np.asarray([_itemsize(d) for d in dtypes.values()] or [0], dtype=np.int64)[rows["dtype"]]
    table = CallTable(
        groups=labels, members=[members for _, members in resolved], ops=ops.values(), dtypes=dtypes.values(),
        places=places.values(), rank=rows["rank"], step=step.astype(np.int32), group=rows["group"], seq=rows["seq"],
        op=rows["op"], dtype=rows["dtype"], count=rows["in_count"], bytes_in=rows["in_count"] * itemsizes,
        bytes_out=rows["out_count"] * itemsizes, t_ns=rows["t_ns"], duration_ns=rows["duration_ns"],
        completed=rows["completed"], root=np.full(len(step), NO_VALUE, dtype=np.int64), where=rows["where"],
        step_count=len(step_keys), group_ids=[group_identity(name, backend) for name, backend in identities],
        backends=[backend for _, backend in identities])
    starts = table.step_starts()[:-1]
    step_t = np.minimum.reduceat(table.t_ns, starts) if len(table) else np.zeros(0, dtype=np.int64)
    names = [f"{op} #{seq} on group {label}" for op, (label, seq) in zip(_step_ops(table, starts), step_keys)]
    ranks, last_at = np.unique(table.rank[::-1], return_index=True)
    last = dict(zip(ranks.tolist(), table.step[len(table) - 1 - last_at].tolist()))
    return JobTable(table, names, step_t, last)


def _itemsize(dtype: str) -> int:
    return itemsize(dtype) or 0


def _truncation_warnings(ranks: np.ndarray, groups: np.ndarray, seqs: np.ndarray, labels: list[str],
                         warnings: list[str]) -> None:
    """Say where a rank's dump starts later on a group than other ranks' (its buffer overflowed)."""
    order = np.lexsort((ranks, groups))
    g, r = groups[order], ranks[order]
    bounds = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (r[1:] != r[:-1])])
    firsts = np.minimum.reduceat(seqs[order], bounds)
    by_group: dict[int, list[tuple[int, int]]] = {}
    for group, rank, seq in zip(g[bounds].tolist(), r[bounds].tolist(), firsts.tolist()):
        by_group.setdefault(group, []).append((rank, seq))
    for group in sorted(by_group):
        earliest = min(seq for _, seq in by_group[group])
        for rank, seq in by_group[group]:
            if seq > earliest:
                warnings.append(f"rank {rank}'s dump starts at call #{seq} on group {labels[group]}, after calls other "
                                "ranks recorded (its older entries were overwritten; a larger TORCH_FR_BUFFER_SIZE keeps more)")


def _steps(rows: dict[str, np.ndarray], label: np.ndarray, labels: list[str]) -> tuple[np.ndarray, list[tuple[str, int]]]:
    """Each row's step, and each step's key (group label, sequence number): keys put in an order that
    keeps every rank's own (rows are in rank order, each rank's in its dump's), earliest first."""
    seq = rows["seq"]
    order = np.lexsort((seq, label))
    sorted_label, sorted_seq = label[order], seq[order]
    new = np.r_[True, (sorted_label[1:] != sorted_label[:-1]) | (sorted_seq[1:] != sorted_seq[:-1])]
    key_of = np.empty(len(seq), dtype=np.int64)
    key_of[order] = np.cumsum(new) - 1
    bounds = np.flatnonzero(new)
    keys = [(labels[lab], s) for lab, s in zip(sorted_label[bounds].tolist(), sorted_seq[bounds].tolist())]
    first_seen = dict(zip(keys, np.minimum.reduceat(rows["t_ns"][order], bounds).tolist()))
    same_rank = rows["rank"][1:] == rows["rank"][:-1]
    moves = same_rank & (key_of[1:] != key_of[:-1])
    pairs = np.unique(key_of[:-1][moves] * len(keys) + key_of[1:][moves])
    sequences: dict[int, tuple[tuple[str, int], ...]] = {n: (key,) for n, key in enumerate(keys)}
    for n, pair in enumerate(pairs.tolist()):
        sequences[len(keys) + n] = (keys[pair // len(keys)], keys[pair % len(keys)])
    ordered = order_steps(sequences, first_seen)
    step_of_key = np.empty(len(keys), dtype=np.int64)
    position = {key: n for n, key in enumerate(ordered)}
    step_of_key[:] = [position[key] for key in keys]
    return step_of_key[key_of], ordered


def _step_ops(table: CallTable, starts: np.ndarray) -> list[str]:
    """Each step's op: the one most of its ranks called (the lowest rank's among equals)."""
    if not len(table):
        return []
    firsts = table.op[starts]
    first_of_row = np.repeat(firsts, np.diff(np.r_[starts, len(table)]))
    odd_steps = set(table.step[table.op != first_of_row].tolist())
    ops = [table.ops[op] for op in firsts.tolist()]
    for step in odd_steps:
        rows = table.rows_of(step)
        ops[step] = table.ops[Counter(table.op[rows.start:rows.stop].tolist()).most_common(1)[0][0]]
    return ops
