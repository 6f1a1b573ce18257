"""Outcomes and the markdown report, written into the output folder part by part.

The one rule of what a check may be called: **passed** only when it held *and* NCCL on CUDA did
the work (the run said backend nccl on a cuda device). A check that held on gloo or without a GPU
reads "ran on gloo" (or the check's own word for it, e.g. "skipped: no GPU"), never "passed";
without CUDA the report's first line says NOT A GPU CHECK.

The report is rewritten and flushed to disk when each check starts (it reads "running" until it
ends, so a command stopped in the middle leaves a report that says where) and when it ends, with
each failure's output tail; each check's whole output is in its own log beside it.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Finding", "Part", "Report", "LOG_LIMIT_BYTES", "NOT_A_GPU_CHECK", "trim_log"]

NOT_A_GPU_CHECK = "NOT A GPU CHECK"
"""How the report's first line begins wherever the checks did not run on NCCL on CUDA (no CUDA
device, or ``--quick``)."""

LOG_LIMIT_BYTES = 8 * 2**20
"""A log longer than this keeps only its end (the GPU machine returns files of 16 MiB at most)."""


@dataclass
class Finding:
    """What a check found: whether it held, whether NCCL on CUDA did the work, and its report lines."""

    held: bool
    on_nccl: bool
    lines: list[str] = field(default_factory=list)
    unproven: str = "ran on gloo"
    """The outcome of a check that held without NCCL on CUDA (never "passed")."""


@dataclass
class Part:
    """One check's place in the report: its title, budget, log, and once ended its outcome and lines."""

    title: str
    budget_s: float
    log: str
    outcome: str = "not started"
    seconds: float | None = None
    lines: list[str] = field(default_factory=list)

    def settle(self, finding: Finding, seconds: float) -> None:
        """Record ``finding``: passed only if it held with NCCL on CUDA."""
        self.outcome = ("passed" if finding.on_nccl else finding.unproven) if finding.held else "failed"
        self.seconds, self.lines = seconds, finding.lines

    def end(self, outcome: str, seconds: float, lines: list[str]) -> None:
        """Record an outcome that is not a finding (timed out, missing a package, not run)."""
        self.outcome, self.seconds, self.lines = outcome, seconds, lines

    @property
    def bad(self) -> bool:
        """Whether the part failed, timed out or could not run for want of a package."""
        return self.outcome == "failed" or self.outcome.startswith(("timed out", "missing"))


class Report:
    """The markdown report at ``path``, rewritten whole at every change; ``not_gpu``: why the checks
    did not run on NCCL on CUDA (None where they did)."""

    def __init__(self, path: Path, title: str, parts: list[Part], not_gpu: str | None):
        self.path, self.title, self.parts, self.not_gpu = path, title, parts, not_gpu
        self.started = datetime.datetime.now(datetime.timezone.utc)
        self.machine: list[str] = []

    def starting(self, part: Part) -> None:
        """Mark ``part`` as running, and write."""
        part.outcome = (f"running (started {datetime.datetime.now(datetime.timezone.utc):%H:%M:%S} UTC; "
                        "if this remains, the command was stopped here)")
        self.write()

    def text(self) -> str:
        """The report as it stands."""
        lines = [] if self.not_gpu is None else [f"{NOT_A_GPU_CHECK}: {self.not_gpu}, so no check ran on NCCL "
                                                 "and none can have passed.", ""]
        lines += [f"# {self.title}, {self.started:%Y-%m-%d %H:%M} UTC", "", *self.machine, "",
                  "| # | check | outcome | seconds (budget) |", "|---:|---|---|---:|"]
        for number, part in enumerate(self.parts, 1):
            took = "—" if part.seconds is None else f"{part.seconds:.0f}"
            lines.append(f"| {number} | {part.title} | {part.outcome} | {took} ({part.budget_s:.0f}) |")
        for number, part in enumerate(self.parts, 1):
            lines += ["", f"## {number}. {part.title} — {part.outcome}", "", *part.lines, "",
                      f"Log: `{part.log}`."]
        return "\n".join(lines) + "\n"

    def write(self) -> None:
        """Write the report and flush it to disk."""
        with self.path.open("w") as out:
            out.write(self.text())
            out.flush()
            os.fsync(out.fileno())


def trim_log(path: Path) -> None:
    """Keep only the last :data:`LOG_LIMIT_BYTES` of the log at ``path``, saying so in its first line."""
    if path.exists() and path.stat().st_size > LOG_LIMIT_BYTES:
        with path.open("rb") as read:
            read.seek(-LOG_LIMIT_BYTES, os.SEEK_END)
            kept = read.read()
        path.write_bytes(b"[the start of this log was cut: only its last 8 MiB are kept]\n" + kept)
