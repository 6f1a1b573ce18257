"""``collviz run --nproc 2 SCRIPT.py``: the script's own stdout and stderr reach the terminal as
under ``torchrun --tee``, each line prefixed with its rank, and its own error message is said with
the failure. Real 2-rank gloo runs of one tiny script, each run once for the module.

The expected lines are the ones the script below prints, written out by hand.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import selectors
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from collviz.runtime.sessions.rank_output import KeptLines, line_prefix

from support.cli import run_cli


SCRIPT = textwrap.dedent('''
    import argparse, os, sys, time
    import torch
    import torch.distributed as dist

    parser = argparse.ArgumentParser()
    parser.add_argument("--wait-for", default=None)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    print(f"ready {rank}")
    print(f"note {rank}", file=sys.stderr)
    while args.wait_for and not os.path.exists(args.wait_for):
        time.sleep(0.02)
    dist.all_reduce(torch.ones(2))
    print(f"done {rank}")
    print("tail", end="")
''')

DEADLINE_S = 90


def _rank_lines(text: str, rank: int) -> list[str]:
    """The lines of ``text`` that carry ``rank``'s prefix, without it."""
    prefix = line_prefix(rank)
    return [line.removeprefix(prefix) for line in text.splitlines() if line.startswith(prefix)]


def _live_run(script: Path, flag: Path) -> dict:
    """Run the script headless; read stdout until both ranks said ``ready`` (they then wait for
    ``flag``), note whether the run was still going, then let it finish."""
    process = subprocess.Popen([sys.executable, "-m", "collviz.app.cli", "run", "--nproc", "2", "--headless",
                                str(script), "--wait-for", str(flag)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL)
    assert process.stdout is not None
    early, selector = b"", selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not (b"[rank0]: ready 0\n" in early and b"[rank1]: ready 1\n" in early):
            if time.monotonic() > deadline or not selector.select(deadline - time.monotonic()):
                raise AssertionError(f"no ready lines within {DEADLINE_S} s: {early!r}")
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                break
            early += chunk
        running = process.poll() is None
        flag.write_text("go")
        out, err = process.communicate(timeout=DEADLINE_S)
    finally:
        selector.close()
        if process.poll() is None:
            process.kill()
            process.wait()
    return {"early": early.decode(), "running": running, "code": process.returncode,
            "stdout": early.decode() + out.decode(), "stderr": err.decode()}


def _viewer_run(script: Path) -> dict:
    """Run the script in-process through ``play_plan`` with a stand-in viewer that polls the
    session to its end; what reached stdout before the viewer returned, and after."""
    import collviz.app.app as viewer_app
    from collviz.app.commands.playing import play_plan
    from collviz.runtime.plan import plan_script
    from collviz.runtime.userjob.script import check_script

    seen: dict = {}
    out, err = io.StringIO(), io.StringIO()

    def stand_in(session, options):
        while not session.finished:
            session.poll(0.1)
        seen["during"] = out.getvalue()
        return session.outcome.exit_code

    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        patch.setattr(viewer_app, "run_viewer", stand_in)
        code = play_plan(plan_script(check_script(script), 2), headless=False)
    return {"code": code, "during": seen["during"], "stdout": out.getvalue(), "stderr": err.getvalue()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The script run live (headless), with a bad argument, with ``--json --logs``, and beside a
    (stand-in) viewer."""
    folder = tmp_path_factory.mktemp("script_output")
    script = folder / "talk.py"
    script.write_text(SCRIPT)
    return {
        "live": _live_run(script, folder / "go"),
        "bad": run_cli("run", "--nproc", "2", "--headless", str(script), "--bogus", timeout=DEADLINE_S),
        "json": run_cli("run", "--nproc", "2", "--json", "--logs", str(folder / "logs"), str(script),
                        timeout=DEADLINE_S),
        "logs": folder / "logs",
        "viewer": _viewer_run(script),
    }


def test_each_ranks_lines_reach_the_terminal_prefixed_as_they_are_written(runs):
    live = runs["live"]
    assert live["code"] == 0, live["stderr"]
    assert live["running"], "the ready lines arrived while the script was still waiting"
    assert sorted(line for line in live["early"].splitlines() if line.startswith("[rank")) == [
        "[rank0]: ready 0", "[rank1]: ready 1"]
    for rank in (0, 1):
        assert _rank_lines(live["stdout"], rank) == [f"ready {rank}", f"done {rank}", "tail"]
        assert _rank_lines(live["stderr"], rank) == [f"note {rank}"]


def test_a_scripts_own_error_message_is_said_with_the_failure(runs):
    bad = runs["bad"]
    assert bad.returncode == 1
    for rank in (0, 1):
        assert _rank_lines(bad.stderr, rank) == ["usage: talk.py [-h] [--wait-for WAIT_FOR]",
                                                 "talk.py: error: unrecognized arguments: --bogus"]
    failure = next(line for line in bad.stderr.splitlines() if line.startswith("collviz: rank "))
    # both ranks fail alike; whichever exit the launcher reaps first is the one named
    assert re.match(r"collviz: rank [01] failed before its first phase: talk\.py exited with status 2; its stderr "
                    r"ended: talk\.py: error: unrecognized arguments: --bogus \(worker logs: ", failure), failure
    assert "Traceback" not in bad.stderr


def test_with_json_every_line_goes_to_stderr_and_logs_keeps_the_raw_files(runs):
    result = runs["json"]
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["outcome"]["status"] == "ok"
    for rank in (0, 1):
        # one rank's stdout and stderr are two pipes: merged on stderr, their relative order may vary
        assert sorted(_rank_lines(result.stderr, rank)) == [f"done {rank}", f"note {rank}", f"ready {rank}", "tail"]
        log = (runs["logs"] / f"rank{rank}.log").read_text()
        assert sorted(log.splitlines()) == [f"done {rank}", f"note {rank}", f"ready {rank}", "tail"]
        assert log.endswith("tail"), "the file holds what the rank wrote, as it wrote it"


def test_beside_the_viewer_the_lines_come_after_it_closes(runs):
    viewer = runs["viewer"]
    assert viewer["code"] == 0, viewer["stderr"]
    assert "[rank" not in viewer["during"]
    for rank in (0, 1):
        assert _rank_lines(viewer["stdout"], rank) == [f"ready {rank}", f"done {rank}", "tail"]
        assert _rank_lines(viewer["stderr"], rank) == [f"note {rank}"]


def test_kept_lines_say_how_many_earlier_ones_were_not_kept():
    kept = KeptLines(limit=2)
    for index in range(5):
        kept.line(index % 2, "stdout" if index != 4 else "stderr", f"line {index}")
    out, err = io.StringIO(), io.StringIO()
    kept.replay(out, err)
    assert out.getvalue() == "[rank1]: line 3\n"
    assert err.getvalue().splitlines() == [
        "collviz: 3 earlier lines of the ranks' output are not shown (--logs DIR keeps them all)", "[rank0]: line 4"]
