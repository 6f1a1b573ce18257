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

Usage: ``python tests/planted_bugs.py [--list] [--only NAME ...] [--timeout S]``
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

ROOT = Path(__file__).resolve().parent.parent
"""The worktree this script runs from: the bugs are planted in its files."""

REPORT_ENV = "COLLVIZ_PLANTED_BUG_REPORT"
"""The variable naming the JSON file the pytest plugin half of this module writes failures to."""


@dataclass(frozen=True)
class Bug:
    """One planted bug: ``snippet`` in ``path`` (relative to the worktree) becomes ``replacement``;
    ``tests`` is the pytest selection (node ids or ``-k`` arguments) that should catch it."""

    name: str
    path: str
    snippet: str
    replacement: str
    tests: tuple[str, ...]
    what: str


BUGS: tuple[Bug, ...] = (
    Bug("busbw-factor", "runtime/observation/metrics.py",
        "        return Fraction(2 * (n - 1), n)", "        return Fraction(n - 1, n)",
        ("tests/test_collectives.py::test_bus_factors_follow_nccl_tests",),
        "all_reduce's busbw factor (n−1)/n instead of 2(n−1)/n"),
)


# --- the pytest plugin half: loaded in the subprocess with ``-p planted_bugs`` -----------------

def pytest_exception_interact(node, call, report) -> None:  # noqa: ANN001 - pytest's hook signature
    """Record each failure's test, phase and exception type for the runner."""
    path = os.environ.get(REPORT_ENV)
    if not path or call.excinfo is None:
        return
    record = {"test": node.nodeid, "when": call.when, "type": call.excinfo.type.__name__,
              "assertion": issubclass(call.excinfo.type, AssertionError),
              "message": str(call.excinfo.value).strip().splitlines()[0][:160] if str(call.excinfo.value).strip() else ""}
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


def run_selection(bug: Bug, timeout_s: float) -> Verdict:
    """Plant ``bug``, run its tests, restore the file, and judge."""
    target = ROOT / bug.path
    original = target.read_bytes()
    buggy = planted_text(bug, original.decode("utf-8")).encode("utf-8")
    with tempfile.TemporaryDirectory(prefix="collviz-planted-") as tmp:
        report = Path(tmp) / "failures.jsonl"
        env = {**os.environ, REPORT_ENV: str(report), "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))}
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "planted_bugs",
                   "--no-header", *bug.tests]
        started = time.monotonic()
        try:
            target.write_bytes(buggy)
            result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s,
                                    stdin=subprocess.DEVNULL)
            returncode, tail = result.returncode, result.stdout[-600:]
        except subprocess.TimeoutExpired:
            returncode, tail = None, ""
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
    verdicts = []
    for index, bug in enumerate(chosen, 1):
        print(f"[{index}/{len(chosen)}] {bug.name}: {bug.what} …", end=" ", flush=True)
        try:
            verdict = run_selection(bug, args.timeout)
        except PlantError as error:
            print(f"\nplanted_bugs: {error}", file=sys.stderr)
            return 2
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
