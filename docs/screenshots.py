"""Write the README's viewer screenshots (docs/screens/*.svg) from real runs and the test fixtures.

    python docs/screenshots.py          # about a minute on 2 cores; starts real gloo workers

Each screenshot is the viewer as a user sees it at 160×50: a live fsdp run that has finished, a
step-through all-gather waiting at a gate, a replay of the fsdp fixture at a reduce-scatter, the
"why this factor" box, 64 ranks (synthetic events), a bench sweep's plot, a quiz question before
and after its reveal, and the projector layout.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the tests' synthetic event builders (tests/support/)

from collviz.app.app import make_app  # noqa: E402
from collviz.app.viewer_options import ViewerOptions  # noqa: E402
from collviz.app.model.log import EventLog  # noqa: E402
from collviz.app.model.quiz import questions  # noqa: E402
from collviz.runtime.wire.trace import read_trace  # noqa: E402
from collviz.runtime.sessions.local import LocalSession  # noqa: E402
from collviz.runtime.plan import plan_run  # noqa: E402
from collviz.runtime.scenario_files.loading import find_scenario  # noqa: E402
from support.synthetic import all_gather_events  # noqa: E402
from support.synthetic_bench import bench_events  # noqa: E402

OUT = ROOT / "docs" / "screens"
SIZE = (160, 50)


def _session(name: str, step: bool = False) -> LocalSession:
    session = LocalSession(plan_run(find_scenario(name), 4, backend="gloo", step=step))
    session.start()
    return session


async def _until(pilot, condition, seconds: float = 120) -> None:
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await pilot.pause(0.05)
    raise TimeoutError("the run did not get there in time")


async def _shoot(app, name: str, steps) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await steps(pilot)
        await pilot.pause(0.3)
        app.save_screenshot(filename=f"{name}.svg", path=str(OUT))
        print(f"wrote {OUT / name}.svg")
        await pilot.press("q")


async def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    live = make_app(session=_session("fsdp"))

    async def finished(pilot) -> None:
        await _until(pilot, lambda: live.event_log.run_end is not None)
        await pilot.press("g", "5", "enter")

    await _shoot(live, "live-fsdp", finished)

    stepping = make_app(session=_session("all-gather", step=True))

    async def at_gate(pilot) -> None:
        await _until(pilot, lambda: stepping.current_view().state.kind == "waiting")  # gate 2: the setup has none
        await pilot.press("space")
        await pilot.pause(0.5)
        await _until(pilot, lambda: stepping.current_view().state.kind == "waiting")

    await _shoot(stepping, "step-all-gather", at_gate)

    replay = make_app(trace=ROOT / "tests" / "fixtures" / "fsdp-tiny.cvz")

    async def reduce_scatter(pilot) -> None:
        await _until(pilot, lambda: replay.loaded)
        await pilot.press("g", "1", "7", "enter")

    await _shoot(replay, "replay-fsdp", reduce_scatter)
    factor = make_app(trace=ROOT / "tests" / "fixtures" / "fsdp-tiny.cvz")

    async def why(pilot) -> None:
        await _until(pilot, lambda: factor.loaded)
        await pilot.press("g", "5", "enter", "b")

    await _shoot(factor, "why-this-factor", why)
    many = make_app(events=all_gather_events(64))

    async def gathered(pilot) -> None:
        await pilot.pause()
        await pilot.press("home", "right", "right")

    await _shoot(many, "ranks-64", gathered)
    bench = make_app(events=bench_events())

    async def swept(pilot) -> None:
        await pilot.pause()
        await pilot.press("end")

    await _shoot(bench, "bench", swept)
    await _quiz()
    projector = make_app(trace=ROOT / "tests" / "fixtures" / "all-gather.cvz", options=ViewerOptions(present=True))

    async def gathered_step(pilot) -> None:
        await _until(pilot, lambda: projector.loaded)
        await pilot.press("g", "2", "enter")

    await _shoot(projector, "projector", gathered_step)
    await _pipeline()


async def _pipeline() -> None:
    """The pp fixture (GPipe, 4 stages) at its pipelined step: the pipeline pane under the panels."""
    app = make_app(trace=ROOT / "tests" / "fixtures" / "pp.cvz")

    async def scheduled(pilot) -> None:
        await _until(pilot, lambda: app.loaded)
        await pilot.press("g", "2", "enter")

    await _shoot(app, "pipeline", scheduled)


async def _quiz() -> None:
    """The all-gather fixture in quiz mode: the question with a prediction typed (one value wrong),
    then the same question graded with the step revealed behind it."""
    trace = ROOT / "tests" / "fixtures" / "all-gather.cvz"
    [question] = questions(EventLog(read_trace(trace).events), rank=0)
    typed = [*" ".join(f"{v:.3g}" for v in question.values[:15]), " ", "9"]
    for name, reveal in (("quiz-before", False), ("quiz-after", True)):
        app = make_app(trace=trace, quiz=True)

        async def asked(pilot, app=app, reveal=reveal) -> None:
            await _until(pilot, lambda: app.loaded)
            await pilot.press("home", "right", "right")
            await pilot.pause(0.3)
            await pilot.press(*typed)
            if reveal:
                await pilot.press("enter")

        await _shoot(app, name, asked)


if __name__ == "__main__":
    asyncio.run(main())
