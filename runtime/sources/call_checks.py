"""The live run's own hang and mismatch checks, over an import's :class:`~.call_table.CallTable`.

A live run feeds every event to the watchdog (:class:`~..observation.watchdog.CollectiveWatch`)
and the fingerprint check (:class:`~..observation.fingerprints.FingerprintCheck`). An import
knows the whole log at once, and what those checks hold at its end is decided by few rows: the
watch, by the Phase begin of each rank's last step and the Collective begin of each call a rank is
still inside (a completed call leaves nothing behind); the fingerprint check, by the calls at the
places where they differ. :func:`find_problems` finds those rows over the table's columns and feeds
only them to the same two checks, so a 1,024-rank job's two million calls cost array passes, and
the checks' verdicts and sentences are the live run's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..observation.fingerprints import SAME_COUNT_OPS, Disagreement, FingerprintCheck
from ..observation.rank_lists import ranks_text
from ..observation.watchdog import CollectiveWatch, Stalled
from ..wire.protocol import Phase
from .call_table import CallTable

__all__ = ["Findings", "find_problems"]


@dataclass
class Findings:
    """What the checks found: stalls, mismatches, the ranks they implicate, a sentence about the
    last call of each rank that was not where the others waited, and the ranks the artifacts do
    not describe (rank → why), which are never a cause: what they did is unknown. ``failures``:
    the calls the artifacts themselves mark failed or timed out, first first (a sentence each)."""

    stalls: list[Stalled]
    mismatches: list[Disagreement]
    implicated: set[int]
    last_calls: list[str]
    unknown: Mapping[int, str]
    world_size: int
    failures: Sequence[str] = ()

    @property
    def failed(self) -> bool:
        """Whether a call failed or timed out, the job hung or its ranks disagreed."""
        return bool(self.failures or self.stalls or self.mismatches)

    def detail(self) -> str:
        """The RunEnd's account: the first call the artifacts mark failed (failure first), then
        the first mismatch, else who caused the first hang (only ranks the artifacts show
        elsewhere) and what each of those ranks called last; then how many ranks the artifacts do
        not describe."""
        if self.failures:
            more = f" (and {len(self.failures) - 1} more failed calls)" if len(self.failures) > 1 else ""
            rest = self._checks_detail()
            return f"{self.failures[0]}{more}" + (f"; {rest}" if rest else self._unknown_text())
        return self._checks_detail()

    def _checks_detail(self) -> str:
        if self.mismatches:
            more = f" (and {len(self.mismatches) - 1} more mismatches)" if len(self.mismatches) > 1 else ""
            return self.mismatches[0].text + more + self._unknown_text()
        if self.stalls:
            stall = self.stalls[0]
            culprits = sorted(r for r in stall.elsewhere if r not in self.unknown)
            more = f" (and {len(self.stalls) - 1} more groups hung)" if len(self.stalls) > 1 else ""
            cause = (f"hang caused by rank{'s' if len(culprits) > 1 else ''} {ranks_text(culprits)}" if culprits
                     else "hang, its cause unknown (every rank missing from it left no artifact)")
            return (f"{cause}: {stall.text}{more}" + "".join(f"; {line}" for line in self.last_calls)
                    + self._unknown_text())
        return ""

    def _unknown_text(self) -> str:
        if not self.unknown:
            return ""
        absent = sorted(self.unknown)
        return (f" ({len(absent)} of {self.world_size} ranks unknown: rank{'s' if len(absent) > 1 else ''} "
                f"{ranks_text(absent)}, {self.unknown[absent[0]]})")


def find_problems(table: CallTable, step_names: Sequence[str], last_step: Mapping[int, int],
                  missing: Mapping[int, str], world_size: int, check_calls: bool, warnings: list[str],
                  failures: Sequence[str] = ()) -> Findings:
    """The live checks' verdict on the whole table, at the log's end: ``step_names`` names each
    step, ``last_step`` is each rank's last step (with a call or not), ``missing`` the ranks the
    artifacts do not describe (rank → why); ``check_calls``: compare calls across ranks;
    ``failures``: the calls the artifacts mark failed or timed out (they fail the run first).
    ``warnings`` gains each call no rank could be blamed for. A call that every rank not inside it
    has completed is no hang: the ranks inside had not yet recorded its completion (gloo's Flight
    Recorder retires a call a moment after it returns)."""
    labels = _label_ids(table)
    watch = CollectiveWatch(timeout_s=0)
    for rank, why in missing.items():
        watch.unknown(rank, why)
    for rank, index in sorted(last_step.items()):
        watch.observe(Phase(run="", rank=rank, seq=0, t_ns=0, index=index, name=step_names[index], edge="begin"))
    for row in _still_inside(table, labels):
        watch.observe(table.event(row, "", 0, list(table.members[table.group[row]]), "begin"))
    stalls = []
    for stall in watch.check_at_end():
        known = [rank for rank in stall.elsewhere if rank not in missing]
        if known and set(known) <= _completed_by(table, stall):
            warnings.append(f"{stall.op} #{stall.group_seq} on group {stall.group}: every other rank completed it, "
                            f"but rank{'s' if len(stall.waiting) > 1 else ''} {ranks_text(stall.waiting)} had "
                            "not yet recorded it completed: not a hang")
            continue
        stalls.append(stall)
    _open_call_warnings(table, labels, {(s.group, s.group_seq) for s in stalls}, warnings)
    findings = Findings(stalls, _mismatches(table) if check_calls else [], set(), [], missing, world_size, failures)
    last_rows = _last_rows(table) if findings.stalls else {}
    for stall in findings.stalls:
        findings.implicated.update(stall.waiting)
        for rank in sorted(r for r in stall.elsewhere if r not in missing):
            findings.implicated.add(rank)
            last = last_rows.get(rank)
            if last is not None and stall is findings.stalls[0]:
                findings.last_calls.append(f"rank {rank}'s last call: {_last_call_text(table, last)}")
    for found in findings.mismatches:
        findings.implicated.update(found.odd_ranks)
    return findings


def _label_ids(table: CallTable) -> np.ndarray:
    """Each row's group label as a number (two groups of one label and other ranks share it)."""
    ids: dict[str, int] = {}
    of_group = np.asarray([ids.setdefault(label, len(ids)) for label in table.groups], dtype=np.int32)
    return of_group[table.group] if len(table) else np.zeros(0, dtype=np.int32)


