"""The viewer on a followed NCCL Inspector folder (``collviz replay --follow``): a step read from
the lines the test wrote is shown with NCCL's own figures, labelled as NCCL's."""

from __future__ import annotations

from collviz.app.app import make_app
from collviz.runtime.sources.nccl_inspector import INSPECTOR_LABEL

from support.app import SIZE, until
from support.inspector_lines import WORLD, follow, written


async def test_the_viewer_shows_a_followed_step(tmp_path):
    folder, _, _ = written(tmp_path)
    session = follow(folder)
    app = make_app(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: 0 in app.event_log.phases)
        await pilot.press("right")
        await pilot.pause()
        narration = " ".join(app.screen.query_one("#narration").render().plain.split())
    session.stop()
    assert f"NCCL Inspector: all_reduce #1 on communicator {WORLD}" in narration
    assert INSPECTOR_LABEL in narration
