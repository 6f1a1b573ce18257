"""The checks of a user's own job (:mod:`.programs.user_job`): ``collviz run`` of a script that
hangs and of one that raises, ``collviz attach`` on a job under plain torchrun, and ``collviz run
--observe``.

Each expected line is written from the job script: its functions, the line it stalls on, the
rank that raises. NCCL on CUDA is what every rank printed (``rank <r>: backend nccl on cuda:…``).
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from .context import Context
from .report import Finding
from .running import TimedOut, spawn, stop, tail, wait

__all__ = ["run_failures", "attach", "observe"]

JOB = Path(__file__).with_name("programs") / "user_job.py"
"""The job script (run by path: it imports torch, which this process need not)."""
HANG_TIMEOUT_S = 5
"""``collviz run --timeout``: how long a wait lasts before it is a hang."""


def _line(marker: str) -> int:
    """The job script's line holding ``marker`` (its first line is 1)."""
    return next(n for n, line in enumerate(JOB.read_text().splitlines(), 1) if marker in line)


def _ranks_on_nccl(output: str, ranks: int) -> bool:
    """Whether every rank printed that it joined on NCCL on a CUDA device."""
    said = set(re.findall(r"rank (\d+): backend nccl on cuda:\d+", output))
    return said == {str(rank) for rank in range(ranks)}


def run_failures(context: Context) -> Finding:
    """``collviz run`` of the job hanging (rank 1 stalls) and raising (the last rank): each run
    fails, naming that rank and, for the hang, its line of code."""
    ranks, last = context.ranks, context.ranks - 1
    hang = context.collviz("run", "--nproc", str(ranks), "--headless", "--timeout", str(HANG_TIMEOUT_S), JOB, "hang")
    raised = context.collviz("run", "--nproc", str(ranks), "--headless", JOB, "raise")
    stalled = _line("the hang's stalled line")
    where = f"rank 1 is missing from the call, at {JOB.name}:{stalled} in slow_loader"
    hang_cause = next((line for line in hang.output.splitlines() if line.startswith("collviz: hang: ")), "")
    raise_cause = next((line for line in raised.output.splitlines() if line.startswith("collviz: rank ")), "")
    hang_ok = hang.code == 1 and where in hang_cause
    raise_ok = raised.code == 1 and raise_cause.startswith(f"collviz: rank {last} failed") and \
        f"RuntimeError: rank {last} gives up" in raise_cause
    lines = [f"- hang, --timeout {HANG_TIMEOUT_S} (expected: exit 1, `{where}`): exit {hang.code}, "
             f"`{hang_cause or 'no collviz: hang line'}`",
             f"- raise (expected: exit 1, `collviz: rank {last} failed … RuntimeError: rank {last} gives up`): exit "
             f"{raised.code}, `{raise_cause or 'no collviz: rank line'}`"]
    for name, ran, ok in (("hang", hang, hang_ok), ("raise", raised, raise_ok)):
        if not ok:
            lines += [f"{name}'s output:", *tail(ran.output)]
    return Finding(hang_ok and raise_ok, _ranks_on_nccl(hang.output + raised.output, ranks), lines)


def _wait_for(paths: list[Path], job, context: Context) -> None:
    """Wait until every path exists; :class:`TimedOut` at the deadline, an error if the job ends first."""
    while not all(path.exists() for path in paths):
        if job.poll() is not None:
            raise RuntimeError(f"the job ended (exit {job.returncode}) before {[p.name for p in paths]} appeared")
        if not context.deadline.left():
            raise TimedOut(f"waiting for {[p.name for p in paths]}")
        time.sleep(0.05)


def attach(context: Context) -> Finding:
    """``collviz attach --headless`` on the job under plain torchrun (2 ranks, Flight Recorder on):
    rank 1 named, at its own line, as missing from the call rank 0 waits in; the job unharmed."""
    folder = context.work
    env = {**context.env, "TORCH_FR_BUFFER_SIZE": "2000", "OMP_NUM_THREADS": "1"}
    job = spawn([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", JOB, "attach",
                 folder], context.log, env, cwd=folder)
    try:
        _wait_for([folder / "stalling", folder / "waiting", folder / "rank0.sock", folder / "rank1.sock"], job, context)
        attached = context.collviz("attach", "--headless", folder)
        (folder / "release").touch()
        _wait_for([folder / "done0", folder / "done1"], job, context)
        (folder / "exit").touch()
        job_code = wait(job, context.deadline, "the attached job")
    finally:
        stop(job)
    stalled = _line("the attach's stalled line")
    where = f"rank 1 is missing from the call, at {JOB.name}:{stalled} in slow_data_loader"
    said = attached.output.splitlines()
    held = attached.code == 1 and any(line.strip() == where for line in said) and \
        any(line.endswith("rank 0 waits for rank 1") for line in said) and job_code == 0
    lines = [f"- expected: exit 1, `{where}`, rank 0 waiting for rank 1; the job then ends 0",
             f"- attach exited {attached.code}; the job exited {job_code}", *tail(attached.output, 12)]
    return Finding(held, _ranks_on_nccl(context.log.read_text(), 2), lines)


def observe(context: Context) -> Finding:
    """``collviz run --observe`` of the job's three checked steps: every call of every rank observed
    once with a time of its own (on the GPU with NCCL), three steps per rank."""
    from collviz.runtime.wire.protocol import Collective, Phase, RunEnd
    from collviz.runtime.wire.trace import read_trace

    trace = context.work / "steps.cvz"
    ran = context.collviz("run", "--nproc", str(context.ranks), "--headless", "--observe", "--record", trace, JOB,
                          "steps")
    if ran.code or not trace.exists():
        return Finding(False, False, [f"exit status {ran.code}:", *tail(ran.output)])
    events = read_trace(trace).events
    on_nccl = _ranks_on_nccl(ran.output, context.ranks)
    lines, held = ["| rank | calls | timed | clocks | steps |", "|---:|---:|---:|---|---:|"], True
    for rank in range(context.ranks):
        calls = [e for e in events if isinstance(e, Collective) and e.edge == "end" and e.rank == rank]
        timed = [c for c in calls if c.duration_ns and (c.clock == "gpu" or not on_nccl)]
        steps = {e.index for e in events if isinstance(e, Phase) and e.edge == "begin" and e.rank == rank}
        held = held and len(calls) == 9 and len(timed) == 9 and len(steps) == 3
        lines.append(f"| {rank} | {len(calls)} | {len(timed)} | {sorted({c.clock or '—' for c in calls})} | "
                     f"{len(steps)} |")
    end = next(e for e in events if isinstance(e, RunEnd))
    exact = ran.output.count("values exact on rank") == context.ranks
    lines.append(f"expected per rank: 9 calls (3 steps × all_reduce, all_gather, reduce_scatter), each timed"
                 f"{' on the GPU' if on_nccl else ''}; 3 steps; values exact on every rank: {exact}; run {end.status}")
    return Finding(held and exact and end.status == "ok", on_nccl, lines)
