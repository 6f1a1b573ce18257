"""Capture the viewer in a real terminal (tmux) at the sizes the product must work at.

    python docs/captures/capture.py [NAME…]     # all of them: a few minutes on 2 cores

Each capture starts ``collviz …`` in a detached tmux session of the given size, waits until the
header shows the run has ended (or the replay has opened), presses the keys listed, and writes
``capture-pane -p`` (text only: cells coloured by rank show as blank) to ``NAME.txt`` here. Needs
tmux and an installed ``collviz``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent.parent / "tests" / "fixtures"


@dataclass(frozen=True)
class Capture:
    """One frame to keep: the command, the terminal's size, what the screen must show before the
    keys are pressed, and the keys."""

    name: str
    command: str
    size: tuple[int, int]
    ready: tuple[str, ...] = ("finished", "failed", "replay")
    keys: tuple[str, ...] = ()


def _live(scenario: str, ranks: int, size: tuple[int, int], *extra: str) -> Capture:
    width, height = size
    return Capture(f"{scenario}{'-' + str(ranks) + '-ranks' if ranks != 4 else ''}-{width}x{height}",
                   f"collviz {scenario} --gpus {ranks} --backend gloo {' '.join(extra)}".strip(), size)


CAPTURES = [
    *(_live("fsdp", 4, size) for size in ((100, 30), (160, 50), (220, 60))),
    _live("all-gather", 16, (160, 50)),
    *(_live("all-gather", 64, size) for size in ((100, 30), (160, 50), (220, 60))),
    _live("hang", 4, (100, 30), "--timeout 3"),
    _live("moe", 4, (220, 60)),
    Capture("pp-piece-6-100x30", f"collviz replay {FIXTURES / 'pp.cvz'}", (100, 30),
            keys=("g", "1", "Enter", *["Right"] * 6)),
]
"""What docs/captures holds."""


def _screen(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout


def capture(entry: Capture, timeout: float = 300.0) -> str:
    """Run ``entry`` in tmux and return the screen once ready and its keys pressed."""
    session = f"capture-{entry.name}"
    width, height = entry.size
    subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", str(width), "-y", str(height),
                    f"{entry.command}; sleep 600"], check=True)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            header = "\n".join(_screen(session).splitlines()[:2])
            if any(word in header for word in entry.ready):
                break
            time.sleep(1.0)
        else:
            raise SystemExit(f"{entry.name}: not ready after {timeout:.0f} s")
        time.sleep(1.0)
        for key in entry.keys:
            subprocess.run(["tmux", "send-keys", "-t", session, key], check=True)
            time.sleep(0.5)
        time.sleep(1.0)
        return _screen(session)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def main(names: list[str]) -> int:
    """Capture the entries named (all when none), each to NAME.txt beside this script."""
    if shutil.which("tmux") is None or shutil.which("collviz") is None:
        print("capture.py: needs tmux and an installed collviz", file=sys.stderr)
        return 2
    for entry in CAPTURES:
        if names and entry.name not in names:
            continue
        (HERE / f"{entry.name}.txt").write_text(capture(entry))
        print(f"wrote {entry.name}.txt")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
