"""The checks of collviz's own runs, most telling first: the 2-rank canary, fsdp's per-call GPU
time and busbw, the GPU tier's highest-value tests, and ``--algo``. (A user's own job under
``collviz run`` and attach: :mod:`.userjobs`.)

Each returns a :class:`~.report.Finding`: whether it held, and whether NCCL on CUDA did the work,
read from what the run itself recorded (the trace's ``RunStart``, the group's own backend).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from .programs import canary_rank
from .context import ROOT, Context, free_port
from .report import Finding
from .running import TimedOut, run, tail

__all__ = ["canary", "fsdp_times", "tier", "tier_outcomes", "algorithms", "TIER_TESTS"]


def _on_nccl(events: list) -> bool:
    """Whether the recorded run's ranks ran on NCCL on CUDA."""
    from collviz.runtime.wire.protocol import RunStart

    start = next(e for e in events if isinstance(e, RunStart))
    return start.backend == "nccl" and start.device_kind == "cuda"


def _recorded(context: Context, name: str, *args: str) -> tuple[int, str, list]:
    """``collviz ARGS --headless --record WORK/NAME.cvz``: (exit status, output, the trace's events)."""
    from collviz.runtime.wire.trace import read_trace

    trace = context.work / f"{name}.cvz"
    ran = context.collviz(*args, "--headless", "--record", str(trace))
    return ran.code, ran.output, read_trace(trace).events if trace.exists() else []


def canary(context: Context) -> Finding:
    """2 ranks (sharing the GPU where there is one), placed as collviz places them: all_reduce,
    all_gather and reduce_scatter against sums computed here."""
    world, port = 2, free_port()
    codes = context.run_ranks("canary", world, lambda rank: [sys.executable, Path(canary_rank.__file__), str(rank),
                                                             str(world), str(port), context.backend, context.work])
    if any(codes):
        return Finding(False, False, [f"exit statuses {codes}:", *tail(context.log.read_text())])
    given = [canary_rank.inputs(rank, world) for rank in range(world)]
    elements = canary_rank.ELEMENTS
    sums = [sum(given[r]["all_reduce"][i] for r in range(world)) for i in range(elements)]
    gathered = [value for r in range(world) for value in given[r]["all_gather"]]
    lines = ["| rank | backend | device | collviz's environment | all_reduce | all_gather | reduce_scatter |",
             "|---:|---|---|---|---|---|---|"]
    held, on_nccl = True, True
    for rank in range(world):
        got = json.loads((context.work / f"rank{rank}.json").read_text())
        mine = range(rank * elements, (rank + 1) * elements)
        scattered = [sum(given[r]["reduce_scatter"][i] for r in range(world)) for i in mine]
        verdicts = {name: got[name] == expected for name, expected in
                    (("all_reduce", sums), ("all_gather", gathered), ("reduce_scatter", scattered))}
        held = held and all(verdicts.values())
        on_nccl = on_nccl and got["backend"] == "nccl" and got["device"].startswith("cuda")
        environment = " ".join(f"{k}={v}" for k, v in got["environment"].items()) or "none"
        lines.append(f"| {rank} | {got['backend']} | {got['device']} | {environment} | " + " | ".join(
            "exact" if verdicts[name] else f"WRONG {got[name]}" for name in verdicts) + " |")
    return Finding(held, on_nccl, lines)


