"""Plant realistic bugs one at a time and check that the tests meant to catch each one do, by a value.

Each :class:`Bug` names a file, an exact snippet of its source (found exactly once, or the plant
fails loudly: the code moved and the list needs updating), the buggy replacement, and the narrow
pytest selection that should catch it. The runner patches the file in place in the worktree it runs
from (so every import, in-process or in a subprocess the tests start, sees the bug), runs the
selection in a subprocess, and always restores the original bytes (also on Ctrl-C or SIGTERM).

A bug is *killed by a value* only when a test failed in its body with an AssertionError (a compared
value, ``torch.testing.assert_close``, ``pytest.approx``); an exception of any other type, a fixture
that failed, a timeout or a collection error is *crashed*; all selected tests passing is *survived*.
The exit status is 0 only when every bug on the list is killed by a value.

A run of the whole list writes each bug's verdict to :data:`RECORD` (with a fingerprint of the bug:
its file, snippet, replacement and selection), which ``tests/contracts/test_planted_bugs.py`` reads:
the suite fails where a listed bug's last verdict is not killed-by-value, or where the bug changed
(or was added) since the list was last run whole.

Usage: ``python tests/support/planted_bugs.py [--list] [--only NAME ...] [--timeout S] [--reverse-order]
[--shuffle-seed N]`` (the last two run each selection's tests in that order: a verdict must not
depend on it)
(this file has no ``test_`` prefix, so pytest never collects it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

ROOT = Path(__file__).resolve().parents[2]
"""The worktree this script runs from: the bugs are planted in its files."""

RECORD = Path(__file__).with_name("planted_bugs_record.json")
"""Each bug's verdict in the last run of the whole list, by name: ``{"fingerprint", "outcome"}``."""

REPORT_ENV = "COLLVIZ_PLANTED_BUG_REPORT"
"""The variable naming the JSON file the pytest plugin half of this module writes failures to."""


@dataclass(frozen=True)
class Bug:
    """One planted bug: ``snippet`` in ``path`` (relative to the worktree) becomes ``replacement``;
    ``tests`` is the pytest selection (node ids or ``-k`` arguments) that should catch it; ``what``
    says in a line what the bug does, as a user would see it."""

    name: str
    path: str
    snippet: str
    replacement: str
    tests: tuple[str, ...]
    what: str

    @property
    def fingerprint(self) -> str:
        """A digest of what the bug is and what should catch it (its description left out)."""
        text = json.dumps([self.path, self.snippet, self.replacement, list(self.tests)])
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


