"""The whole GPU check in one command, so that a short time on a GPU machine is spent running:
writes a dated markdown report (``gpu-check-YYYY-MM-DD.md`` in the current folder, or ``--out``).

Steps, each recorded in the report as passed, failed (with the output's tail) or skipped (why):

1. the GPU tier, ``pytest -m gpu tests/runtime/test_gpu.py`` (counts, and every failure's name);
2. ``collviz fsdp --gpus 4`` on NCCL: every all-gather and reduce-scatter's clock, GPU time and busbw;
3. ``--memory-viz``: each rank's CUDA memory snapshot of a 2-rank all-gather, and its size;
4. the observer's cost at 4 ranks: collviz's all-reduce time per call ÷ a bare ``torch.distributed``
   NCCL loop's, same protocol (barrier, synchronise, time one call, synchronise), 1 and 16 MiB;
5. shared-GPU latency: ``collviz bench all-reduce`` at 2 and 4 ranks, 4 B to 16 MiB (on a
   machine with fewer GPUs than ranks the ranks share them, over NCCL's socket transport).

**Wheels.** A GPU image may carry torch but not collviz's other dependencies (the H100 image:
torch 2.11, no pyzmq, msgspec or textual) and may have no network. On a machine with network,
in the checkout::

    python benchmarks/gpu_check.py --download wheels --python-version 3.12

fetches them (``pip download``, binary wheels for manylinux x86_64 and that Python; torch is
never fetched) into ``wheels/``, which travels with the checkout. On the GPU machine::

    python benchmarks/gpu_check.py --wheels wheels

installs them from the folder (``pip install --no-index --find-links``) and collviz itself with
``--no-deps`` (the image's torch stays), then runs the steps. Without ``--wheels`` it runs in the
current environment. ``--quick``: every step, tiny, on whatever backend this machine has (gloo
without a GPU), with the report in a temporary folder: a check that the command runs (the test
suite runs it); its figures mean nothing.

**In parts.** The whole check takes about a quarter of an hour (the tier records some 80 CLI
runs). Where one command may run 10 minutes at most, run it in parts, each writing its own
report (named after its steps)::

    python benchmarks/gpu_check.py --only tier --tier-k "every_collective or average"
    python benchmarks/gpu_check.py --only tier --tier-k "every_training"
    python benchmarks/gpu_check.py --only tier --tier-k "not every_collective and not average and not every_training"
    python benchmarks/gpu_check.py --only fsdp,memory-viz,observer,latency
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("tier", "fsdp", "memory-viz", "observer", "latency")
"""The steps, in the order they run (``--only`` picks some)."""

TEST_EXTRAS = ("pytest", "pytest-timeout", "pytest-asyncio")
"""The test packages the GPU tier needs beside collviz's own dependencies."""


@dataclass
class Step:
    """One step of the check: its title, outcome (``passed``, ``failed``, ``skipped``) and lines."""

    title: str
    outcome: str = "passed"
    lines: list[str] = field(default_factory=list)


def _cli(*args: str, timeout: float = 600, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``collviz ARGS`` in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", "collviz.app.cli", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd)


def _tail(result: subprocess.CompletedProcess, lines: int = 15) -> list[str]:
    text = (result.stdout or "") + (result.stderr or "")
    return ["```", *text.strip().splitlines()[-lines:], "```"]


def _name(spec: str) -> str:
    """``pyzmq>=25`` → ``pyzmq``."""
    for mark in "<>=!~ ;[":
        spec = spec.split(mark)[0]
    return spec.strip().lower()


def _requirements() -> list[str]:
    """collviz's dependencies but torch, and the tier's test packages, as pyproject.toml pins them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    tests = [spec for spec in project["optional-dependencies"]["test"] if _name(spec) in TEST_EXTRAS]
    return [spec for spec in project["dependencies"] if _name(spec) != "torch"] + tests


def download(folder: Path, python_version: str) -> int:
    """``pip download`` the wheels the GPU image lacks into ``folder``; pip's exit status."""
    command = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--python-version", python_version,
               "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64", "--dest", str(folder),
               *_requirements()]
    print("$", " ".join(command), flush=True)
    return subprocess.call(command)


def install(folder: Path) -> None:
    """Install the carried wheels, then collviz without its dependencies (the image's torch stays)."""
    names = [_name(spec) for spec in _requirements()]
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(folder), *names],
                   check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-e", str(ROOT)],
                   check=True)


