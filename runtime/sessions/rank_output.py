"""Each rank's stdout and stderr, as ``torchrun --tee`` gives them: kept in ``rank<r>.log`` and
echoed line by line, prefixed with the rank (``[rank0]: ``).

Before forking rank ``r`` the launcher opens two pipes for it (:meth:`RankOutput.open_pipes`);
the forked child puts their write ends on its fd 1 and 2 (:meth:`RankOutput.become_rank`), and
one thread of the launcher drains every read end (:meth:`RankOutput.start`): each chunk is
appended to the rank's log file as it arrives, and each complete line goes to an
:class:`Echo` (the terminal as lines arrive, or kept for after the viewer). A rank blocks on its
output only while the launcher's thread is writing it: as fast as the disk, or the terminal. A
write that fails (a full disk, a closed terminal) stops that destination, never the draining:
a rank never blocks on a pipe nobody reads.

Within one rank, stdout and stderr are separate pipes: a line of each written at the same
moment may reach the log in either order (torchrun keeps them in two files; collviz keeps one,
as it always has).
"""

from __future__ import annotations

import os
import selectors
import sys
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol, TextIO

__all__ = ["Echo", "KeptLines", "RankOutput", "TerminalEcho", "line_prefix"]

KEPT_LINES = 20_000
"""Lines :class:`KeptLines` holds for after the viewer closes; earlier ones are counted, not kept."""

_CHUNK = 1 << 16

_TRACEBACK_START = "Traceback (most recent call last):"


def line_prefix(rank: int) -> str:
    """What every echoed line of ``rank`` starts with (torchrun's ``--tee`` with its rank prefix)."""
    return f"[rank{rank}]: "


class Echo(Protocol):
    """Where each complete line of a rank's output goes besides its log file."""

    def line(self, rank: int, stream: str, text: str) -> None:
        """One line (without its newline) that ``rank`` wrote on ``stream`` (``stdout``/``stderr``);
        called from the draining thread."""


@dataclass
class TerminalEcho:
    """Each line on the launcher's own stream of the same name, prefixed, as it arrives; with
    ``both_to`` set (``--json``: stdout holds the document) every line goes there instead."""

    out: TextIO
    err: TextIO
    both_to: TextIO | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def line(self, rank: int, stream: str, text: str) -> None:
        """Write ``[rank<r>]: text`` to the stream it came from."""
        target = self.both_to or (self.out if stream == "stdout" else self.err)
        with self._lock:
            target.write(f"{line_prefix(rank)}{text}\n")
            target.flush()


@dataclass
class KeptLines:
    """The last :data:`KEPT_LINES` lines, for the terminal once the viewer has closed."""

    limit: int = KEPT_LINES
    lines: deque[tuple[int, str, str]] = field(default_factory=deque)
    dropped: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def line(self, rank: int, stream: str, text: str) -> None:
        """Keep the line (the oldest kept one goes when full)."""
        with self._lock:
            if len(self.lines) == self.limit:
                self.lines.popleft()
                self.dropped += 1
            self.lines.append((rank, stream, text))

    def replay(self, out: TextIO, err: TextIO) -> None:
        """Write the kept lines, prefixed, each to the stream it came from; first, on ``err``,
        how many earlier lines were not kept."""
        with self._lock:
            kept, dropped = list(self.lines), self.dropped
        if dropped:
            print(f"collviz: {dropped:,} earlier lines of the ranks' output are not shown (--logs DIR keeps them all)",
                  file=err, flush=True)
        for rank, stream, text in kept:
            (out if stream == "stdout" else err).write(f"{line_prefix(rank)}{text}\n")
        out.flush()
        err.flush()


@dataclass
class _Stream:
    """One pipe being drained: its rank, which stream, the line begun but not ended."""

    rank: int
    name: str
    partial: bytes = b""


@dataclass
class _LastWords:
    """A rank's last line on stderr, and whether it ended a Python traceback."""

    text: str = ""
    in_traceback: bool = False
    ends_traceback: bool = False

    def see(self, text: str) -> None:
        """Follow one more stderr line."""
        if text.startswith(_TRACEBACK_START):
            self.in_traceback, self.ends_traceback = True, False
        elif self.in_traceback:
            if text and not text[0].isspace():  # the exception's own line closes the traceback
                self.in_traceback, self.ends_traceback = False, True
        else:
            self.ends_traceback = False
        if text.strip():
            self.text = text.strip()


