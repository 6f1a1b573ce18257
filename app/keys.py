"""The viewer's keys: each binding with the words the footer and ``?`` help show for it.

One key may name several actions (space plays a replay, releases a step-through gate, pauses a paced
run; q leaves a lesson's item or quits): :meth:`~.app.CollvizApp.check_action` leaves only the one the
mode (or a lesson) has.
"""

from __future__ import annotations

from textual.binding import Binding, BindingType

__all__ = ["VIEWER_BINDINGS"]

VIEWER_BINDINGS: list[BindingType] = [
    Binding("space", "toggle_play", "play/pause", key_display="space",
            tooltip="replay: play from here at the current speed, or pause"),
    Binding("space", "release_gate", "run a step", key_display="space",
            tooltip="step-through: release every rank into the next phase"),
    Binding("space", "toggle_pacing", "pause/resume", key_display="space",
            tooltip="paced step-through: pause or resume the gates' clock"),
    Binding("left", "step(-1)", "back", key_display="←", tooltip="the step before"),
    Binding("right", "step(1)", "step", key_display="→",
            tooltip="next step; on a pipelined step, one more piece of its schedule"),
    # in ? help, not the footer: a lesson's footer has no room left at 100 columns
    Binding("right_square_bracket", "exchange(1)", "next call", key_display="]", show=False,
            tooltip="the next step that moves data: a collective call, a ring's hop, a pipeline's microbatches"),
    Binding("left_square_bracket", "exchange(-1)", "prev call", key_display="[", show=False,
            tooltip="the previous step that moved data"),
    Binding("home", "home", "start", show=False, tooltip="the start of the run, before step 1"),
    Binding("end", "end", "latest", tooltip="go to the end; in a live run, follow it again"),
    Binding("plus,equals_sign", "speed(1)", "faster", key_display="+", tooltip="replay: play faster", show=False),
    Binding("minus", "speed(-1)", "slower", key_display="-", tooltip="replay: play slower", show=False),
    Binding("g", "seek", "go to call", tooltip="type a call number (#1 first), or s and a step number, then Enter"),
    Binding("l", "toggle_log", "event log", show=False),
    Binding("s", "screenshot", "screenshot", tooltip="write an SVG of this frame and say where", show=False),
    Binding("0", "detail(0)", "rank detail", key_display="0–9",
            tooltip="open that rank's buffers in full (the mouse works too)", show=False),
    *(Binding(str(rank), f"detail({rank})", "", show=False) for rank in range(1, 10)),
    Binding("r", "open_rank", "open rank…", show=False, tooltip="open any rank's detail by its number"),
    Binding("b", "factor", "why this factor", show=False,
            tooltip="why busbw = algbw × factor, worked through with this step's latest collective"),
    Binding("P", "toggle_present", "projector", key_display="P", show=False,
            tooltip="the projector layout: larger cells, high contrast, colour-blind-safe rank colours"),
    Binding("n", "lesson(1)", "next item", show=False, tooltip="lesson: leave this item for the next one (q too)"),
    Binding("p", "lesson(-1)", "previous", tooltip="lesson: go back to the previous item"),
    Binding("Q", "end_lesson", "end lesson", key_display="Q", tooltip="lesson: end the whole lesson here"),
    Binding("z", "toggle_quiz", "quiz", show=False,
            tooltip="replay or step-through: predict each collective's result before it is revealed, with a score"),
    Binding("ctrl+down", "scroll_narration(3)", "narration ↓", show=False, key_display="ctrl+↓",
            tooltip="scroll the narration down (a teacher's notes come first)"),
    Binding("ctrl+up", "scroll_narration(-3)", "narration ↑", show=False, key_display="ctrl+↑",
            tooltip="scroll the narration up"),
    Binding("question_mark", "help", "help", key_display="?"),
    Binding("q", "lesson(1)", "next item", tooltip="lesson: leave this item for the next one (n too)"),
    Binding("q", "quit", "quit", tooltip="quit; a live run's workers are stopped first"),
]
"""Every key of the viewer (the app's ``BINDINGS``)."""
