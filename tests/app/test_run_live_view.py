"""The viewer on ``collviz run SCRIPT.py`` read from Flight Recorder (the default): a real 2-rank
gloo run's calls reach the viewer while its ranks run, read live from their worker servers, one
step per call; the viewer reads the run to its end."""

from __future__ import annotations

import textwrap

from collviz.app.app import make_app
from collviz.runtime.live.pace import Pace
from collviz.runtime.plan import plan_script
from collviz.runtime.sessions.local import LocalSession
from collviz.runtime.userjob.script import check_script
from collviz.runtime.wire.protocol import Collective, ProcessExit

from support.app import SIZE, until
from support.screens import screen_lines

SCRIPT = textwrap.dedent('''
    import os
    import sys
    import time
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    dist.all_reduce(torch.ones(6))
    deadline = time.monotonic() + 300
    while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:  # until the test has seen the call
        time.sleep(0.05)
    dist.broadcast(torch.ones(10), src=0)
''')
"""Two calls, the second made only once the file named by its argument exists: the test makes it
after the viewer showed the first, so the ranks are still running then however slow the machine."""


async def test_the_viewer_shows_a_scripts_calls_as_its_ranks_make_them(tmp_path):
    script = tmp_path / "two_calls.py"
    script.write_text(SCRIPT)
    go = tmp_path / "go"
    session = LocalSession(plan_script(check_script(script, [str(go)]), 2, observe=False), pace=Pace(0.2, 0.2))
    session.start()
    app = make_app(session=session)
    try:
        async with app.run_test(size=SIZE) as pilot:
            def first_call_shown() -> bool:
                return any(isinstance(e, Collective) and e.edge == "end" and e.group_seq == 1 for e in app.event_log.events)

            await until(pilot, first_call_shown, tries=1500)
            assert not any(isinstance(e, ProcessExit) for e in app.event_log.events), "shown while the ranks run"
            go.touch()
            await until(pilot, lambda: app.event_log.run_end is not None, tries=1500)
            await pilot.pause()
            first = screen_lines(app.export_screenshot())
            await pilot.press("end")  # the latest step: the run's last call
            await pilot.pause()
            lines = screen_lines(app.export_screenshot())
            assert app.event_log.run_end[1].status == "ok" and app.exit_code() == 0
            calls = sorted({(e.op, e.group_seq, e.bytes_in) for e in app.event_log.events if isinstance(e, Collective)})
            assert calls == [("all_reduce", 1, 24), ("broadcast", 2, 40)]
            assert sorted(app.event_log.phases) == [0, 1], "one step per call"
            assert any("all_reduce on 0 (default_pg)" in line for line in first), "the first call on screen"
            assert any("broadcast on 0 (default_pg)" in line for line in lines), "the last call on screen"
    finally:
        session.stop()
