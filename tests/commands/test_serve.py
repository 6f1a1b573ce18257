"""``collviz serve``: what each tab runs, the live-run limit, and a real headless Chromium.

The browser test needs Debian's ``chromium`` and ``chromium-driver`` packages and the selenium
package (``apt-get install chromium chromium-driver && pip install selenium``); without them it
is skipped, saying which is missing (CI installs them and sets ``COLLVIZ_REQUIRE_BROWSER``, so
there it fails instead). It serves a recorded trace, opens the page, presses ``s``
(the viewer writes an SVG of its screen into the server's folder), → (the next step) and ``s``
again, and reads both SVGs: the header is there and the step advanced. It then asks the page which
font draws the viewer's marks (⏸, ●, ▶: drawn, not the box of a missing glyph) and reads Chrome's
log of every request the page made: each went to the server, none to another host.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collviz.app.commands import serve_slot
from collviz.app.commands.serve import main as serve_main
from collviz.app.commands.serve import tab_command
from collviz.runtime.errors import UsageError

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


def test_every_tab_gets_the_viewers_options(tmp_path):
    python, viewer = sys.executable, ["--present", "--quiz", "--pace", "2.5"]
    assert tab_command(str(FIXTURE), lesson=False, live=False, prepared=tmp_path, max_live=4, viewer=viewer) == \
        f"{python} -m collviz replay {FIXTURE} --present --quiz --pace 2.5"
    assert tab_command("fsdp", lesson=False, live=False, prepared=tmp_path, max_live=4, viewer=viewer) == \
        f"{python} -m collviz replay {tmp_path / 'fsdp.cvz'} --present --quiz --pace 2.5"
    assert tab_command("fsdp", lesson=False, live=True, prepared=tmp_path, max_live=3, viewer=viewer) == \
        f"{python} -m collviz serve-slot {tmp_path} 3 fsdp --present --quiz --pace 2.5"
    assert tab_command("collectives", lesson=True, live=False, prepared=tmp_path, max_live=4, viewer=["--present"]) \
        == f"{python} -m collviz lesson collectives --traces {tmp_path} --present"


@pytest.mark.parametrize(("argv", "expected"), [
    (["fsdp", "extra"], "unexpected 'extra': serve one TARGET, or 'lesson NAME'"),
    (["fsdp", "--pace", "0"], "--pace 0: give seconds between steps, more than 0 and at most 3600"),
    (["lesson", "collectives", "--live"], "--live serves a scenario; a trace or a lesson is replayed"),
    (["lesson", "collectives", "--present", "--pace", "2", "--quiz"],
     "--quiz --pace with a lesson: collviz lesson takes --present only; serve the lesson without them"),
])
def test_serve_refuses_in_one_line(argv, expected):
    with pytest.raises(UsageError) as refused:
        serve_main(argv)
    assert str(refused.value) == expected


def test_a_lesson_is_served_with_present(tmp_path, monkeypatch):
    """``serve lesson NAME --present``: no refusal; the lesson is recorded once and every tab
    replays it in the projector layout (``collviz lesson`` takes ``--present``)."""
    prepared, served = [], []

    class Server:
        def __init__(self, command, *, host, port, title):
            served.append((command, title))

        def serve(self):
            pass

    monkeypatch.setattr("collviz.app.commands.serve.prepare",
                        lambda target, *, lesson, live, folder: prepared.append((target, lesson, live)))
    monkeypatch.setattr("collviz.app.commands.serve_page.ClassroomServer", Server)
    assert serve_main(["lesson", "collectives", "--present"]) == 0
    assert prepared == [("collectives", True, False)]
    ((command, title),) = served
    assert command.startswith(f"{sys.executable} -m collviz lesson collectives --traces ")
    assert command.endswith(" --present") and title == "collviz — collectives"


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


def test_a_live_tab_runs_with_the_viewers_options(tmp_path, monkeypatch):
    runs = []
    monkeypatch.setattr(serve_slot, "run_scenario",
                        lambda name, args: runs.append((name, args.step, args.present, args.pace)) or 0)
    assert serve_slot.main([str(tmp_path), "2", "all-reduce", "--present", "--pace", "1.5"]) == 0
    assert runs == [("all-reduce", True, True, 1.5)]


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
    from selenium.webdriver.common.action_chains import ActionChains
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
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})  # every request the page makes
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                browser.get(f"http://127.0.0.1:{port}")
                break
            except Exception:  # noqa: BLE001 — the server is still starting
                time.sleep(0.5)
        WebDriverWait(browser, 30).until(lambda b: b.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea"))
        time.sleep(3)  # the tab's viewer starts and loads the trace
        # the terminal's own textarea takes the keys, focused (Chromium 150 refuses keys sent to the
        # hidden element itself)
        browser.execute_script("document.querySelector('.xterm-helper-textarea').focus()")
        ActionChains(browser).send_keys("s").perform()
        first = _screenshots(tmp_path, 1)[0]
        ActionChains(browser).send_keys(Keys.ARROW_RIGHT).perform()
        time.sleep(1)
        ActionChains(browser).send_keys("s").perform()
        second = _screenshots(tmp_path, 2)[1]
        title, icon = browser.title, browser.execute_script("return document.querySelector('link[rel=icon]').href")
        glyphs = browser.execute_async_script(GLYPHS_DRAWN, list(MARKS))
        requested = [json.loads(entry["message"])["message"] for entry in browser.get_log("performance")]
    finally:
        browser.quit()
        server.terminate()
        server.wait(timeout=20)
    # The viewer opens at the trace's first collective (step 2 of the all-gather's 4); → steps once.
    assert "collviz" in first and "all-gather" in first and "step 2/4" in first and "all_gather" in first
    assert "step 3/4" in second
    assert title == "collviz — all-gather.cvz" and icon == f"http://127.0.0.1:{port}/collviz-static/icon.svg"
    # each mark is drawn by collviz's glyph font (the face covering its code point is loaded), and
    # drawn as itself, not as the box of a missing glyph
    assert glyphs == {mark: {"face": "loaded", "not_a_box": True} for mark in MARKS}
    urls = [m["params"]["request"]["url"] for m in requested if m["method"] == "Network.requestWillBeSent"]
    assert f"http://127.0.0.1:{port}/collviz-static/collviz-glyphs.ttf" in urls
    leaving = [url for url in urls if url.startswith(("http:", "https:", "ws:", "wss:"))  # not chrome:// or data:
               and not url.startswith((f"http://127.0.0.1:{port}/", f"ws://127.0.0.1:{port}/"))]
    assert leaving == []


MARKS = "⏸●▶"
"""The viewer's pause sign and waiting-rank marks, none of them in Roboto Mono."""