BUGS: tuple[Bug, ...] = (
    # --- bandwidth figures (nccl-tests) -----------------------------------------------------------
    Bug("busbw-factor", "runtime/observation/metrics.py",
        "        return Fraction(2 * (n - 1), n)", "        return Fraction(n - 1, n)",
        ("tests/runtime/test_collectives.py::test_bus_factors_follow_nccl_tests",),
        "all_reduce's busbw factor (n−1)/n instead of 2(n−1)/n"),
    Bug("algbw-gather-size", "runtime/observation/metrics.py",
        '    if op in ("all_gather", "gather"):\n        return bytes_in * world_size',
        '    if op in ("all_gather", "gather"):\n        return bytes_in',
        ("tests/runtime/test_collectives.py::test_collective_events_carry_nccl_tests_algorithm_size_and_timing",),
        "all_gather's algorithm size S taken as one rank's input, not input × n (algbw n× low)"),
    # --- provenance and chunk ranges --------------------------------------------------------------
    Bug("provenance-run-bounds", "runtime/observation/tensors.py",
        "changes = (torch.nonzero(flat[1:] != flat[:-1]).reshape(-1) + 1).tolist()",
        "changes = (torch.nonzero(flat[1:] != flat[:-1]).reshape(-1)).tolist()",
        ("tests/runtime/test_tags.py", "-k", "simulated_64 or any_subset or merge"),
        "provenance runs start one element early (off-by-one chunk ranges)"),
    Bug("provenance-pass-offset", "runtime/observation/tensors.py",
        "ranks=[first + r for r in range(mask.bit_length()) if mask >> r & 1]",
        "ranks=[r for r in range(mask.bit_length()) if mask >> r & 1]",
        ("tests/runtime/test_tags.py", "-k", "simulated_64"),
        "a later tag pass's bits name ranks 0… instead of its own slice of ranks"),
    Bug("transfer-spans-unmerged", "runtime/programs/transfers.py",
        "if segments and segments[-1][0] + segments[-1][1] == run.start:",
        "if segments and segments[-1][0] == run.start:",
        ("tests/runtime/test_transfers.py",),
        "adjacent provenance runs from one rank become separate transfers"),
    Bug("reduce-partial-sums", "runtime/programs/collectives.py",
        "placeholder=not _has_input(spec, ctx.rank))",
        'placeholder=not _has_input(spec, ctx.rank) or (spec.op == "reduce" and ctx.rank != spec.root))',
        ("tests/runtime/test_collectives.py::test_reduce_on_gloo_leaves_partial_results_and_provenance_explains_them",),
        "reduce's provenance tags only the root's data, hiding the partial sums gloo leaves elsewhere"),
    Bug("gather-memory-need", "runtime/programs/collectives.py",
        "return 4 + (world_size if op in GATHERING else 1)",
        "return 4 + 1",
        ("tests/runtime/test_collectives.py::test_the_memory_check_counts_the_largest_output_a_rank_allocates",),
        "--size's memory check counts a gather's output as one input, not world size × it"),
    Bug("old-trace-hops-dropped", "runtime/wire/protocol.py",
        "self.hop, self.legacy_step = self.legacy_step, 0",
        "self.legacy_step = 0",
        ("tests/runtime/test_trace.py::test_a_trace_before_1_6_reads_each_transfers_step_as_its_hop",),
        "a trace recorded before protocol 1.6 shows its p2p transfers without their hop"),
    # --- hop-by-hop algorithms --------------------------------------------------------------------
    Bug("chunk-ranges", "runtime/programs/algorithms/plans.py",
        "edges = [i * count // parts for i in range(parts + 1)]",
        "edges = [i * (count // parts) for i in range(parts + 1)]",
        ("tests/runtime/test_algorithms.py::test_every_plan_computes_the_op",),
        "ring chunks of count // n each: an uneven buffer's tail is never sent"),
    Bug("ring-order", "runtime/programs/algorithms/plans.py",
        "messages.append(Message(r, (r + 1) % n, buffer, start, length, buffer, start, True))",
        "messages.append(Message(r, (r - 1) % n, buffer, start, length, buffer, start, True))",
        ("tests/runtime/test_algorithms.py::test_every_plan_computes_the_op",),
        "the ring's reduce-scatter sends to the left while its all-gather sends to the right"),
    Bug("tree-order", "runtime/programs/algorithms/plans.py",
        "return _binomial_reduce(n, count, 0) + _binomial_broadcast(n, count, 0)",
        "return _binomial_broadcast(n, count, 0) + _binomial_reduce(n, count, 0)",
        ("tests/runtime/test_algorithms.py::test_every_plan_computes_the_op",),
        "the tree all-reduce broadcasts before it reduces"),
    Bug("recursive-doubling-return", "runtime/programs/algorithms/plans.py",
        'Message(r - p, r, "x", 0, count, "x", 0, False) for r in extra',
        'Message(r - p, r, "x", 0, count, "x", 0, True) for r in extra',
        ("tests/runtime/test_algorithms.py::test_every_plan_computes_the_op",),
        "recursive doubling's extra ranks add the result to their input instead of taking it"),
    # --- memory -----------------------------------------------------------------------------------
    Bug("ddp-buckets-as-params", "runtime/programs/training/ddp.py",
        'with ctx.tracker.category("grads"):', 'with ctx.tracker.category("params"):',
        ("tests/runtime/test_memory_categories.py",),
        "DDP's gradient buckets counted as parameters"),
    Bug("tp-reference-counted", "runtime/programs/training/tp.py",
        "    with ctx.tracker.suspended():\n        reference = copy.deepcopy(mlp)",
        "    if True:  # the check's copy, tracked\n        reference = copy.deepcopy(mlp)",
        ("tests/runtime/test_memory_categories.py", "-k", "tp_"),
        "tensor parallelism's unsharded reference copy counted as the rank's parameters"),
    Bug("pp-grads-as-params", "runtime/programs/training/pp.py",
        'with ctx.tracker.category("grads"):', 'with ctx.tracker.category("params"):',
        ("tests/runtime/test_memory_categories.py", "-k", "pp_"),
        "a pipeline stage's gradients counted as parameters"),
    Bug("memory-category-nesting", "runtime/observation/memory.py",
        "            self._category = previous", "            self._category = name",
        ("tests/runtime/test_memory.py",),
        "a category block leaves its category in force after it ends"),
    # --- timing: slowest rank, profiler, export ---------------------------------------------------
    Bug("cost-fastest-as-slowest", "app/model/cost.py",
        "slowest = max(timed, key=_SECONDS)", "slowest = min(timed, key=_SECONDS)",
        ("tests/app/test_cost_values.py",),
        "the cost pane names the fastest rank as the slowest"),
    Bug("cost-call-time-min", "app/model/cost.py",
        'return {iterations[0]: max(cast("list[int]", durations))}',
        'return {iterations[0]: min(cast("list[int]", durations))}',
        ("tests/app/test_cost_values.py",),
        "a call's time is its fastest rank's, not its slowest's"),
    Bug("summary-fastest-time", "runtime/reports/summary.py",
        "max(medians.values()) / 1e9)", "min(medians.values()) / 1e9)",
        ("tests/runtime/test_summary_values.py",),
        "the summary's algbw uses the fastest rank's time"),
    Bug("summary-transfer-bytes", "runtime/reports/summary.py",
        "total = sum(t.bytes for t in transfers)", "total = sum(t.length for t in transfers)",
        ("tests/runtime/test_summary_values.py",),
        "the summary totals transfers in elements, labelled bytes"),
    Bug("profiler-microseconds", "runtime/sources/trace_work.py",
        'took = work["dur"] * 1000', 'took = work["dur"]',
        ("tests/runtime/test_profiler_times.py",),
        "profiler durations read as ns where the trace has µs (1,000× too short)"),
    Bug("export-nanoseconds", "runtime/reports/export.py",
        "return round((t_ns - self.t0) / 1000, 3)", "return round(t_ns - self.t0, 3)",
        ("tests/commands/test_export.py::test_pipeline_spans_become_slices_of_their_measured_length",),
        "the Perfetto export writes ns where the format wants µs"),
    Bug("bench-fastest-rank", "runtime/reports/bench_table.py",
        "slowest_ns = max(statistics.median(times) for times in per_rank.values())",
        "slowest_ns = min(statistics.median(times) for times in per_rank.values())",
        ("tests/runtime/test_bench_rows.py",),
        "a bench row is timed by its fastest rank"),
    # --- hangs and mismatches ---------------------------------------------------------------------
    Bug("watchdog-late", "runtime/observation/watchdog.py",
        "overdue = waited_s is None or waited_s >= self.timeout_s",
        "overdue = waited_s is None or waited_s >= 2 * self.timeout_s",
        ("tests/runtime/test_watchdog.py",),
        "the watch reports a stall only after twice its timeout"),
    Bug("hang-timeout-longer", "runtime/sessions/intake.py",
        "self._watch = CollectiveWatch(timeout_s)", "self._watch = CollectiveWatch(timeout_s + 2)",
        ("tests/runtime/test_hostile.py::test_a_rank_that_never_arrives_is_a_hang_blaming_it",),
        "a live run's hang report comes 2 s after --timeout (still before gloo's own error)"),
    Bug("importer-culprit", "runtime/sources/call_checks.py",
        "culprits = sorted(r for r in stall.elsewhere if r not in self.unknown)",
        "culprits = sorted(r for r in stall.waiting if r not in self.unknown)",
        ("tests/runtime/test_fr_import.py::test_a_rank_that_skips_a_call_is_named_with_its_last_call",),
        "a Flight Recorder hang blames the ranks that wait instead of the one that never came"),
    Bug("fingerprint-reduce-op", "runtime/observation/fingerprints.py",
        "        parts.append(reduce_op)", "        parts.append(dtype)",
        ("tests/runtime/test_fingerprints.py",),
        "the call fingerprint ignores the reduce op (sum on one rank, max on another passes)"),
    # --- viewer model -----------------------------------------------------------------------------
    Bug("quiz-tolerance", "app/model/quiz.py",
        "rel_tol=5e-3, abs_tol=5e-4", "rel_tol=5e-2, abs_tol=5e-3",
        ("tests/app/test_quiz.py::test_a_prediction_one_percent_off_is_wrong",
         "tests/app/test_quiz.py::test_values_are_graded_to_the_precision_shown"),
        "quiz grading 10× more tolerant than the 3 digits shown"),
    Bug("seek-off-by-one", "app/model/navigation.py",
        "return ends[number - 1]", "return ends[min(number, len(ends) - 1)]",
        ("tests/app/test_view_model.py::test_step_navigation_and_seek",),
        "g (seek) lands one step after the one asked for"),
    Bug("trace-index-call-order", "app/model/trace_index.py",
        "order = np.lexsort((at, numbers, groups, phases))", "order = np.lexsort((-at, numbers, groups, phases))",
        ("tests/app/test_trace_index.py", "-k", "synthetic_runs"),
        "the fast trace index takes each call's last end as its first"),
    # --- reports ----------------------------------------------------------------------------------
    Bug("alpha-beta-sign", "runtime/reports/alpha_beta.py",
        "alpha = (ht * bb - hb * bt) / determinant", "alpha = (ht * bb + hb * bt) / determinant",
        ("tests/runtime/test_alpha_beta.py",),
        "the α–β least-squares solution has a sign wrong"),
    Bug("pp-ideal-bubble", "runtime/reports/pipeline.py",
        "return (stages - 1) / (microbatches + stages - 1)", "return (stages - 1) / (microbatches + stages)",
        ("tests/runtime/test_pp.py", "-k", "idle_share or unequal_stages"),
        "the ideal bubble (p−1)/(m+p) instead of (p−1)/(m+p−1)"),
    Bug("pp-measured-bubble", "runtime/reports/pipeline.py",
        "return sum(self.bubble(rank) for rank in self.spans) / max(1, self.stages)",
        "return sum(self.bubble(rank) for rank in self.spans) / max(1, self.microbatches)",
        ("tests/runtime/test_pp.py", "-k", "idle_share or unequal_stages"),
        "the measured bubble averaged over microbatches instead of stages"),
    # --- the training scenarios' own checks -------------------------------------------------------
    Bug("check-close-lenient", "runtime/programs/training/common.py",
        "torch.allclose(got.double(), expected.double(), rtol=1e-5, atol=1e-6)",
        "torch.allclose(got.double(), expected.double(), rtol=1e-2, atol=1e-2)",
        ("tests/runtime/test_checks.py",),
        "the training checks accept a 1 % error as float rounding"),
    Bug("check-identical-lenient", "runtime/programs/training/common.py",
        "if not torch.equal(copies[r], mine)]", "if not torch.allclose(copies[r], mine, atol=1e-2)]",
        ("tests/runtime/test_checks.py",),
        "'identical on all ranks' accepts ranks that drifted apart"),
    # --- issue #42: bugs written from the code alone, as a reviewer would (2026-11-28) ------------
    # Flight Recorder: columns of one dump
    Bug("fr-duration-ms-as-us", "runtime/sources/fr_columns.py",
        "ns = duration * 1e6 if", "ns = duration * 1e3 if",
        ("tests/runtime/test_fr_columns.py",),
        "a dump's duration_ms read as µs: every Flight Recorder call 1,000× too fast"),
    Bug("fr-deadline-timeout-units", "runtime/sources/fr_columns.py",
        "found[row] = min(start + timeout * 1_000_000, _LARGEST_NUMBER)",
        "found[row] = min(start + timeout * 1_000, _LARGEST_NUMBER)",
        ("tests/runtime/test_fr_job_values.py",),
        "a call's timeout_ms read as µs: calls still running are said to have timed out"),
    Bug("fr-deadline-wrong-clock", "runtime/sources/fr_columns.py",
        '(raw.get("time_discovered_started_ns"), raw.get("time_created_ns"))',
        '(raw.get("time_created_ns"), raw.get("time_discovered_started_ns"))',
        ("tests/runtime/test_fr_job_values.py",),
        "a call's deadline counted from when it was enqueued, not from when it started"),
    Bug("fr-holes-count", "runtime/sources/fr_columns.py",
        "count = ordered[-1] - ordered[0] + 1 - len(ordered) if ordered else 0",
        "count = ordered[-1] - ordered[0] - len(ordered) if ordered else 0",
        ("tests/runtime/test_fr_columns.py",),
        "the calls missing inside a dump's sequence counted one short (one hole: no warning)"),
    Bug("fr-coalesced-sizes-replaced", "runtime/sources/fr_columns.py",
        "self.in_count[first] += self.in_count[row]", "self.in_count[first] = self.in_count[row]",
        ("tests/runtime/test_fr_columns.py",),
        "a coalesced call's input size is its last tensor's, not the sum"),
    Bug("fr-first-dtype-last", "runtime/sources/fr_columns.py",
        'heads = [d[0] if d else None for d in column]', 'heads = [d[-1] if d else None for d in column]',
        ("tests/runtime/test_fr_job_values.py",),
        "a call's element type taken from its last input, not its first"),
    Bug("fr-record-order-reversed", "runtime/sources/fr_columns.py",
        "order = sorted(range(len(keys)), key=keys.__getitem__)",
        "order = sorted(range(len(keys)), key=keys.__getitem__, reverse=True)",
        ("tests/runtime/test_fr_job_values.py",),
        "a dump listed out of record_id order read newest first"),
    Bug("fr-comm-lib-version-none", "runtime/sources/fr_columns.py",
        'str(content.get("comm_lib_version") or "")', 'str(content.get("comm_lib_version", ""))',
        ("tests/runtime/test_fr_job_values.py",),
        "a dump whose comm_lib_version is null shows NCCL version 'None'"),
    # Flight Recorder: the job's table
    Bug("fr-truncation-from-last-call", "runtime/sources/fr_table.py",
        "firsts = np.minimum.reduceat(seqs[order], bounds)", "firsts = np.maximum.reduceat(seqs[order], bounds)",
        ("tests/runtime/test_fr_job_values.py",),
        "the truncation warning compares each rank's last call, not its first (a rank that stopped early named)"),
    Bug("fr-truncation-off-by-one", "runtime/sources/fr_table.py",
        "            if seq > earliest:", "            if seq > earliest + 1:",
        ("tests/runtime/test_fr_job_values.py",),
        "a dump that starts one call later than the others is not warned of"),
    Bug("fr-bytes-out-from-input", "runtime/sources/fr_table.py",
        'bytes_out=rows["out_count"] * itemsizes', 'bytes_out=rows["in_count"] * itemsizes',
        ("tests/runtime/test_fr_job_values.py",),
        "an all_gather's output bytes shown as its input's"),
    Bug("fr-world-size-off-by-one", "runtime/sources/flight_recorder.py",
        "        return highest + 1", "        return highest",
        ("tests/runtime/test_fr_job_values.py",),
        "the job's size one short of its highest rank + 1"),
    Bug("fr-timeout-wait-wrong-row", "runtime/sources/flight_recorder.py",
        "waited = latest - int(c.t_ns[row])", "waited = latest - int(c.t_ns[0])",
        ("tests/runtime/test_fr_failures.py",),
        "a timed-out call's wait counted from the dump's first call, not from its own"),
    # the summary of a large import
    Bug("table-summary-world-busbw", "runtime/sources/table_summary.py",
        "self._algo_bytes(name, len(ranks), bytes_in, bytes_out)",
        "self._algo_bytes(name, self.start.world_size, bytes_in, bytes_out)",
        ("tests/runtime/test_fr_job_values.py",),
        "a 2-of-4 subgroup's all_gather in a Flight Recorder --json with S (and algbw, busbw) twice too high"),
    Bug("table-summary-fastest-step", "runtime/sources/table_summary.py",
        "self._took = np.maximum.reduceat(", "self._took = np.minimum.reduceat(",
        ("tests/runtime/test_fr_job_values.py",),
        "a large import's step time is its fastest rank's"),
    # checks over the call table
    Bug("checks-mismatch-count", "runtime/sources/call_checks.py",
        'more = f" (and {len(self.mismatches) - 1} more mismatches)"',
        'more = f" (and {len(self.mismatches)} more mismatches)"',
        ("tests/runtime/test_fr_checks_values.py::test_two_mismatches_name_the_first_and_count_the_other",),
        "the outcome counts one more mismatch than there is"),
    Bug("checks-dtype-ignored", "runtime/sources/call_checks.py",
        "prints = (table.op, table.dtype, np.where(", "prints = (table.op, np.where(",
        ("tests/runtime/test_fr_checks_values.py::test_two_mismatches_name_the_first_and_count_the_other",),
        "an import's call with float32 on one rank and bfloat16 on another is no mismatch"),
    Bug("checks-last-call-first", "runtime/sources/call_checks.py",
        "ranks, at = np.unique(table.rank[::-1], return_index=True)\n    return dict(",
        "ranks, at = np.unique(table.rank, return_index=True)\n    return dict(",
        ("tests/runtime/test_fr_checks_values.py::test_a_hang_names_the_culprits_last_call",),
        "a hang names each culprit's wrong call as its last"),
    # lists of ranks
    Bug("ranks-text-pairs-as-range", "runtime/observation/rank_lists.py",
        "if len(run) >= 3 else", "if len(run) >= 2 else",
        ("tests/runtime/test_artifact_imports.py::test_rank_lists_read_as_ranges",),
        "ranks 4, 5 written 4–5"),
    # NCCL Inspector
    Bug("inspector-first-kernel-latest", "runtime/sources/inspector_records.py",
        "start = min(starts) if starts else", "start = max(starts) if starts else",
        ("tests/runtime/test_inspector_job_values.py",),
        "a verbose Inspector call starts at its last channel's kernel, not its first"),
    Bug("inspector-unprefixed-fields", "runtime/sources/inspector_records.py",
        'return perf.get(f"{prefix}_{name}", perf.get(name))', 'return perf.get(f"{prefix}_{name}")',
        ("tests/runtime/test_inspector_formats.py",),
        "a record writing exec_time_us without its coll_ prefix (issue #41's) read as damaged"),
    Bug("inspector-reduce-scatter-sizes", "runtime/sources/nccl_inspector.py",
        "        return size * n, size\n", "        return size, size * n\n",
        ("tests/runtime/test_nccl_inspector.py", "tests/runtime/test_inspector_formats.py"),
        "an Inspector reduce_scatter's input and output sizes swapped"),
    Bug("inspector-call-number-from-0", "runtime/sources/nccl_inspector.py",
        "group_seq=record.sn + 1, op=record.op", "group_seq=record.sn, op=record.op",
        ("tests/runtime/test_nccl_inspector.py", "tests/runtime/test_inspector_formats.py"),
        "Inspector calls numbered from #0 where collviz numbers from #1"),
    Bug("inspector-exec-us-as-ns", "runtime/sources/nccl_inspector.py",
        "duration_ns=round(record.exec_us * 1000) if", "duration_ns=round(record.exec_us) if",
        ("tests/runtime/test_nccl_inspector.py", "tests/runtime/test_inspector_formats.py"),
        "NCCL's execution time in µs read as ns: every Inspector call 1,000× too fast"),
    Bug("inspector-start-at-dump", "runtime/sources/nccl_inspector.py",
        "else record.dump_us - round(record.exec_us)", "else record.dump_us",
        ("tests/runtime/test_nccl_inspector.py", "tests/runtime/test_inspector_formats.py"),
        "without the verbose trace a call is placed to start, not end, at its dump"),
    Bug("inspector-gaps-off-by-one", "runtime/sources/nccl_inspector.py",
        "return sum(max(sns) - min(sns) + 1 - len(sns) for", "return sum(max(sns) - min(sns) - len(sns) for",
        ("tests/runtime/test_nccl_inspector.py", "tests/runtime/test_inspector_formats.py"),
        "the sampled-calls warning counts one call fewer per rank and operation"),
    Bug("inspector-side-by-side-range", "runtime/sources/nccl_inspector.py",
        "as ranks {ranks_text(list(range(first, first + nranks)))} of the job",
        "as ranks {ranks_text(list(range(first, first + nranks - 1)))} of the job",
        ("tests/runtime/test_nccl_inspector.py", "tests/runtime/test_inspector_formats.py"),
        "a communicator shown side by side is said to hold one rank fewer"),
    Bug("inspector-duplicate-record-twice", "runtime/sources/nccl_inspector.py",
        "        ranks_of[key].add(call.rank)\n", "",
        ("tests/runtime/test_inspector_job_values.py",),
        "a call two dumps both wrote is shown twice on its rank"),
    # profiler traces
    Bug("profiler-events-by-duration", "runtime/sources/profiler.py",
        'return sorted(found, key=lambda e: e["ts"])', 'return sorted(found, key=lambda e: e["dur"])',
        ("tests/runtime/test_profiler_times.py", "tests/runtime/test_profiler_import.py", "-k", "profiler"),
        "a profiler trace's events read in order of duration, not start"),
    # reports and the cost pane
    Bug("summary-json-world-busbw", "runtime/reports/summary_json.py",
        "        ranks = len(first.group_ranks) or world_size\n        algo_bytes",
        "        ranks = world_size\n        algo_bytes",
        ("tests/runtime/test_subgroup_summary.py",),
        "--json gives a 2-of-4 subgroup's busbw with the world's factor"),
    Bug("summary-json-fastest-call", "runtime/reports/summary_json.py",
        "slowest = max(times.values()) if times else None", "slowest = min(times.values()) if times else None",
        ("tests/runtime/test_subgroup_summary.py",),
        "--json's slowest_seconds (and algbw) from the fastest rank"),
    Bug("summary-json-last-rank-phase", "runtime/reports/summary_json.py",
        'phase["slowest_seconds"] = max(phase["slowest_seconds"] or 0.0, took)', 'phase["slowest_seconds"] = took',
        ("tests/runtime/test_subgroup_summary.py",),
        "--json's phase time is the last rank's to end, not the slowest"),
    Bug("summary-world-busbw", "runtime/reports/summary.py",
        "        n = len(first.group_ranks) or world_size", "        n = world_size",
        ("tests/runtime/test_subgroup_summary.py",),
        "the summary's busbw of a subgroup's call uses the world's size"),
    Bug("cost-world-busbw", "app/model/cost.py",
        "group_ranks = len(series.events[bisect_left(series.index, call_first)].group_ranks) or log.world_size",
        "group_ranks = log.world_size",
        ("tests/app/test_cost_subgroup.py",),
        "the cost pane's busbw of a 2-of-4 subgroup's call uses 4 ranks"),
    Bug("cost-phase-last-rank", "app/model/cost.py",
        "slowest = max(slowest or 0, end - begin)", "slowest = end - begin",
        ("tests/app/test_cost_subgroup.py",),
        "an untimed call's phase time is the last rank's, not the slowest"),
    # --- the four shapes of every source (4 ranks, a pair without rank 0, equal-size groups) -----------
    Bug("fr-status-names-groups", "runtime/sources/flight_recorder.py",
        "            if named <= set(columns.status_groups):", "            if True:",
        ("tests/runtime/test_run_shapes.py::test_the_two_pairs_are_two_groups",),
        "gloo's per-process pg_status keys read as group names: pair {0,1} taken as the world in collviz run"),
    Bug("nccl-log-local-ranks", "runtime/sources/nccl_log.py",
        "        return self.members.get(local, local if self.world and 0 <= local < self.count else None)",
        "        return local if 0 <= local < self.count else None",
        ("tests/runtime/test_nccl_log_shapes.py",),
        "an NCCL communicator's local ranks drawn as the job's: pair {2,3}'s ring drawn between ranks 0 and 1"),
    Bug("profiler-default-group", "runtime/sources/profiler.py",
        '    label, ranks = groups.get(name, (group_label(name, str(args.get("Process Group Description") or "")), ()))',
        '    label, ranks = groups.get("0", (group_label(name, str(args.get("Process Group Description") or "")), ()))',
        ("tests/runtime/test_profiler_shapes.py",),
        "a record_param_comms row's group looked up as the default group: a pair's call on the world's ranks"),
    Bug("attach-wait-members-read", "runtime/live/reading.py",
        "        members = waiting[0].group_ranks", "        members = tuple(sorted(reading.answered))",
        ("tests/runtime/test_attach_shapes.py",),
        "a wait's members taken as every rank read: a pair's wait blames the other pair's ranks"),
    Bug("live-calls-keyed-by-label", "runtime/live/feed.py",
        "            key = call.key\n", "            key = (call.group, call.group_seq)\n",
        ("tests/runtime/test_live_keys.py",),
        "a live call keyed by its group's label: a two-backend group's calls shown again when the label gains 'on nccl'"),
)
"""The fixed list, grouped by what breaks; each selection is the narrowest that should catch its bug."""


