"""How collviz writes files: private to the user (0600: traces hold tensor values and host names),
exports replaced atomically, and no file overwritten unless asked.

:func:`open_private` creates a trace; :func:`write_atomically` writes a whole export through a
temporary file in the same folder, renamed over the target only once complete (a failed export
leaves nothing behind); :func:`check_new_output` refuses an existing regular file without
``--force`` and an output that is the input being read.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from ..errors import UsageError

__all__ = ["PRIVATE_MODE", "open_private", "write_atomically", "check_new_output", "write_error_text",
           "read_regular_file"]

PRIVATE_MODE = 0o600
"""Permissions of every trace and export collviz creates."""


def write_error_text(exc: OSError) -> str:
    """``no space left on device`` for ENOSPC: the error's own words, lower-cased, one line."""
    text = exc.strerror or (errno.errorcode.get(exc.errno or 0) or str(exc))
    return text[:1].lower() + text[1:]


def read_regular_file(path: Path, limit: int, what: str) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes (``what`` names it in the
    error). A fifo, a device (/dev/zero) or a folder is refused before anything is read, so
    reading can neither block nor exhaust memory. Raises OSError for a missing file."""
    with open(path, "rb", opener=_open_without_blocking) as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{what} {path}: not a regular file")
        if info.st_size > limit:
            raise UsageError(f"{what} {path}: {info.st_size:,} bytes, more than the {limit:,} a {what} may have")
        return handle.read(limit + 1)[:limit]


def _open_without_blocking(path: str, flags: int) -> int:
    """``open`` that returns at once for a fifo with no writer (its type is then refused)."""
    return os.open(path, flags | os.O_NONBLOCK)


def open_private(path: Path) -> BinaryIO:
    """Create (or truncate) ``path`` for writing with mode 0600; devices such as /dev/null are
    opened as they are. Raises OSError."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), PRIVATE_MODE)
    if stat.S_ISREG(os.fstat(fd).st_mode):
        os.fchmod(fd, PRIVATE_MODE)  # an overwritten (--force) file keeps no wider mode it had
    return os.fdopen(fd, "wb")


def write_atomically(path: Path, chunks: list[bytes], option: str) -> None:
    """Write ``chunks`` to ``path`` via a 0600 temporary file renamed over it once complete.

    ``option`` names the command-line option in the one-line UsageError a failure becomes.
    """
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=folder)
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write ({write_error_text(exc)})") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise UsageError(f"{option} {path}: cannot write ({write_error_text(exc)}); nothing was written") from None


def check_new_output(path: Path, option: str, *, force: bool = False, reading: Path | None = None) -> None:
    """Refuse to write ``path`` when it is the file being read (``reading``), when its folder does
    not exist, when it is an existing regular file and ``force`` is not set (devices such as
    /dev/null are fine), or when the system refuses to look it up (a name longer than the
    filesystem allows, a folder that cannot be searched): each one UsageError line."""
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
