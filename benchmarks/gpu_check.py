"""The GPU check: one command of at most 9 minutes for a short time on a GPU machine, writing its
report into ``$OUT`` (the GPU machine's folder of files that come back; ``--out DIR`` overrides;
without either, a dated folder here) part by part, as each check starts and ends.

Here, with network, once (the wheels the GPU image lacks, pinned; ``wheels/`` is git-ignored)::

    python benchmarks/gpu_check.py --download wheels

There, with no network, from the checkout's root (the device tool carrying ``wheels``)::

    python3 benchmarks/gpu_check.py --wheels wheels            # the check, ≤ 9 minutes
    python3 benchmarks/gpu_check.py --wheels wheels --perf     # optional: the performance rows

``--wheels`` installs the carried wheels and collviz built from this checkout into a new folder
on ``PYTHONPATH`` (``pip install --no-index --no-deps --target``): the image's torch, numpy and
nvidia-ml-py are used, and nothing is installed over them. The checks, most telling first, each
with a time budget (a check over it is stopped, recorded as timed out, and the next one runs):

1. a 2-rank NCCL canary: 2 ranks sharing the GPU as collviz places them, all_reduce, all_gather and
   reduce_scatter against exact sums;
2. ``collviz fsdp --gpus 4``: every all-gather's and reduce-scatter's GPU time and busbw;
3. the GPU tier's highest-value tests at 4 ranks on one GPU (``gpucheck.checks.TIER_TESTS``);
4. ``all-reduce --algo ring`` and ``--algo tree`` on NCCL;
5. ``collviz run`` of a script that hangs (the run fails naming the rank and its line) and of one
   that raises (naming the rank and its error);
6. ``collviz attach`` on an NCCL job under plain torchrun;
7. ``collviz run --observe``: every call timed on the GPU, three steps.

Nothing is called "passed" unless NCCL on CUDA did the work; without a GPU the report's first line
is "NOT A GPU CHECK". A check whose packages are missing says which, rather than failing.
``--quick``: every check tiny, on gloo (2 ranks), a check that the command runs (the test suite
runs it); it is not a GPU check. ``--perf``: the observer's cost at 4 ranks and bench latency at
2 and 4 ranks, in ``perf.md``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from gpucheck import checks, perf, userjobs, wheels
from gpucheck.context import ROOT, Check, Context
from gpucheck.machine import probe
from gpucheck.report import Part, Report, trim_log
from gpucheck.running import Deadline, TimedOut, tail

LIMIT_S = 530
"""The whole command's limit (seconds), from its start, the install included: 9 minutes, less a
margin for the report's last write."""

QUICK_SLACK = 3
"""``--quick`` gives each check this many times its budget: its runs are tiny, but on gloo on a
loaded CI machine, where the budgets (sized from the H200's times) mean nothing."""

LAST_START_S = 10
"""A check is not started with less time than this left."""

COLLVIZ = ("collviz", "zmq", "msgspec", "textual", "rich")
"""What every check that runs collviz imports."""

CHECKS = (
    Check("canary", "2-rank NCCL canary: all_reduce, all_gather, reduce_scatter exact", 30, ("torch", *COLLVIZ),
          checks.canary),
    Check("fsdp", "collviz fsdp: each all-gather's and reduce-scatter's GPU time and busbw", 45, COLLVIZ,
          checks.fsdp_times),
    Check("tier", f"the GPU tier's {len(checks.TIER_TESTS)} highest-value tests, 4 ranks", 280,
          (*COLLVIZ, "pytest", "pytest_timeout", "pytest_asyncio"), checks.tier),
    Check("algo", "all-reduce --algo ring and --algo tree", 40, COLLVIZ, checks.algorithms),
    Check("run", "collviz run: a script that hangs, one that raises", 60, COLLVIZ, userjobs.run_failures),
    Check("attach", "collviz attach on a job under plain torchrun", 40, COLLVIZ, userjobs.attach),
    Check("observe", "collviz run --observe: every call timed, three steps", 30, COLLVIZ, userjobs.observe),
)
"""The check's checks, in the order they run."""

PERF = (
    Check("observer", "observer's cost: collviz all-reduce per call ÷ a bare loop's", 150, ("torch", *COLLVIZ),
          perf.observer_cost),
    Check("latency", "collviz bench all-reduce at 2 and 4 ranks", 150, COLLVIZ, perf.latency),
)
"""``--perf``'s rows."""