def _machine() -> list[str]:
    """torch, CUDA, NCCL and the GPUs, read in a child process (this one forks ranks: no CUDA here)."""
    probe = ("import json, torch; c = torch.cuda.is_available(); print(json.dumps({'torch': torch.__version__, "
             "'cuda': torch.version.cuda, 'nccl': '.'.join(map(str, torch.cuda.nccl.version())) if c else None, "
             "'gpus': [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if c else []}))")
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    if found.returncode:
        return [f"- machine probe failed: {found.stderr.strip().splitlines()[-1:]}"]
    info = json.loads(found.stdout)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return [f"- collviz commit: {commit.stdout.strip() or 'unknown'}", f"- torch {info['torch']}, CUDA {info['cuda']}, "
            f"NCCL {info['nccl']}", f"- GPUs: {', '.join(info['gpus']) or 'none'}", f"- Python {sys.version.split()[0]}"]


def tier(quick: bool, select: str | None) -> Step:
    """Step 1: the GPU tier (its tests matching ``select``, pytest's ``-k``, when given)."""
    select = "bench" if quick and select is None else select
    step = Step("GPU tier: pytest -m gpu tests/runtime/test_gpu.py" + (f" -k '{select}'" if select else ""))
    with tempfile.TemporaryDirectory() as folder:
        junit = Path(folder) / "tier.xml"
        command = [sys.executable, "-m", "pytest", "-m", "gpu", str(ROOT / "tests" / "runtime" / "test_gpu.py"), "-p",
                   "no:cacheprovider", "-q", f"--junitxml={junit}"] + (["-k", select] if select else [])
        result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, stdin=subprocess.DEVNULL)
        counts, failed = _junit(junit)
    step.lines.append(", ".join(f"{count} {what}" for what, count in counts.items()))
    step.lines += [f"- failed: `{name}`" for name in failed]
    if result.returncode not in (0, 5) or failed:  # 5: nothing collected
        step.outcome = "failed"
        step.lines += _tail(result, 30)
    elif counts.get("passed", 0) == 0:
        step.outcome = "skipped"
    return step


def _junit(path: Path) -> tuple[dict[str, int], list[str]]:
    """(outcome → count, failed tests' names) from pytest's JUnit XML."""
    import xml.etree.ElementTree as ElementTree

    if not path.exists():
        return {"errors": 1}, ["pytest wrote no report"]
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    failed = []
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            counts["failed"] += 1
            failed.append(case.get("name", "?"))
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return counts, failed


def fsdp_gpu_time(backend: str, ranks: int) -> Step:
    """Step 2: fsdp's collectives, each with its clock, time and busbw."""
    from collviz.runtime.observation.metrics import bandwidth
    from collviz.runtime.wire.protocol import Collective, RunStart
    from collviz.runtime.wire.trace import read_trace

    step = Step(f"collviz fsdp --gpus {ranks} --backend {backend}: each collective's own time and busbw")
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "fsdp.cvz"
        result = _cli("fsdp", "--gpus", str(ranks), "--backend", backend, "--headless", "--record", str(trace))
        if result.returncode:
            step.outcome, step.lines = "failed", _tail(result)
            return step
        events = read_trace(trace).events
    start = next(e for e in events if isinstance(e, RunStart))
    step.lines += [f"{start.backend_reason}", "", "| rank 0 call | bytes | clock | time (µs) | busbw (GB/s) |",
                   "|---|---:|---|---:|---:|"]
    ends = [e for e in events if isinstance(e, Collective) and e.edge == "end" and e.op != "barrier"]
    for call in ends:
        if call.rank == 0:
            seconds = (call.duration_ns or 0) / 1e9
            busbw = bandwidth(call.op, len(call.group_ranks), call.algo_bytes, seconds).busbw / 1e9 if seconds else None
            step.lines.append(f"| {call.op} #{call.group_seq} ({call.group}) | {call.algo_bytes} | {call.clock or '—'} | "
                              f"{seconds * 1e6:.1f} | {'—' if busbw is None else f'{busbw:.3f}'} |")
    untimed = [c for c in ends if not c.duration_ns]
    if untimed or (backend == "nccl" and any(c.clock != "gpu" for c in ends)):
        step.outcome = "failed"
        step.lines.append(f"{len(untimed)} of {len(ends)} calls untimed; clocks seen: {sorted({c.clock for c in ends})}")
    return step


