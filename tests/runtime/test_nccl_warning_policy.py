"""Which NCCL WARN lines fail a log (:mod:`collviz.runtime.sources.nccl_failures`): every warning,
except a notice NCCL goes on after that calls of its own process follow in the log.

The failing side is a real job: nccl-tests#311 (``tests/fixtures/nccl/collnet/``), whose four
``sharp_plugin.c:382 NCCL WARN SHARP … Datatypes not supported`` notices are the last lines its
ranks printed (the job hung). The going-on side is that same real log with per-call lines added
after it, written to NCCL's ``AllReduce: opCount`` format (these machines have no GPU and no public
log of such a job was found): each of the 8 processes (pid, comm pointer from its own ``comm`` line)
logs two all-reduces, opCount 0 and 1. Expected values are worked out by hand from those lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from collviz.runtime.sources import open_artifacts
from collviz.runtime.wire.protocol import Phase, RunEnd

from support.paths import FIXTURES

HUNG = FIXTURES / "nccl" / "collnet" / "nccl-tests-311-collnet-sharp-hang.log"
PROCESSES = {  # rank: (host:pid:tid of its comm line, comm pointer), from the fixture's own lines
    0: ("gpu34:23654:23684", "0x5aae1d0"), 1: ("gpu34:23655:23685", "0x60005e0"),
    2: ("gpu36:15433:15499", "0x6426550"), 3: ("gpu36:15434:15500", "0x5464220"),
    4: ("gpu40:2899:2929", "0x5289720"), 5: ("gpu40:2900:2930", "0x617db00"),
    6: ("gpu41:63046:63077", "0x55b2020"), 7: ("gpu41:63047:63078", "0x6a02830")}
NOTICE = "NCCL WARN SHARP int8,uint8,bfloat16 Datatypes not supported (sharp_plugin.c:382)"
MEANS = "(SHARP cannot reduce those datatypes: NCCL reduces them without it)"
NOT_A_NOTICE = "NET/IB : Got completion from peer 10.0.0.2<4242> with error 12, opcode 0, len 0, vendor err 129"
"""An IB completion error, worded as nccl#928's real lines are: an error, whatever follows it."""


def _calls() -> list[str]:
    """Two all-reduces (opCount 0 and 1, 1,048,576 floats) on every rank, in NCCL's per-call format."""
    return [f"{agent} [{rank % 2}] NCCL INFO AllReduce: opCount {n} sendbuff 0x7f0000000000 recvbuff 0x7f0000000000 "
            f"count 1048576 datatype 7 op 0 root 0 comm {comm} [nranks=8] stream 0x7f0000001000"
            for n in (0, 1) for rank, (agent, comm) in PROCESSES.items()]


def _went_on(tmp_path: Path, replace: tuple[str, str] = ("", "")) -> Path:
    log = tmp_path / "went-on.log"
    log.write_text(HUNG.read_text().replace(*replace) + "\n".join(_calls()) + "\n")
    return log


def _end(run) -> RunEnd:
    return next(e for e in run.events if isinstance(e, RunEnd))


def test_a_notice_with_no_call_after_it_fails_the_log_saying_so():
    run = open_artifacts([HUNG])
    assert run.exit_status == 1
    assert _end(run).detail == (f"{NOTICE} on rank 2 (gpu36) — a notice NCCL goes on after, but no call follows it "
                                "in the log (and 3 more WARN/ERROR lines, on ranks 0, 4, 6 too)")
    assert not any(w.startswith("job went on") for w in run.warnings)


def test_a_notice_its_process_went_on_after_is_said_and_does_not_fail_the_log(tmp_path):
    """Ranks 2, 4, 6, 0 (pids 15433, 2899, 63046, 23654) each printed the notice, then 2 calls."""
    run = open_artifacts([_went_on(tmp_path)])
    assert run.exit_status == 0
    assert _end(run).status == "ok"
    assert [w for w in run.warnings if w.startswith("job went on")] == [
        f"job went on: {NOTICE} on rank {rank} ({host}): 2 calls logged after it by its process {MEANS}"
        for rank, host in ((2, "gpu36"), (4, "gpu40"), (6, "gpu41"), (0, "gpu34"))]
    [narration] = {e.narration for e in run.events
                   if isinstance(e, Phase) and e.name == "NCCL WARN (4 lines)" and e.narration}
    assert narration.startswith("What NCCL warned of — the job went on after each:\nr2 (gpu36): ")
    assert narration.count(" — job went on") == 4


def test_an_error_fails_the_log_even_with_calls_after_it(tmp_path):
    """The same log with rank 2's notice replaced by an IB completion error: calls follow it, it fails."""
    notice = "SHARP int8,uint8,bfloat16 Datatypes not supported"
    first = HUNG.read_text().index(notice)  # rank 2's line is the first
    log = tmp_path / "error.log"
    text = HUNG.read_text()
    log.write_text(text[:first] + NOT_A_NOTICE + text[first + len(notice):] + "\n".join(_calls()) + "\n")
    run = open_artifacts([log])
    assert run.exit_status == 1
    assert _end(run).detail == f"NCCL WARN {NOT_A_NOTICE} (sharp_plugin.c:382) on rank 2 (gpu36)"
    assert [w.split(" on rank ")[1] for w in run.warnings if w.startswith("job went on")] == [
        f"{rank} ({host}): 2 calls logged after it by its process {MEANS}" for rank, host in ((4, "gpu40"), (6, "gpu41"),
                                                                                       (0, "gpu34"))]


@pytest.mark.parametrize("went_on", [False, True])
def test_headless_replay_exits_by_the_rule(tmp_path, went_on):
    log = _went_on(tmp_path) if went_on else HUNG
    done = subprocess.run([sys.executable, "-m", "collviz", "replay", str(log), "--headless"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == (0 if went_on else 1), done.stderr
    if went_on:
        assert (f"collviz: warning: job went on: {NOTICE} on rank 2 (gpu36): 2 calls logged after it by its "
                f"process {MEANS}") in done.stderr
    else:
        assert f"result: failed — {NOTICE} on rank 2 (gpu36) — a notice NCCL goes on after" in done.stdout