def _output_folder(given: Path | None) -> Path:
    """``--out``, else ``$OUT``, else ``gpu-check-<UTC date and time>`` here; created."""
    folder = given or (Path(os.environ["OUT"]) if os.environ.get("OUT") else
                       Path.cwd() / f"gpu-check-{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H%M%S}")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _missing(modules: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` this interpreter cannot import."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def _log_tail(log: Path) -> list[str]:
    """The end of a check's log, fenced."""
    return tail(log.read_text(errors="replace") if log.exists() else "")


def _run_part(check: Check, part: Part, report: Report, context: Context, left_s: float) -> None:
    """Run one check into its part of the report (``left_s``: the command's time left): its outcome,
    its lines, its log trimmed."""
    report.starting(part)
    started = time.monotonic()
    missing = _missing(check.needs)
    if left_s < LAST_START_S:
        part.end("not run: the command's time was spent", 0, [])
    elif missing:
        part.end(f"missing: {', '.join(missing)}", 0, [f"`{sys.executable}` cannot import {', '.join(missing)}: "
                                                       "carry the wheels (`--download`, then `--wheels`)."])
    else:
        try:
            part.settle(check.body(context), time.monotonic() - started)
        except TimedOut as stopped:
            part.end(f"timed out at its {check.budget_s:.0f} s", time.monotonic() - started,
                     [*stopped.lines, f"stopped while in: {stopped}; the log's end:", *_log_tail(context.log)])
        except Exception:  # a check's own error (or a run that ended early): recorded, and the next check runs
            part.end("failed", time.monotonic() - started, ["the check raised:", *tail(traceback.format_exc(), 8),
                                                            "the log's end:", *_log_tail(context.log)])
    trim_log(context.log)
    report.write()
    print(f"{part.title}: {part.outcome}", flush=True)


def run_checks(chosen: tuple[Check, ...], out: Path, name: str, title: str, env: dict[str, str], quick: bool,
               setup: list[str], deadline: Deadline) -> int:
    """Run ``chosen`` into ``out/name`` (and a log per check) by ``deadline``; 1 if any failed, timed
    out or missed a package."""
    machine = probe(env, ROOT)
    not_gpu = "--quick ran every check tiny, on gloo" if quick else None if machine.cuda else "torch saw no CUDA device"
    prefix = "" if name == "report.md" else "perf-"
    parts = [Part(check.title, check.budget_s, f"{prefix}{number}-{check.key}.log")
             for number, check in enumerate(chosen, 1)]
    report = Report(out / name, title, parts, not_gpu)
    report.machine = machine.lines + setup
    report.write()
    for check, part in zip(chosen, parts):
        with tempfile.TemporaryDirectory(prefix=f"gpu-check-{check.key}-") as work:
            context = Context("gloo" if not_gpu else "nccl", quick, Path(work), out / part.log,
                              deadline.sooner(check.budget_s * (QUICK_SLACK if quick else 1)), env)
            _run_part(check, part, report, context, deadline.left())
    print(f"report: {out / name}", flush=True)
    return 1 if any(part.bad for part in parts) else 0


def _keys(given: str) -> list[str]:
    """``--only``'s comma-separated check keys, each one a check's."""
    keys = [key.strip() for key in given.split(",") if key.strip()]
    known = {check.key for check in CHECKS + PERF}
    unknown = [key for key in keys if key not in known]
    if unknown or not keys:
        raise argparse.ArgumentTypeError(f"no check {', '.join(unknown) or 'named'} (keys: {', '.join(sorted(known))})")
    return keys


def _install(folder: Path, env: dict[str, str]) -> list[str]:
    """Install the carried wheels and collviz (``--wheels``); the report's lines about it."""
    if not folder.is_dir():
        return [f"- `--wheels {folder}`: no such folder (run `--download {folder}` with network first)"]
    started = time.monotonic()
    site, result = wheels.install(folder, ROOT)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    if result.returncode:
        return [f"- installing from `{folder}` FAILED (pip exit {result.returncode}):",
                *tail(result.stdout + result.stderr, 15)]
    installed = len(wheels.CARRIED) - len(wheels.BUILD_ONLY)
    return [f"- installed {installed} pinned packages and collviz from `{folder}` into `{site}` "
            f"(no index, no dependencies) in {time.monotonic() - started:.0f} s"]


def main() -> int:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--download", type=Path, metavar="DIR",
                        help="fetch the pinned wheels the GPU image lacks, then stop")
    parser.add_argument("--wheels", type=Path, metavar="DIR", help="install the carried wheels first (no network)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="the report's folder (default: $OUT, else a dated folder here)")
    parser.add_argument("--quick", action="store_true", help="every check tiny, on gloo: a check that the command runs")
    parser.add_argument("--perf", action="store_true", help="the performance rows instead of the checks")
    parser.add_argument("--only", metavar="KEY[,KEY…]", type=_keys,
                        help="run only these checks, in their usual order (to rerun those a first command did not "
                             f"settle; keys: {', '.join(c.key for c in CHECKS + PERF)})")
    args = parser.parse_args()
    if args.download is not None:
        status = wheels.download(args.download)
        count, size = wheels.folder_size(args.download)
        print(f"{args.download}: {count} wheels, {size / 2**20:.1f} MiB", flush=True)
        return status
    deadline = Deadline.after(LIMIT_S)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    setup = _install(args.wheels, env) if args.wheels is not None else []
    out = _output_folder(args.out)
    chosen = tuple(c for c in (PERF if args.perf else CHECKS) if args.only is None or c.key in args.only)
    if not chosen:
        parser.error(f"--only {','.join(args.only)}: none of the {'--perf ' if args.perf else ''}checks")
    if args.perf:
        return run_checks(chosen, out, "perf.md", "collviz GPU performance rows", env, args.quick, setup, deadline)
    return run_checks(chosen, out, "report.md", "collviz GPU check", env, args.quick, setup, deadline)


if __name__ == "__main__":
    sys.exit(main())