def memory_viz(cuda: bool) -> Step:
    """Step 3: --memory-viz writes each rank's snapshot."""
    step = Step("--memory-viz: each rank's CUDA memory snapshot (all-gather, 2 ranks, 1 MiB)")
    if not cuda:
        step.outcome, step.lines = "skipped", ["no GPU: a CUDA memory snapshot needs one"]
        return step
    with tempfile.TemporaryDirectory() as folder:
        result = _cli("all-gather", "--gpus", "2", "--backend", "nccl", "--size", "1MiB", "--headless", "--memory-viz",
                      str(Path(folder) / "mv"))
        written = sorted(Path(folder, "mv").glob("rank*.pickle")) if Path(folder, "mv").exists() else []
        step.lines += [f"- {path.name}: {path.stat().st_size} B" for path in written]
    if result.returncode or len(written) != 2:
        step.outcome = "failed"
        step.lines += _tail(result)
    return step


def _bare_rank(rank: int, world: int, port: int, numel: int, iters: int, out: str) -> None:
    """One rank of the bare loop: collviz's placement (device, NCCL host id), then plain calls."""
    import torch
    import torch.distributed as dist

    from collviz.runtime.backends import choose_backend

    placement = choose_backend("nccl", world).placement(rank)
    os.environ.update(placement.environment)
    device = torch.device("cuda", placement.device_index)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=device, timeout=datetime.timedelta(seconds=120))
    tensor = torch.ones(numel, device=device)
    times = []
    for _ in range(iters + 2):
        dist.barrier()
        torch.cuda.synchronize(device)
        started = time.perf_counter_ns()
        dist.all_reduce(tensor)
        torch.cuda.synchronize(device)
        times.append(time.perf_counter_ns() - started)
    Path(out, f"rank{rank}.json").write_text(json.dumps(times[2:]))
    torch.cuda.synchronize(device)
    os._exit(0)


