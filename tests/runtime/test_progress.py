"""Progress for long work on a terminal: bench sweeps, headless runs, compare, large traces.

Nothing is drawn when stderr is not a terminal (tests/commands/test_bench.py checks a real sweep's stderr).
"""

from __future__ import annotations

import io
from types import SimpleNamespace

import msgspec

from collviz.runtime.sessions.headless import run_bench, run_headless
from collviz.runtime.reports.progress import ProgressLine, bar_text
from collviz.runtime.wire.protocol import Phase, RunStart
from collviz.runtime.wire.trace import PROGRESS_RECORDS, read_trace

from support.synthetic import all_gather_events, write_trace
from support.synthetic_bench import bench_events


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class ReplaySession:
    """A finished session that hands out prepared events (the headless drivers' view of a Session)."""

    def __init__(self, events, phase_count: int, world_size: int) -> None:
        self._events = list(events)
        self.plan = SimpleNamespace(world_size=world_size, program=SimpleNamespace(phase_count=phase_count))
        self.outcome = SimpleNamespace(status="ok", detail="", exit_code=0)
        self.record_path = None
        self.log_dir = None
        self.nccl_lines: list[str] = []  # a gloo run: NCCL printed nothing

    @property
    def finished(self) -> bool:
        return not self._events

    def start(self) -> None:
        pass

    def poll(self, timeout: float) -> list:
        batch, self._events = self._events, []
        return batch


def redraws(text: str) -> list[str]:
    """The successive states of a line redrawn with carriage returns (trailing padding removed)."""
    return [part.rstrip() for part in text.split("\r") if part.strip()]


def test_bar_text_fills_in_proportion():
    assert bar_text(0, 4, width=8) == "[--------]   0%"
    assert bar_text(1, 4, width=8) == "[##------]  25%"
    assert bar_text(4, 4, width=8) == "[########] 100%"
    assert bar_text(3, 0, width=4) == "[----]   0%"


def test_progress_line_is_silent_off_a_terminal():
    stream = io.StringIO()
    line = ProgressLine(stream, "bench", 3)
    for done in range(4):
        line.update(done, "detail")
    line.close()
    assert stream.getvalue() == ""


def test_progress_line_redraws_in_place_and_ends_with_a_newline():
    stream = Terminal()
    line = ProgressLine(stream, "bench", 2)
    line.update(2, "done")
    line.close()
    line.close()
    assert stream.getvalue().startswith("\rcollviz: bench [")
    assert stream.getvalue().endswith("] 100% 2/2 done\n")


def test_bench_sweep_draws_one_bar_that_reaches_every_size():
    events = bench_events(world=4)
    phases = {e.index for e in events if isinstance(e, Phase)}
    err, out = Terminal(), io.StringIO()
    assert run_bench(ReplaySession(events, len(phases), 4), out=out, err=err) == 0
    states = redraws(err.getvalue())
    assert states[-1].endswith("GB/s") and f"{len(phases)}/{len(phases)}" in states[-1]
    assert err.getvalue().count("\n") == 1  # one line, redrawn, not a line per size
    assert out.getvalue().startswith("# collviz bench")  # nccl-tests' comment prefix


def test_headless_run_draws_its_phases():
    events = all_gather_events(world=4)
    count = next(e for e in events if isinstance(e, RunStart)).phase_count
    err = Terminal()
    run_headless(ReplaySession(events, count, 4), out=io.StringIO(), err=err)
    last = redraws(err.getvalue())[-1]
    assert f"] 100% {count}/{count} " in last


def test_large_trace_reports_reading_progress(tmp_path):
    events = all_gather_events(world=4)
    copies = PROGRESS_RECORDS * 2 // len(events) + 1
    renumbered = [msgspec.structs.replace(e, seq=e.seq + copy * len(events)) for copy in range(copies) for e in events]
    path = write_trace(tmp_path / "big.cvz", renumbered)
    calls: list[tuple[int, int]] = []
    contents = read_trace(path, lambda done, total: calls.append((done, total)))
    size = path.stat().st_size
    assert len(contents.events) == len(events) * copies
    assert len(calls) == len(contents.events) // PROGRESS_RECORDS + 1
    assert all(total == size for _, total in calls) and calls[-1][0] == size
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_small_trace_reports_nothing(tmp_path):
    path = write_trace(tmp_path / "small.cvz", all_gather_events(world=4))
    calls: list[tuple[int, int]] = []
    read_trace(path, lambda done, total: calls.append((done, total)))
    assert calls == []


def test_staged_progress_draws_one_line_per_stage():
    from collviz.runtime.reports.progress import StagedProgress

    stream = Terminal()
    progress = StagedProgress(stream)
    for done in range(3):
        progress("reading files", done + 1, 3)
    progress("building steps", 2, 2)
    progress.close()
    lines = stream.getvalue().split("\n")
    assert lines[0].rstrip().endswith(f"collviz: reading files {bar_text(3, 3)} 3/3")
    assert lines[1].strip() == f"collviz: building steps {bar_text(2, 2)} 2/2" and lines[2] == ""
