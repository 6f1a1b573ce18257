"""How the viewer takes in a recorded trace: its first frame as soon as the parts before it are
read, the rest filed as the reader hands it over, and what the reader found once it has read
the trace whole (:meth:`~.modes.ReplayMode.start` reads it, in a thread; the messages are
:mod:`.messages`').

:class:`TraceReading` is mixed into :class:`~collviz.app.app.CollvizApp`, as
:class:`~.playback.PlaybackActions` is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .messages import LoadProgress, TraceChecked, TraceFailed, TraceLoaded, TracePartRead
from .mixin_base import AppMixin
from .model import EventLog
from .model.trace_index import file_part
from .modes import ReplayMode, ViewerMode
from .navigator import Navigator
from .viewer_options import ViewerOptions

if TYPE_CHECKING:
    from .screens import ViewerScreen

__all__ = ["TraceReading"]


class TraceReading(AppMixin):
    """The app's handlers of a trace's reader (see the module)."""

    event_log: EventLog
    mode: ViewerMode
    navigator: Navigator
    options: ViewerOptions
    viewer: ViewerScreen
    cursor: int
    playing: bool
    loaded: bool
    status_line: str
    checked: bool
    """Whether the trace shown is read and checked to the end (:class:`TraceChecked`; True without a trace)."""
    trace_problem: str = ""
    """Why the trace shown failed a check made once it was read whole (the header says it)."""

    if TYPE_CHECKING:  # what the app provides

        def render_now(self) -> None: ...

        def request_frame(self) -> None: ...

    def reading_note(self) -> str:
        """The header's note while the trace shown is still being read past its first frame."""
        log = self.event_log
        return f"reading the rest of the trace: {log.filed * 100 // len(log)} %" if log.filed < len(log) else ""

    @property
    def shown_cursor(self) -> int:
        """The cursor the view is built at: :attr:`cursor`, but no further than the log is filed (a
        trace shown before it was read whole: the frame past it waits for its part)."""
        return min(self.cursor, self.event_log.filed)

    def on_load_progress(self, message: LoadProgress) -> None:
        """Show how far loading has come, in the progress line."""
        unit = "bytes" if message.stage == "reading" else "events"
        trace = self.mode.trace if isinstance(self.mode, ReplayMode) else ""
        self.viewer.show_progress(f"{message.stage} {trace} ({message.total:,} {unit})", message.done, message.total)

    def on_trace_loaded(self, message: TraceLoaded) -> None:
        """Show the loaded trace from its first collective (see :meth:`Navigator.open_loaded`)."""
        self.event_log = message.log
        self.loaded = True
        self.status_line = ""
        self.viewer.hide_progress()
        if message.warning:
            self.notify(message.warning, title="trace partly read", severity="warning", timeout=15, markup=False)
        self.navigator.open_loaded(paced=bool(self.options.pace))
        if self.options.pace:
            self.playing = True
        self.render_now()
        self.checked = message.shown is None
        if message.shown is not None:
            self.call_after_refresh(message.shown.set)  # the rest is read once this frame is drawn

    def on_trace_part_read(self, message: TracePartRead) -> None:
        """File the next part of the trace shown; a frame follows where the cursor waited past the
        parts filed, or the header's share read has grown by a tenth."""
        log = message.log
        if log is self.event_log:
            before = log.filed
            file_part(log, message.part)
            if self.cursor > before or log.filed * 10 // len(log) > before * 10 // len(log):
                self.request_frame()
        message.taken.set()

    def on_trace_checked(self, message: TraceChecked) -> None:
        """The trace shown is read whole: say a warning as a loaded trace's, or in the header why
        it failed its checks (the careful reader's log of it follows)."""
        self.trace_problem = message.problem
        self.checked = not message.problem  # else the careful reader's log follows
        if message.warning:
            self.notify(message.warning, title="trace partly read", severity="warning", timeout=15, markup=False)
        self.request_frame()

    def on_trace_failed(self, message: TraceFailed) -> None:
        """Say why the trace could not be read; the app stays open."""
        self.status_line = message.error
        self.notify(message.error, title="cannot read trace", severity="error", timeout=30, markup=False)
        self.render_now()