def _still_inside(table: CallTable, labels: np.ndarray) -> list[int]:
    """The rows of the calls ranks are still inside at the log's end (on a group, a rank's last call,
    if not completed), in the order the watch holds them: by rank, then by the step where its run
    of calls not completed on that group began (the watch keeps a group's place while the rank
    stays inside calls there)."""
    if table.completed.all():
        return []
    order = np.lexsort((table.step, labels, table.rank))
    ranks, groups, done = table.rank[order], labels[order], table.completed[order]
    block_end = np.flatnonzero(np.r_[(ranks[1:] != ranks[:-1]) | (groups[1:] != groups[:-1]), True])
    found = []
    for at in block_end[~done[block_end]].tolist():
        start = at
        while start > 0 and ranks[start - 1] == ranks[at] and groups[start - 1] == groups[at] and not done[start - 1]:
            start -= 1
        found.append((int(ranks[at]), int(table.step[order[start]]), int(order[at])))
    return [row for _, _, row in sorted(found)]


def _completed_by(table: CallTable, stall: Stalled) -> set[int]:
    """The ranks that completed the stalled call."""
    groups = [index for index, label in enumerate(table.groups) if label == stall.group]
    rows = np.isin(table.group, groups) & (table.seq == stall.group_seq) & table.completed
    return set(table.rank[rows].tolist())