GLYPHS_DRAWN = """
const [marks, done] = [arguments[0], arguments[arguments.length - 1]];
(async () => {
  const canvas = document.createElement("canvas");
  canvas.width = 48; canvas.height = 48;
  const pen = canvas.getContext("2d");
  const drawn = (text) => {
    pen.clearRect(0, 0, 48, 48);
    pen.font = '32px "Roboto Mono"';
    pen.fillText(text, 4, 38);
    return pen.getImageData(0, 0, 48, 48).data.join();
  };
  const result = {};
  for (const mark of marks) {
    const faces = await document.fonts.load('32px "Roboto Mono"', mark);
    const covering = faces.filter((face) => face.unicodeRange !== "U+0-10FFFF");
    result[mark] = {face: covering.map((face) => face.status).join() || "none",
                    not_a_box: drawn(mark) !== drawn("\\u{E000}") && drawn(mark) !== drawn("")};
  }
  done(result);
})();
"""


@pytest.mark.parametrize("host, live, warning", [
    ("127.0.0.1", False, None), ("localhost", False, None), ("::1", False, None),
    ("0.0.0.0", False, "collviz: warning: serving on 0.0.0.0: anyone who can reach port 8123 gets a viewer"),
    ("10.1.2.3", True, "collviz: warning: serving on 10.1.2.3: anyone who can reach port 8123 gets a viewer and may "
                       "start live runs"),
])
def test_serving_beyond_this_machine_warns_who_can_reach_it(monkeypatch, capsys, host, live, warning):
    """Only a host other machines can reach is warned of (with --live, that they may start runs)."""
    served: list[str] = []

    class Server:
        """collviz's classroom server, noting where it would serve instead of serving."""

        def __init__(self, command, host, port, title):
            served.append(f"{host}:{port}")

        def serve(self) -> None:
            """Return at once: the test reads what serve printed before serving."""

    monkeypatch.setattr("collviz.app.commands.serve_page.ClassroomServer", Server)
    target = ["all-reduce", "--live"] if live else [str(FIXTURE)]
    assert serve_main([*target, "--host", host, "--port", "8123"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("collviz: warning")]
    assert warnings == ([warning] if warning else []) and served == [f"{host}:8123"]