def _bare_nccl(world: int, numel: int, iters: int) -> float:
    """The slowest rank's median bare NCCL all-reduce time (ns); ranks forked from this process,
    which never touches CUDA."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as out:
        pids = []
        for rank in range(world):
            pid = os.fork()
            if pid == 0:
                try:
                    _bare_rank(rank, world, port, numel, iters, out)
                finally:
                    os._exit(1)
            pids.append(pid)
        if any(os.waitpid(pid, 0)[1] for pid in pids):
            raise RuntimeError("a bare NCCL rank failed")
        return max(statistics.median(json.loads(Path(out, f"rank{r}.json").read_text())) for r in range(world))


def observer_cost(cuda: bool, quick: bool) -> Step:
    """Step 4: collviz's per-call time ÷ the bare loop's, 4 ranks."""
    from collviz.runtime.wire.protocol import Collective
    from collviz.runtime.wire.trace import read_trace

    step = Step("observer's cost at 4 ranks: collviz all-reduce time per call ÷ bare torch.distributed NCCL")
    if not cuda:
        step.outcome, step.lines = "skipped", ["no GPU: the bare side is an NCCL loop"]
        return step
    iters = 5 if quick else 50
    step.lines += ["| size | collviz (µs) | bare (µs) | ratio |", "|---:|---:|---:|---:|"]
    for size in ([2**20] if quick else [2**20, 16 * 2**20]):
        with tempfile.TemporaryDirectory() as folder:
            trace = Path(folder) / "ar.cvz"
            result = _cli("all-reduce", "--gpus", "4", "--backend", "nccl", "--size", str(size), "--iters", str(iters),
                          "--headless", "--record", str(trace))
            if result.returncode:
                step.outcome, step.lines = "failed", _tail(result)
                return step
            per_rank: dict[int, list[int]] = {}
            for event in read_trace(trace).events:
                if isinstance(event, Collective) and event.edge == "end" and event.duration_ns:
                    per_rank.setdefault(event.rank, []).append(event.duration_ns)
        ours = max(statistics.median(times) for times in per_rank.values())
        bare = _bare_nccl(4, size // 4, iters)
        step.lines.append(f"| {size // 2**20} MiB | {ours / 1e3:.1f} | {bare / 1e3:.1f} | {ours / bare:.3f} |")
    return step


def shared_latency(backend: str, quick: bool) -> Step:
    """Step 5: bench all-reduce at 2 and 4 ranks."""
    from collviz.runtime.reports.bench_table import parse_table

    step = Step(f"latency and busbw: collviz bench all-reduce --backend {backend}, 2 and 4 ranks")
    sizes = "4:1K" if quick else "4:16M"
    for ranks in (2, 4):
        result = _cli("bench", "all-reduce", "--gpus", str(ranks), "--backend", backend, "--sizes", sizes,
                      "--iters", "2" if quick else "20", "--warmup", "0" if quick else "5")
        rows = parse_table(result.stdout)
        if result.returncode or not rows:
            step.outcome = "failed"
            step.lines += _tail(result)
            continue
        banner = next((line for line in result.stdout.splitlines() if line.startswith("collviz bench")), "")
        step.lines += [f"{banner}", "", "| size (B) | time (µs) | busbw (GB/s) | NCCL algo/proto |", "|---:|---:|---:|---|"]
        step.lines += [f"| {r.size} | {r.time_us:.1f} | {r.busbw_gbps:.3f} | {r.nccl or '—'} |" for r in rows]
        step.lines.append("")
        if any(r.wrong for r in rows):
            step.outcome = "failed"
    return step


def _gpus() -> int:
    from collviz.runtime.observation.nvml import gpu_count

    return gpu_count()


def report(steps: list[Step], machine: list[str], started: datetime.datetime, quick: bool) -> str:
    """The markdown report."""
    failed = [s for s in steps if s.outcome == "failed"]
    lines = [f"# collviz GPU check — {started:%Y-%m-%d %H:%M} UTC", "",
             "`--quick`: a check that the command runs; its figures mean nothing." if quick else "", "", *machine, "",
             f"**{'FAILED' if failed else 'passed'}**: " + ", ".join(f"{s.outcome} {i}" for i, s in enumerate(steps, 1)),
             ""]
    for number, step in enumerate(steps, 1):
        lines += [f"## {number}. {step.title} — {step.outcome}", "", *step.lines, ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--download", type=Path, metavar="DIR", help="fetch the wheels the GPU image lacks, then stop")
    parser.add_argument("--python-version", default=f"{sys.version_info.major}.{sys.version_info.minor}",
                        help="the GPU machine's Python, for --download (default: this one's)")
    parser.add_argument("--wheels", type=Path, metavar="DIR", help="install the carried wheels first")
    parser.add_argument("--out", type=Path, help="the report (default gpu-check-YYYY-MM-DD.md here)")
    parser.add_argument("--quick", action="store_true", help="every step, tiny: a check that the command runs")
    parser.add_argument("--only", metavar="STEP,…", help=f"run these steps only: {', '.join(STEPS)}")
    parser.add_argument("--tier-k", metavar="EXPR", help="the tier's tests matching this pytest -k expression")
    args = parser.parse_args()
    chosen = list(STEPS) if args.only is None else [name.strip() for name in args.only.split(",")]
    unknown = [name for name in chosen if name not in STEPS]
    if unknown:
        parser.error(f"--only {args.only}: unknown step {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    if args.download is not None:
        return download(args.download, args.python_version)
    if args.wheels is not None:
        install(args.wheels)
    started = datetime.datetime.now(datetime.timezone.utc)
    part = "" if args.only is None else "-" + "-".join(chosen)
    out = args.out or (Path(tempfile.mkdtemp()) if args.quick else Path.cwd()) / f"gpu-check-{started:%Y-%m-%d}{part}.md"
    cuda = _gpus() > 0
    backend = "nccl" if cuda else "gloo"
    ranks = 2 if args.quick else 4
    steps: dict[str, Callable[[], Step]] = {
        "tier": lambda: tier(args.quick, args.tier_k), "fsdp": lambda: fsdp_gpu_time(backend, ranks),
        "memory-viz": lambda: memory_viz(cuda), "observer": lambda: observer_cost(cuda, args.quick),
        "latency": lambda: shared_latency(backend, args.quick)}
    done = []
    for number, name in enumerate(chosen, 1):
        step = steps[name]()
        print(f"{number}. {step.title}: {step.outcome}", flush=True)
        done.append(step)
    out.write_text(report(done, _machine(), started, args.quick))
    print(f"report: {out}")
    return 1 if any(step.outcome == "failed" for step in done) else 0


if __name__ == "__main__":
    sys.exit(main())