class RankOutput:
    """The pipes, log files and draining thread of every rank's output (see the module's text).

    The launcher calls :meth:`open_pipes` before each fork, :meth:`become_rank` in the child,
    :meth:`parent_after_fork` in the parent, then :meth:`start`; :meth:`close` once every rank
    has exited.
    """

    def __init__(self, log_dir: str, echo: Echo | None = None) -> None:
        self.log_dir = log_dir
        self.echo = echo
        self._pipes: dict[int, tuple[tuple[int, int], tuple[int, int]]] = {}
        self._logs: dict[int, int] = {}
        self._last_words: dict[int, _LastWords] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def open_pipes(self, rank: int) -> None:
        """The pipes of ``rank`` and its log file (appended to), before it is forked."""
        self._pipes[rank] = (os.pipe(), os.pipe())
        self._logs[rank] = os.open(os.path.join(self.log_dir, f"rank{rank}.log"),
                                   os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        self._last_words[rank] = _LastWords()

    def become_rank(self, rank: int) -> None:
        """In the forked child of ``rank``: its fd 1 and 2 are its pipes (``sys.stdout`` and
        ``sys.stderr`` line-buffered on them); every other end this process inherited is closed."""
        (out_read, out_write), (err_read, err_write) = self._pipes[rank]
        os.dup2(out_write, 1)
        os.dup2(err_write, 2)
        for other, ((a, b), (c, d)) in self._pipes.items():
            for fd in (a, c) if other != rank else (a, b, c, d):
                os.close(fd)
        for fd in self._logs.values():
            os.close(fd)
        sys.stdout = open(1, "w", closefd=False, buffering=1)
        sys.stderr = open(2, "w", closefd=False, buffering=1)

    def parent_after_fork(self, rank: int) -> None:
        """In the launcher, once ``rank`` is forked: close its write ends (the child holds them,
        so that the pipes end when it does)."""
        (_, out_write), (_, err_write) = self._pipes[rank]
        os.close(out_write)
        os.close(err_write)

    def start(self) -> None:
        """Start draining every rank's pipes (once every rank is forked)."""
        selector = selectors.DefaultSelector()
        for rank, ((out_read, _), (err_read, _)) in self._pipes.items():
            selector.register(out_read, selectors.EVENT_READ, _Stream(rank, "stdout"))
            selector.register(err_read, selectors.EVENT_READ, _Stream(rank, "stderr"))
        self._thread = threading.Thread(target=self._drain, args=(selector,), name="collviz-rank-output", daemon=True)
        self._thread.start()

    def close(self, wait_s: float) -> None:
        """Wait up to ``wait_s`` for the pipes to end (a process the script started may still hold
        one: it is not waited for longer), then close everything."""
        if self._thread is not None:
            self._thread.join(wait_s)
            self._stop.set()
            self._thread.join()
            self._thread = None
        for fd in self._logs.values():
            os.close(fd)
        self._logs.clear()

    def last_words(self, rank: int) -> str | None:
        """The last line ``rank`` wrote on stderr, unless it ended a Python traceback (whose error
        the rank reports itself) or there was none."""
        words = self._last_words.get(rank)
        if words is None or not words.text or words.ends_traceback or words.in_traceback:
            return None
        return words.text

    def _drain(self, selector: selectors.BaseSelector) -> None:
        try:
            while selector.get_map() and not self._stop.is_set():
                for key, _ in selector.select(0.1):
                    stream: _Stream = key.data
                    chunk = os.read(key.fd, _CHUNK)
                    if chunk:
                        self._log(stream.rank, chunk)
                        for line in self._lines(stream, chunk):
                            self._say(stream, line)
                        continue
                    selector.unregister(key.fd)
                    os.close(key.fd)
                    if stream.partial:
                        self._say(stream, stream.partial)
        finally:
            for key in list(selector.get_map().values()):
                os.close(key.fd)
            selector.close()

    def _log(self, rank: int, chunk: bytes) -> None:
        """Append ``chunk`` to the rank's log; after a failed write, the rank's log takes no more."""
        fd = self._logs.get(rank)
        if fd is None:
            return
        try:
            os.write(fd, chunk)
        except OSError:
            os.close(self._logs.pop(rank))

    @staticmethod
    def _lines(stream: _Stream, chunk: bytes) -> Iterator[bytes]:
        """The lines ``chunk`` completes; the rest waits in ``stream.partial``."""
        *complete, stream.partial = (stream.partial + chunk).split(b"\n")
        return iter(complete)

    def _say(self, stream: _Stream, line: bytes) -> None:
        text = line.decode(errors="replace").rstrip("\r")
        if stream.name == "stderr":
            self._last_words[stream.rank].see(text)
        if self.echo is not None:
            try:
                self.echo.line(stream.rank, stream.name, text)
            except (OSError, ValueError):  # the terminal went away (a closed pipe): the logs go on
                self.echo = None
