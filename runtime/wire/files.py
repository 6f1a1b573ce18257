"""How collviz writes files: private to the user (0600: traces hold tensor values and host names),
never harming what an output path points at, and no file overwritten unless asked.

The one rule every output follows (trace, its index, exports, screenshots, memory snapshots):
collviz **renames a finished file over a path only when that path is missing or a regular file**
(looked at without following a link). Anything else is **written through**, opened as it is and
never replaced: a character or block device (``/dev/null``, a full device), a FIFO, and a symbolic
link (``/dev/stdout`` is one), whose target, whatever it is, is written through the link, so the
link stays a link and a regular target keeps its inode, owner and links. A device's own errors are
the write's errors: writing to a full device fails with ``no space left on device``, one line.
``-`` is stdout for an output that is one document (an export); :func:`check_new_output` refuses
it elsewhere.

:func:`write_output` writes a whole output by the rule (a renamed one through a temporary file in
the same folder, so a failed write leaves nothing behind); :func:`staged_output` hands a writer
that needs a file name (torch's memory snapshot) a temporary file placed by the rule once written;
:func:`open_private` opens a streamed output (a trace, written as it grows, so never renamed);
:func:`renames_over` is the rule's test; :func:`check_new_output` refuses what must not be written.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from ..errors import UsageError

__all__ = ["PRIVATE_MODE", "STDOUT", "open_private", "write_output", "staged_output", "renames_over",
           "check_new_output", "write_error_text", "read_regular_file", "open_without_blocking"]

PRIVATE_MODE = 0o600
"""Permissions of every trace and export collviz creates."""

STDOUT = "-"
"""The output path that means stdout, where the output is one document."""

_COPY_BYTES = 1 << 20
"""How much of a staged file is copied through at a time."""


def write_error_text(exc: OSError) -> str:
    """``no space left on device`` for ENOSPC: the error's own words, lower-cased, one line."""
    text = exc.strerror or (errno.errorcode.get(exc.errno or 0) or str(exc))
    return text[:1].lower() + text[1:]


def read_regular_file(path: Path, limit: int, what: str) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes (``what`` names it in the
    error). A fifo, a device (/dev/zero) or a folder is refused before anything is read, so
    reading can neither block nor exhaust memory. Raises OSError for a missing file."""
    with open(path, "rb", opener=open_without_blocking) as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{what} {path}: not a regular file")
        if info.st_size > limit:
            raise UsageError(f"{what} {path}: {info.st_size:,} bytes, more than the {limit:,} a {what} may have")
        return handle.read(limit + 1)[:limit]


def open_without_blocking(path: str, flags: int) -> int:
    """An ``opener`` for :func:`open` that returns at once for a FIFO with no writer, so a reader
    can refuse it by its type instead of waiting."""
    return os.open(path, flags | os.O_NONBLOCK)


def renames_over(path: Path) -> bool:
    """Whether collviz may rename a finished file over ``path``: it is missing or a regular file
    (not followed if it is a link). Anything else is written through (see the module)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return True


def _open_through(path: Path) -> int:
    """``path`` opened for writing as it is, following a link: created 0600 if missing, a regular
    file emptied and made 0600 (an overwritten file keeps no wider mode it had), a device or FIFO
    left as it is (a FIFO waits for its reader, as a shell's ``>`` does). Raises OSError."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, PRIVATE_MODE)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.ftruncate(fd, 0)
            os.fchmod(fd, PRIVATE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def open_private(path: Path) -> BinaryIO:
    """Open ``path`` for a streamed output (a trace): written through, never renamed; a regular
    file is created or emptied with mode 0600, a device or FIFO is opened as it is. Raises OSError."""
    return os.fdopen(_open_through(path), "wb")


def _write_all(fd: int, chunks: Iterable[bytes]) -> None:
    """Write every byte of ``chunks`` to ``fd`` (a short write continues). Raises OSError."""
    for chunk in chunks:
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view):]


def _sync(fd: int) -> None:
    """Hand a regular file's bytes to the disk; a device or FIFO has nothing to sync."""
    if stat.S_ISREG(os.fstat(fd).st_mode):
        os.fsync(fd)


def _write_through(path: Path, chunks: Iterable[bytes]) -> None:
    """Open ``path`` as it is (:func:`_open_through`) and write ``chunks`` into it. Raises OSError."""
    fd = _open_through(path)
    try:
        _write_all(fd, chunks)
        _sync(fd)
    finally:
        os.close(fd)