def fsdp_times(context: Context) -> Finding:
    """``collviz fsdp --gpus N``: every all-gather's and reduce-scatter's own time (on the GPU with
    NCCL) and busbw, rank 0's calls tabled."""
    from collviz.runtime.observation.metrics import bandwidth
    from collviz.runtime.wire.protocol import Check as RunCheck, Collective, RunEnd

    code, output, events = _recorded(context, "fsdp", "fsdp", "--gpus", str(context.ranks), "--backend",
                                     context.backend, "--json")
    if code or not events:
        return Finding(False, False, [f"exit status {code}:", *tail(output)])
    on_nccl = _on_nccl(events)
    calls = [e for e in events if isinstance(e, Collective) and e.edge == "end"
             and e.op in ("all_gather", "reduce_scatter")]
    untimed = [c for c in calls if not c.duration_ns or (on_nccl and c.clock != "gpu")]
    checks = [e for e in events if isinstance(e, RunCheck)]
    end = next(e for e in events if isinstance(e, RunEnd))
    lines = [f"{len(calls)} all-gathers and reduce-scatters over {context.ranks} ranks; clocks "
             f"{sorted({c.clock or '—' for c in calls})}; {len(untimed)} without a time of their own"
             f"{' on the GPU' if on_nccl else ''}; {sum(c.ok for c in checks)} of {len(checks)} checks ok; run "
             f"{end.status}", "", "| rank 0's call | group | bytes | clock | time (µs) | busbw (GB/s) |",
             "|---|---|---:|---|---:|---:|"]
    for call in (c for c in calls if c.rank == 0):
        seconds = (call.duration_ns or 0) / 1e9
        rate = bandwidth(call.op, len(call.group_ranks), call.algo_bytes, seconds) if seconds else None
        busbw = "—" if rate is None else f"{rate.busbw / 1e9:.3f}"
        lines.append(f"| {call.op} #{call.group_seq} | {call.group} | {call.algo_bytes} | {call.clock or '—'} | "
                     f"{seconds * 1e6:.1f} | {busbw} |")
    held = bool(calls) and not untimed and bool(checks) and all(c.ok for c in checks) and end.status == "ok"
    return Finding(held, on_nccl, lines)


TIER_TESTS = (
    "test_every_collective_on_nccl_equals_gloo_with_nccls_own_semantics_and_is_timed[reduce-scatter-4]",
    "test_every_collective_on_nccl_equals_gloo_with_nccls_own_semantics_and_is_timed[reduce-4]",
    "test_an_average_on_nccl_is_the_mean_of_the_ranks_inputs[reduce-scatter]",
    "test_every_training_scenario_on_nccl_matches_gloo[fsdp-4]",
    "test_fsdp_on_nccl_shows_block_0s_all_gather_with_its_time_and_busbw_in_the_cost_pane",
    "test_the_viewer_shows_an_nccl_fsdp_calls_gpu_time_and_busbw",
    "test_a_hang_on_nccl_blames_the_rank_that_never_arrived_not_the_waiters_nccl_aborts",
    "test_a_dead_rank_or_ctrl_c_on_nccl_leaves_no_process_and_a_readable_trace[dead rank]",
    "test_bench_on_nccl_prints_checked_rows_with_ncclls_own_algorithm_and_protocol",
    "test_memory_viz_writes_each_ranks_cuda_snapshot_with_the_gathered_buffer",
    "test_desync_on_nccl_names_the_odd_rank",
)
"""The GPU tier's tests this check runs, in this order (the most telling first; the fsdp ones share
one NCCL run): NCCL's own semantics at 4 ranks on one GPU, AVG, fsdp against gloo with its calls'
GPU time in the cost pane and the viewer, a hang's and a dead rank's blame, bench's NCCL columns,
--memory-viz, desync. The whole tier (48 tests) does not fit one command."""

TIER_FILE = "tests/runtime/test_gpu.py"
PLUGINS = ("-p", "pytest_timeout", "-p", "pytest_asyncio.plugin")
"""The only pytest plugins loaded (the carried ones): the image's own (pytest-cov, xdist, …) are not
autoloaded, so a plugin built for another pytest cannot stop the tier."""

PER_TEST_S = 120
"""pytest-timeout's limit for one tier test here (the tier's own default is 300 s)."""

_RESULT = re.compile(r"^" + re.escape(TIER_FILE) + r"::(.+?) (PASSED|FAILED|ERROR|SKIPPED)\b")