# --- the pytest plugin half: loaded in the subprocess with ``-p support.planted_bugs`` -----------------

def pytest_exception_interact(node: pytest.Item | pytest.Collector, call: pytest.CallInfo[object],
                              report: pytest.TestReport | pytest.CollectReport) -> None:
    """Record each failure's test, phase and exception type for the runner."""
    path = os.environ.get(REPORT_ENV)
    if not path or call.excinfo is None:
        return
    text = str(call.excinfo.value).strip()
    record = {"test": node.nodeid, "when": call.when, "type": call.excinfo.type.__name__,
              "assertion": issubclass(call.excinfo.type, AssertionError),
              "message": text.splitlines()[0][:160] if text else ""}
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


# --- the runner ---------------------------------------------------------------------------------

class PlantError(Exception):
    """A bug's snippet is not found exactly once in its file (the code moved: update the list)."""


@dataclass(frozen=True)
class Verdict:
    """What the selection did with one bug planted."""

    bug: Bug
    outcome: str  # "killed" | "crashed" | "survived"
    by: str
    seconds: float


def planted_text(bug: Bug, original: str) -> str:
    """``original`` with the bug's snippet replaced; PlantError unless the snippet occurs exactly once."""
    count = original.count(bug.snippet)
    if count != 1:
        raise PlantError(f"{bug.name}: the snippet occurs {count} times in {bug.path} (expected once): {bug.snippet!r}")
    if bug.snippet == bug.replacement:
        raise PlantError(f"{bug.name}: the replacement equals the snippet")
    return original.replace(bug.snippet, bug.replacement)


