"""Reading a user's artifact files safely: bounded sizes, gzip, JSON, and pickles of plain values only.

Every artifact is read whole through :func:`~..wire.files.read_regular_file` (a regular file of at
most :data:`MAX_FILE_BYTES`; gzip is inflated up to the same bound) and sorted by what it holds
(:func:`sniff`), never by its name — except a log larger than that, told by its first MiB
(:func:`read_head`) and then read a line at a time (:func:`stream_lines`) in bounded memory. A pickle (the Flight Recorder dump torch writes on a timeout)
is loaded by an unpickler that refuses every global, so loading it can construct nothing but
dicts, lists, tuples, strings, numbers, booleans and None; whatever else is in it is refused with
one line. Anything unreadable is a :class:`~..errors.UsageError` naming the file.
"""

from __future__ import annotations

import gc
import gzip
import io
import os
import pickle
import stat
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Literal, cast

import msgspec

from ..errors import UsageError
from ..wire.files import open_without_blocking, read_regular_file

__all__ = ["MAX_FILE_BYTES", "MAX_TOTAL_BYTES", "MAX_FILES", "MAX_LINE_CHARS", "Kind", "read_artifact",
           "read_head", "stream_lines", "sniff", "load_json", "load_plain_pickle", "collector_paused"]

MAX_FILE_BYTES = 256 * 1024 * 1024
"""The largest artifact file read (after gzip is inflated): a Flight Recorder dump of 20,000 entries
with stack frames is tens of MiB, a profiler trace of a few training steps a few hundred MiB at most."""

MAX_TOTAL_BYTES = 1024 * 1024 * 1024
"""The most bytes the files of one import hold at once (a Flight Recorder dump is held as its
columns once read, so a job's dumps may be larger together: each is read and dropped in turn)."""

MAX_FILES = 4096
"""The most files one import opens (one per rank)."""

MAX_LINE_CHARS = 64 * 1024
"""The longest line a streamed log keeps (the rest of a longer line is passed over)."""

_HEAD_BYTES = 1024 * 1024
"""How much of a file larger than :data:`MAX_FILE_BYTES` is read to tell whether it is a log to stream."""

Kind = Literal["pickle", "json", "text", "other"]
"""What a file's bytes look like: a pickle, JSON, text, or none of these."""

_CONTAINERS = frozenset((dict, list, tuple))
_LEAVES = frozenset((str, int, float, bool, type(None)))
_PLAIN = _CONTAINERS | _LEAVES
_Container = dict | list | tuple
_GZIP_MAGIC = b"\x1f\x8b"


def read_artifact(path: Path) -> bytes:
    """The bytes of ``path`` (inflated when gzip-compressed), at most :data:`MAX_FILE_BYTES`."""
    try:
        data = read_regular_file(path, MAX_FILE_BYTES, "artifact")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not data.startswith(_GZIP_MAGIC):
        return data
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as inflating:
            inflated = inflating.read(MAX_FILE_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise UsageError(f"{path}: damaged gzip data ({exc})") from None
    if len(inflated) > MAX_FILE_BYTES:
        raise UsageError(f"{path}: inflates to more than {MAX_FILE_BYTES:,} bytes, the most an artifact may have")
    return inflated


def read_head(path: Path) -> bytes:
    """The first MiB of ``path`` (inflated when gzip-compressed): enough to tell a log that is too
    large to read whole from anything else (:func:`sniff`)."""
    try:
        with _opened(path) as handle:
            return handle.read(_HEAD_BYTES)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (EOFError, zlib.error) as exc:
        raise UsageError(f"{path}: damaged gzip data ({exc})") from None


def stream_lines(path: Path) -> Iterator[str]:
    """The lines of the text file ``path`` (gzip-compressed or not), read a buffer at a time, so a
    log of any size is read in bounded memory; undecodable bytes are replaced and a line longer
    than :data:`MAX_LINE_CHARS` is cut there. A UsageError names the file if it cannot be read."""
    try:
        with _opened(path) as handle, io.TextIOWrapper(handle, encoding="utf-8", errors="replace") as text:
            while line := text.readline(MAX_LINE_CHARS):
                if not line.endswith("\n") and len(line) == MAX_LINE_CHARS:
                    while (rest := text.readline(MAX_LINE_CHARS)) and not rest.endswith("\n"):
                        pass
                yield line.rstrip("\r\n")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (EOFError, zlib.error) as exc:
        raise UsageError(f"{path}: damaged gzip data ({exc})") from None


@contextmanager
def _opened(path: Path) -> Iterator[IO[bytes]]:
    """``path``, a regular file, opened for reading; inflated as it is read when gzip-compressed."""
    with open(path, "rb", opener=open_without_blocking) as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise UsageError(f"artifact {path}: not a regular file")
        if handle.read(2) != _GZIP_MAGIC:
            handle.seek(0)
            yield handle
            return
        handle.seek(0)
        with gzip.GzipFile(fileobj=handle) as inflating:
            yield cast(IO[bytes], inflating)


def sniff(data: bytes) -> Kind:
    """What ``data`` looks like, from its first bytes: a pickle (protocol 2 or later), JSON (an
    object or array), text (UTF-8 without NUL bytes), or other."""
    if data[:1] == b"\x80":
        return "pickle"
    head = data[:4096]
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"["):
        return "json"
    if not head or b"\x00" in head:
        return "other"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # a multi-byte character cut at the end of the window is fine
            return "other"
    return "text"


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold Python's cyclic garbage collector while a document's millions of containers are built
    (none of them cyclic): it would otherwise walk them again and again as they are made. Nested
    pauses hold it until the outermost ends (a caller that drops the document before then spares
    the collector walking it at all)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load_json(data: bytes, path: Path) -> object:
    """The JSON value in ``data``, decoded by msgspec with the collector paused: a 35 MB profiler
    trace in 0.50 s where stdlib json takes 0.85 s (medians of 5, 2 shared cores, 2026-11-25); a
    UsageError naming ``path`` and the fault, on one line, if it is not JSON."""
    try:
        with collector_paused():
            return msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise UsageError(f"{path}: damaged JSON ({' '.join(str(exc).split())})") from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise UsageError(f"{path}: not readable JSON ({type(exc).__name__})") from None