def _write_stdout(chunks: Iterable[bytes]) -> None:
    """Write ``chunks`` to stdout's file descriptor after what Python buffered for it. Raises OSError."""
    sys.stdout.flush()
    _write_all(sys.stdout.fileno(), chunks)


def _failure(option: str, path: Path, exc: OSError) -> UsageError:
    """The one-line error of an output that could not be written."""
    shown = "stdout" if str(path) == STDOUT else str(path)
    return UsageError(f"{option} {shown}: cannot write ({write_error_text(exc)})")


def write_output(path: Path, chunks: Iterable[bytes], option: str) -> None:
    """Write the whole output ``chunks`` to ``path`` by the rule (see the module): ``-`` is stdout;
    a missing path or a regular file gets a 0600 temporary file in its folder renamed over it once
    complete (a failure leaves nothing behind); anything else is written through as it is.

    ``option`` names the command-line option in the one-line UsageError a failure becomes
    (``--perfetto out.json: cannot write (no space left on device)``).
    """
    try:
        if str(path) == STDOUT:
            _write_stdout(chunks)
            return
        if not renames_over(path):
            _write_through(path, chunks)
            return
    except OSError as exc:
        raise _failure(option, path, exc) from None
    with staged_output(path, option) as temporary, open(temporary, "wb") as handle:
        _write_all(handle.fileno(), chunks)


@contextmanager
def staged_output(path: Path, option: str) -> Iterator[Path]:
    """A new empty temporary file, for a writer that needs a file name (torch's memory snapshot) to
    write ``path``'s contents into inside the block; placed at ``path`` by the rule when the block
    ends well: renamed over a missing path or a regular file (the temporary is then in its folder),
    else copied through it (the temporary is then in the system's temporary folder, never beside a
    device). The temporary is gone afterwards in every case; an OSError inside the block or in
    placing the file is a one-line UsageError naming ``option``."""
    renamed = renames_over(path)
    try:
        if renamed:
            fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
        else:
            fd, name = tempfile.mkstemp(prefix="collviz-", suffix=".part")
        os.close(fd)
    except OSError as exc:
        raise _failure(option, path, exc) from None
    temporary = Path(name)
    try:
        yield temporary
        with open(temporary, "rb") as handle:
            if renamed:
                os.fsync(handle.fileno())
                os.replace(temporary, path)
            else:
                _write_through(path, iter(lambda: handle.read(_COPY_BYTES), b""))
    except OSError as exc:
        raise _failure(option, path, exc) from None
    finally:
        temporary.unlink(missing_ok=True)


def check_new_output(path: Path, option: str, *, force: bool = False, reading: Path | None = None,
                     stdout: bool = False) -> None:
    """Refuse, each in one UsageError line, to write ``path`` when: it is ``-`` and the output is
    not one document (``stdout`` False; where it is, ``-`` is stdout and fine); it is the file being
    read (``reading``); its folder does not exist; it is an existing regular file, or a link to one,
    and ``force`` is not set (it would be overwritten); it is a folder; or the system refuses to look
    it up (a name longer than the filesystem allows, a folder that cannot be searched). A device, a
    FIFO or a link to one is fine: it is written through (see the module)."""
    if str(path) == STDOUT:
        if stdout:
            return
        raise UsageError(f"{option} -: this output cannot go to stdout; name a file (./- for a file named -)")
    try:
        if reading is not None and path.exists() and reading.exists() and path.samefile(reading):
            raise UsageError(f"{option} {path}: that is the trace being read; write the output elsewhere")
        folder = path.parent if str(path.parent) else Path(".")
        if not folder.is_dir():
            raise UsageError(f"{option} {path}: folder {folder} does not exist")
        if path.is_file() and not force:
            raise UsageError(f"{option} {path}: the file exists; choose another name or add --force to overwrite it")
        if path.is_dir():
            raise UsageError(f"{option} {path}: is a folder, not a file")
    except OSError as exc:
        longest = max((len(os.fsencode(part)) for part in path.parts), default=0)
        detail = f" ({longest} bytes in one name)" if exc.errno == errno.ENAMETOOLONG else ""
        raise UsageError(f"{option} {path}: cannot write there: {write_error_text(exc)}{detail}") from None