def _run_pytest(command: list[str], env: dict[str, str], timeout_s: float) -> tuple[int | None, str]:
    """(exit status or None on a timeout, the output's tail) of pytest in its own process group,
    which is killed whole (the workers a test started included) on a timeout or an interrupt."""
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout_s)
        return process.returncode, output[-600:]
    except subprocess.TimeoutExpired:
        return None, ""
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()


def run_selection(bug: Bug, timeout_s: float, order: tuple[str, ...] = ()) -> Verdict:
    """Plant ``bug``, run its tests (in the order ``order``'s options of :mod:`support.run_order` ask),
    restore the file, and judge."""
    target = ROOT / bug.path
    if not target.is_file():
        raise PlantError(f"{bug.name}: no file {bug.path}")
    original = target.read_bytes()
    buggy = planted_text(bug, original.decode("utf-8")).encode("utf-8")
    with tempfile.TemporaryDirectory(prefix="collviz-planted-") as tmp:
        report = Path(tmp) / "failures.jsonl"
        env = {**os.environ, REPORT_ENV: str(report), "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH")]))}
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "support.planted_bugs",
                   "--no-header", *order, *bug.tests]
        started = time.monotonic()
        try:
            target.write_bytes(buggy)
            returncode, tail = _run_pytest(command, env, timeout_s)
        finally:
            target.write_bytes(original)
        seconds = time.monotonic() - started
        failures = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    if returncode is None:
        return Verdict(bug, "crashed", f"timed out after {timeout_s:g} s", seconds)
    by_value = [f for f in failures if f["when"] == "call" and f["assertion"]]
    if by_value:
        return Verdict(bug, "killed", f"{by_value[0]['test']}: {by_value[0]['message']}", seconds)
    if returncode == 0:
        return Verdict(bug, "survived", "every selected test passed", seconds)
    if returncode == 5:
        return Verdict(bug, "crashed", "the selection collected no tests", seconds)
    crash = failures[0] if failures else None
    why = f"{crash['test']} ({crash['when']}): {crash['type']}: {crash['message']}" if crash else f"pytest exit {returncode}: {tail.strip()[-200:]}"
    return Verdict(bug, "crashed", why, seconds)


