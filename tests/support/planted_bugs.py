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

Usage: ``python tests/support/planted_bugs.py [--list] [--only NAME ...] [--timeout S]``
(this file has no ``test_`` prefix, so pytest never collects it).
"""

from __future__ import annotations

import argparse
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
        "cost.seconds > slowest.seconds)", "cost.seconds < slowest.seconds)",
        ("tests/app/test_cost_values.py",),
        "the cost pane names the fastest rank as the slowest"),
    Bug("cost-call-time-min", "app/model/cost.py",
        "per_iteration[event.iteration] = max(per_iteration.get(event.iteration, 0), duration)",
        "per_iteration[event.iteration] = min(per_iteration.get(event.iteration, duration), duration)",
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
        ("tests/runtime/test_sources.py::test_a_rank_that_skips_a_call_is_named_with_its_last_call",),
        "a Flight Recorder hang blames the ranks that wait instead of the one that never came"),
    Bug("fingerprint-reduce-op", "runtime/observation/fingerprints.py",
        "        parts.append(event.reduce_op)", "        parts.append(event.dtype)",
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


def run_selection(bug: Bug, timeout_s: float) -> Verdict:
    """Plant ``bug``, run its tests, restore the file, and judge."""
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
                   "--no-header", *bug.tests]
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


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    """Plant each chosen bug in turn; print progress, the table and the score; 0 only if all were killed by a value."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="list the bugs and their selections, run nothing")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="plant only these bugs")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one selection may run (default 300)")
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
            verdict = run_selection(bug, args.timeout)
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
        label = "killed-by-value" if v.outcome == "killed" else v.outcome
        print(f"{v.bug.name:{width}}  {label:15}  {v.by}")
    killed = sum(v.outcome == "killed" for v in verdicts)
    print(f"\nscore: {killed}/{len(verdicts)} killed by a value assertion "
          f"({sum(v.outcome == 'crashed' for v in verdicts)} crashed, {sum(v.outcome == 'survived' for v in verdicts)} survived) "
          f"in {sum(v.seconds for v in verdicts):.0f} s")
    return 0 if killed == len(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