class _Refused(Exception):
    """The pickle asked for something other than a plain value."""


class _PlainUnpickler(pickle.Unpickler):
    """An unpickler that refuses every global (so no class, function or reducer can be reached) and
    every persistent id: the opcodes left build only containers, strings, bytes and numbers."""

    def find_class(self, module: str, name: str) -> object:
        raise _Refused(f"it refers to {module}.{name}")

    def persistent_load(self, pid: object) -> object:
        raise _Refused("it refers to a persistent object")


def load_plain_pickle(data: bytes, path: Path) -> object:
    """The value pickled in ``data``, which may hold only dicts, lists, tuples, strings, integers,
    floats, booleans and None; anything else (a class, a function, a set, bytes) is a UsageError."""
    try:
        with collector_paused():
            value = _PlainUnpickler(io.BytesIO(data)).load()
    except _Refused as exc:
        raise UsageError(f"{path}: refused pickle: {exc}; a Flight Recorder dump holds only plain values") from None
    except (EOFError, pickle.UnpicklingError) as exc:
        raise UsageError(f"{path}: damaged or truncated pickle ({exc or 'ran out of input'})") from None
    except (RecursionError, MemoryError):
        raise UsageError(f"{path}: pickle nested too deeply or too large to load") from None
    except Exception as exc:  # noqa: BLE001 - the unpickler surfaces malformed input as many types
        raise UsageError(f"{path}: damaged pickle ({type(exc).__name__}: {exc})") from None
    odd = _first_foreign(value)
    if odd is not None:
        raise UsageError(f"{path}: refused pickle: it holds a {odd}; a Flight Recorder dump holds only plain values")
    return value


def _first_foreign(value: object) -> str | None:
    """The type name of the first value that is not a plain one in ``value`` or the containers it
    holds directly (a dump's fields, its entries, its groups), or None.

    Only these two levels are looked at, in C (``set(map(type, …))``): the unpickler builds nothing
    but containers, strings, bytes, numbers and sets (it refuses every global, so no class, function
    or reducer is ever reached), and every deeper value a reader uses is type-checked where it is
    read (:mod:`.fr_columns`), so a set or bytes there is damaged input, never run. Scanning every
    value instead cost 3.4 ms of a 2,000-entry dump's 4.7 ms (2026-11-25)."""
    if type(value) not in _PLAIN:
        return type(value).__name__
    if type(value) not in _CONTAINERS:
        return None
    children = _items(cast(_Container, value))
    odd = _odd_kind(children)
    if odd is not None:
        return odd
    for child in children:
        if type(child) in _CONTAINERS:
            odd = _odd_kind(_items(cast(_Container, child)))
            if odd is not None:
                return odd
    return None


def _items(container: _Container) -> list[object]:
    return [*container.keys(), *container.values()] if type(container) is dict else list(container)


def _odd_kind(values: list[object]) -> str | None:
    odd = set(map(type, values)) - _PLAIN
    return min(kind.__name__ for kind in odd) if odd else None