def tier_outcomes(output: str) -> tuple[dict[str, str], list[str]]:
    """Each tier test's outcome as pytest's ``-v`` lines in ``output`` say, and the report's table of them."""
    outcomes: dict[str, str] = {}
    for line in output.splitlines():
        found = _RESULT.match(line)
        if found:
            outcomes.setdefault(found.group(1), found.group(2).lower())
    return outcomes, ["| test | outcome |", "|---|---|"] + [f"| `{name}` | {outcomes.get(name, 'not reached')} |"
                                                           for name in TIER_TESTS]


def tier(context: Context) -> Finding:
    """The tier's :data:`TIER_TESTS` (4 ranks on NCCL), each test's outcome read as pytest prints it
    (the tests that ended are tabled even when the check runs out of time)."""
    per_test = max(10, min(PER_TEST_S, int(context.deadline.left()) - 5))
    command = [sys.executable, "-m", "pytest", *PLUGINS, "-p", "no:cacheprovider", "-v", "--tb=short", "-m", "gpu",
               f"--timeout={per_test}", *[f"{TIER_FILE}::{name}" for name in TIER_TESTS]]
    try:
        ran = run(command, context.log, context.deadline, {**context.env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
                  cwd=ROOT)
    except TimedOut as stopped:
        raise TimedOut(str(stopped), tier_outcomes(context.log.read_text())[1]) from None
    outcomes, lines = tier_outcomes(ran.output)
    ran_all = all(outcomes.get(name) == "passed" for name in TIER_TESTS)
    skipped = bool(outcomes) and all(outcome == "skipped" for outcome in outcomes.values())
    if ran.code not in (0, 5) or not (ran_all or skipped):
        return Finding(False, False, lines + [f"pytest's exit status {ran.code}:", *tail(ran.output, 40)])
    return Finding(True, ran_all, lines, unproven="skipped: no GPU (the tier skips where NVML sees none)")


def algorithms(context: Context) -> Finding:
    """``all-reduce --algo ring`` and ``--algo tree`` of 16 whole numbers a rank (``--size 64``: sums
    exact in float32): hop by hop with real send/recv, each rank's result (its buffer after the last
    hop) against the sum of every rank's recorded input, computed here."""
    from collviz.runtime.wire.protocol import Buffer, Check as RunCheck, RunEnd, Transfer

    lines, held, on_nccl = ["| --algo | hops sent (p2p) | checks | every rank's result = Σ inputs |",
                            "|---|---:|---|---|"], True, True
    for algo in ("ring", "tree"):
        code, output, events = _recorded(context, algo, "all-reduce", "--gpus", str(context.ranks), "--backend",
                                         context.backend, "--algo", algo, "--size", "64")
        if code or not events:
            return Finding(False, False, lines + [f"--algo {algo}: exit status {code}:", *tail(output)])
        before = {b.rank: b.values for b in events if isinstance(b, Buffer) and b.moment == "before"}
        after = {b.rank: b.values for b in events if isinstance(b, Buffer) and b.moment == "after"}  # the last hop's
        sums = [sum(values[i] for values in before.values()) for i in range(len(before[0]))]
        exact = sorted(after) == list(range(context.ranks)) and all(values == sums for values in after.values())
        checks = [e for e in events if isinstance(e, RunCheck)]
        hops = sum(1 for e in events if isinstance(e, Transfer) and e.kind == "p2p")
        ok = exact and hops > 0 and bool(checks) and all(c.ok for c in checks) and \
            next(e for e in events if isinstance(e, RunEnd)).status == "ok"
        held, on_nccl = held and ok, on_nccl and _on_nccl(events)
        lines.append(f"| {algo} | {hops} | {sum(c.ok for c in checks)} of {len(checks)} ok | "
                     f"{'yes' if exact else f'NO: {after} against {sums}'} |")
    return Finding(held, on_nccl, lines)
