"""``collviz serve``: what each tab runs, the live-run limit, and a real headless Chromium.

The browser test needs Debian's ``chromium`` and ``chromium-driver`` packages and the selenium
package (``apt-get install chromium chromium-driver && pip install selenium``); without them it
is skipped, saying which is missing (CI installs them and sets ``COLLVIZ_REQUIRE_BROWSER``, so
there it fails instead). It serves a recorded trace, opens the page, presses ``s``
(the viewer writes an SVG of its screen into the server's folder), → (the next step) and ``s``
again, and reads both SVGs: the header is there and the step advanced.
"""

from __future__ import annotations

import html
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collviz.app.commands import serve_slot
from collviz.app.commands.serve import tab_command

from support.paths import FIXTURES
from support.processes import free_port


FIXTURE = FIXTURES / "all-gather.cvz"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def test_each_target_has_its_tab_command(tmp_path):
    python = sys.executable
    assert tab_command(str(FIXTURE), lesson=False, live=False, prepared=tmp_path, max_live=4) == \
        f"{python} -m collviz replay {FIXTURE}"
    assert tab_command("fsdp", lesson=False, live=False, prepared=tmp_path, max_live=4) == \
        f"{python} -m collviz replay {tmp_path / 'fsdp.cvz'}"
    assert tab_command("fsdp", lesson=False, live=True, prepared=tmp_path, max_live=3) == \
        f"{python} -m collviz serve-slot {tmp_path} 3 fsdp"
    assert tab_command("collectives", lesson=True, live=False, prepared=tmp_path, max_live=4) == \
        f"{python} -m collviz lesson collectives --traces {tmp_path}"


def test_a_live_tab_beyond_the_limit_gets_a_notice(tmp_path, monkeypatch):
    notices, runs = [], []
    monkeypatch.setattr("collviz.app.notice.show_notice", lambda message: notices.append(message) or 0)
    monkeypatch.setattr(serve_slot, "run_scenario", lambda name, args: runs.append((name, args.step)) or 0)
    held = serve_slot._take_slot(tmp_path, 1)  # another tab's live run holds the only slot
    assert serve_slot.main([str(tmp_path), "1", "all-reduce"]) == 0
    assert runs == [] and "already has 1 live runs going" in notices[0]
    held.close()
    assert serve_slot.main([str(tmp_path), "1", "all-reduce"]) == 0
    assert runs == [("all-reduce", True)]


def _browser_missing() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER):
        if shutil.which(path) is None:
            return f"{path} is not installed (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium)"
    return None


def _screenshots(folder: Path, count: int, seconds: float = 20) -> list[str]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = sorted(folder.glob("collviz-*.svg"))
        if len(found) >= count:
            return [html.unescape(p.read_text()).replace("\xa0", " ") for p in found]
        time.sleep(0.2)
    raise AssertionError(f"the viewer wrote {len(list(folder.glob('*.svg')))} screenshots, expected {count}")


def _skip_or_fail_without_a_browser() -> None:
    """Skip where no browser is installed, except where ``COLLVIZ_REQUIRE_BROWSER`` is set (CI
    installs one, so there its absence is a failure, not a silent skip)."""
    missing = _browser_missing()
    if missing is not None:
        if os.environ.get("COLLVIZ_REQUIRE_BROWSER"):
            pytest.fail(f"COLLVIZ_REQUIRE_BROWSER is set but {missing}")
        pytest.skip(missing)


def test_a_browser_tab_shows_the_viewer_and_a_key_steps(tmp_path):
    _skip_or_fail_without_a_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "collviz", "serve", str(FIXTURE), "--port", str(port)],
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    options = Options()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1600,1000", f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                browser.get(f"http://127.0.0.1:{port}")
                break
            except Exception:  # noqa: BLE001 — the server is still starting
                time.sleep(0.5)
        keys = WebDriverWait(browser, 30).until(lambda b: b.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea"))
        time.sleep(3)  # the tab's viewer starts and loads the trace
        keys.send_keys("s")
        first = _screenshots(tmp_path, 1)[0]
        keys.send_keys(Keys.ARROW_RIGHT)
        time.sleep(1)
        keys.send_keys("s")
        second = _screenshots(tmp_path, 2)[1]
    finally:
        browser.quit()
        server.terminate()
        server.wait(timeout=20)
    # The viewer opens at the trace's first collective (step 2 of the all-gather's 4); → steps once.
    assert "collviz" in first and "all-gather" in first and "step 2/4" in first and "all_gather" in first
    assert "step 3/4" in second