def _places(table: CallTable, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows in order of their place (``keys``: a group number per row, then the sequence number;
    each place's rows in the table's order) and where each place begins, then where the rows end.
    An import whose every step is one place (Flight Recorder's) needs no sort."""
    starts = table.step_starts()
    firsts = starts[:-1][starts[:-1] < starts[1:]]
    first_of = np.repeat(firsts, np.diff(np.r_[firsts, len(table)]))
    if np.array_equal(keys[first_of], keys) and np.array_equal(table.seq[first_of], table.seq):
        return np.arange(len(table)), np.r_[firsts, len(table)]
    order = np.lexsort((table.seq, keys))
    k, s = keys[order], table.seq[order]
    bounds = np.flatnonzero(np.r_[True, (k[1:] != k[:-1]) | (s[1:] != s[:-1])]) if len(order) else np.zeros(0, np.int64)
    return order, np.r_[bounds, len(order)]


def _mismatches(table: CallTable) -> list[Disagreement]:
    """Every place whose calls differ (op, element type, count where it must agree, root), as the
    fingerprint check reports it: the check is fed the calls of those places only."""
    if len(table) < 2:
        return []
    order, bounds = _places(table, table.group)
    same_count = np.isin(table.op, [i for i, op in enumerate(table.ops) if op in SAME_COUNT_OPS])
    prints = (table.op, table.dtype, np.where(same_count, table.count, -1), table.root)
    first = np.repeat(bounds[:-1], np.diff(bounds))
    differs = np.zeros(len(order), dtype=bool)
    for column in prints:
        ordered = column[order]
        differs |= ordered != ordered[first]
    odd_places = np.unique(np.searchsorted(bounds, np.flatnonzero(differs), side="right") - 1)
    if not len(odd_places):
        return []
    check = FingerprintCheck()
    lists: dict[int, list[int]] = {}
    for place in odd_places.tolist():
        for row in sorted(order[bounds[place]:bounds[place + 1]].tolist()):
            ranks = lists.setdefault(int(table.group[row]), list(table.members[table.group[row]]))
            check.observe(table.event(row, "", 0, ranks, "begin"))
    return check.check()


def _open_call_warnings(table: CallTable, labels: np.ndarray, stalled: set[tuple[str, int]],
                        warnings: list[str]) -> None:
    """Say each call every rank of the artifacts was still inside with no other rank to blame (every
    member the artifacts know is inside it): a job stuck there, or one taken mid-call, cannot be
    told apart; the artifacts of other ranks, if the job had more, would say."""
    if not len(table) or table.completed.all():
        return
    order, bounds = _places(table, labels)
    done = np.logical_or.reduceat(table.completed[order], bounds[:-1]) if len(order) else np.zeros(0, dtype=bool)
    place_of = np.empty(len(table), dtype=np.int64)
    place_of[order] = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
    inside: dict[tuple[str, int, str], list[int]] = {}
    for row in np.flatnonzero(~table.completed & ~done[place_of]).tolist():
        group, seq = table.groups[table.group[row]], int(table.seq[row])
        if (group, seq) not in stalled:
            inside.setdefault((group, seq, table.ops[table.op[row]]), []).append(int(table.rank[row]))
    for (group, seq, op), ranks in inside.items():
        warnings.append(f"{op} #{seq} on group {group}: rank{'s' if len(ranks) > 1 else ''} {ranks_text(sorted(ranks))} "
                        "still inside it, and no rank of the artifacts completed it: stuck there or taken mid-call "
                        "(the job's other ranks, if it had more, would say)")


def _last_rows(table: CallTable) -> dict[int, int]:
    """Each rank's last call (in step order) as its row."""
    ranks, at = np.unique(table.rank[::-1], return_index=True)
    return dict(zip(ranks.tolist(), (len(table) - 1 - at).tolist()))


def _last_call_text(table: CallTable, row: int) -> str:
    state = "completed" if table.completed[row] else "not completed"
    where = table.places[table.where[row]]
    return f"{table.call_text(row)}, {state}" + (f", called at {where}" if where else "")