OUTCOME_LABELS = {"killed": "killed-by-value", "crashed": "killed-by-crash", "survived": "survived"}
"""How each outcome is reported."""


def score_text(verdicts: list[Verdict]) -> str:
    """The closing line: how many bugs were killed by a value, killed by a crash, and survived."""
    counts = {outcome: sum(v.outcome == outcome for v in verdicts) for outcome in OUTCOME_LABELS}
    return (f"score: {counts['killed']}/{len(verdicts)} killed-by-value, {counts['crashed']} killed-by-crash, "
            f"{counts['survived']} survived, in {sum(v.seconds for v in verdicts):.0f} s")


def write_record(verdicts: list[Verdict], path: Path = RECORD) -> None:
    """Write each verdict, with its bug's fingerprint, to ``path`` (by name, sorted)."""
    record = {v.bug.name: {"fingerprint": v.bug.fingerprint, "outcome": v.outcome} for v in verdicts}
    path.write_text(json.dumps(dict(sorted(record.items())), indent=1) + "\n", encoding="utf-8")


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    """Plant each chosen bug in turn; print progress, the table and the score; 0 only if all were killed by a value."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="list the bugs and their selections, run nothing")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="plant only these bugs")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one selection may run (default 300)")
    parser.add_argument("--reverse-order", action="store_true", help="run each selection's tests last first")
    parser.add_argument("--shuffle-seed", type=int, metavar="N", help="run each selection's tests shuffled with seed N")
    args = parser.parse_args(argv)
    if not args.timeout > 0:
        parser.error(f"--timeout {args.timeout:g}: must be a positive number of seconds")
    names = [bug.name for bug in BUGS]
    if len(set(names)) != len(names):
        print("planted_bugs: two bugs share a name", file=sys.stderr)
        return 2
    unknown = sorted(set(args.only or ()) - set(names))
    if unknown:
        print(f"planted_bugs: unknown bug {', '.join(unknown)}; known: {', '.join(names)}", file=sys.stderr)
        return 2
    chosen = [bug for bug in BUGS if not args.only or bug.name in args.only]
    order = (("--reverse-order",) if args.reverse_order else ()) + (
        ("--shuffle-seed", str(args.shuffle_seed)) if args.shuffle_seed is not None else ())
    if args.list:
        for bug in chosen:
            print(f"{bug.name:28} {bug.path}\n{'':28} {bug.what}\n{'':28} pytest {' '.join(bug.tests)}")
        return 0
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, _raise_interrupt)  # also where the shell started us ignoring it
    verdicts = []
    for index, bug in enumerate(chosen, 1):
        print(f"[{index}/{len(chosen)}] {bug.name}: {bug.what} …", end=" ", flush=True)
        try:
            verdict = run_selection(bug, args.timeout, order)
        except PlantError as error:
            print(f"\nplanted_bugs: {error}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(f"\nplanted_bugs: interrupted; {bug.path} restored", file=sys.stderr)
            return 130
        print(f"{verdict.outcome} ({verdict.seconds:.0f} s)", flush=True)
        verdicts.append(verdict)
    width = max(len(v.bug.name) for v in verdicts) if verdicts else 4
    print(f"\n{'bug':{width}}  {'outcome':15}  by")
    for v in verdicts:
        print(f"{v.bug.name:{width}}  {OUTCOME_LABELS[v.outcome]:15}  {v.by}")
    print("\n" + score_text(verdicts))
    if not args.only:
        write_record(verdicts)
        print(f"verdicts written to {RECORD.relative_to(ROOT)}")
    return 0 if all(v.outcome == "killed" for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
