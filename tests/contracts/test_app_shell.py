"""The viewer's app stays a shell: ``app/app.py`` holds the log, the cursor and the screens and
routes messages and keys; what decides (the cursor's moves, the quiz, frames, the actions) lives in
its own module, so the app module stays under 250 lines (it had grown to 572 and 45 methods)."""

from __future__ import annotations

from support.paths import ROOT

MOST_LINES = 249


def test_the_app_module_stays_a_shell():
    lines = len((ROOT / "app" / "app.py").read_text(encoding="utf-8").splitlines())
    assert lines <= MOST_LINES, (f"app/app.py has {lines} lines (at most {MOST_LINES}): move what is not routing to "
                                 "the part that decides it (navigator, quiz_flow, frames, modes, an action mixin)")
