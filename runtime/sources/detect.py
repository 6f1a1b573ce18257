"""The one entry point: files or a folder of a user's artifacts, sorted by what they hold, opened
as a collviz run.

``collviz replay PATH`` calls :func:`open_artifacts` for anything that is not a collviz trace (the
caller checks a trace's magic first). Each file is read whole, bounded (:mod:`.reading`; an NCCL
log too large for that is streamed instead), and
recognised by its content, never its name (nor its first character alone: a log whose launcher
prefixed its lines with ``[1,0]<stdout>:`` looks like JSON until it is read as such): per-rank Flight Recorder dumps (JSON or pickle),
per-rank torch.profiler Chrome traces (``distributedInfo`` names the rank), an
``NCCL_DEBUG=INFO`` log, or NCCL Inspector output (one JSON record a line, a file per process). One kind at a time. A file named on the command line that is none of
these is a one-line :class:`~..errors.UsageError` saying what was expected; in a folder such a
file is skipped with a warning, so a dump folder with a README still opens.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from ..errors import UsageError
from .flight_recorder import RankDump, import_read, is_dump, rank_from_name, read_content
from .fr_columns import DumpColumns
from .inspector_records import is_inspector_log, is_inspector_record
from .nccl_inspector import import_inspector
from .nccl_log import import_nccl_log, is_nccl_log
from .profiler import ProfilerTrace, import_traces, is_profiler_trace
from .reading import (
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_LINE_CHARS,
    MAX_TOTAL_BYTES,
    collector_paused,
    load_json,
    load_plain_pickle,
    read_artifact,
    read_head,
    sniff,
    stream_lines,
)
from .run import ImportedRun, Progress, no_progress

__all__ = ["EXPECTED", "open_artifacts"]

EXPECTED = ("Flight Recorder dumps (JSON or pickle, one per rank), torch.profiler traces (one per rank), "
            "an NCCL_DEBUG=INFO log or NCCL Inspector output")
"""What :func:`open_artifacts` opens, as its errors say it."""

STREAMED_LOG_BYTES = 4 * 1024 * 1024
"""An NCCL log larger than this is read a line at a time, never whole (a log of hundreds of MB held
as bytes and text took three times its size)."""

_REASONS_SHOWN = 5
"""How many refused files' reasons the error of a folder with nothing to open names."""

_KIND_NAMES = {"flight-recorder": "Flight Recorder dumps", "profiler": "profiler traces", "nccl-log": "NCCL logs",
               "nccl-inspector": "NCCL Inspector output"}


@dataclass(frozen=True)
class _Found:
    """One recognised file: its kind and what was decoded from it."""

    path: Path
    kind: str
    document: dict = field(default_factory=dict)
    """A profiler trace's decoded JSON (empty for the other kinds)."""
    columns: DumpColumns | None = None
    """A Flight Recorder dump's calls, read into columns as the file is read (a job's decoded dumps
    would not fit in memory together)."""
    text: str = ""
    """An NCCL log's or NCCL Inspector output's text (empty for the other kinds, and for a log too
    large to hold: streamed)."""
    streamed: bool = False
    """A log larger than :data:`~.reading.MAX_FILE_BYTES`, read a line at a time as it is imported."""

    def held(self, read: int) -> int:
        """The bytes this file holds in memory once recognised, of the ``read`` it had: a Flight
        Recorder dump only its columns (a job's dumps are read one by one, each then dropped)."""
        return read if self.columns is None else self.columns.nbytes

    def lines(self) -> Iterable[str]:
        """A log's lines: from its text, or streamed from its file; either way a line longer than
        :data:`~.reading.MAX_LINE_CHARS` is cut there (a log's one line of 650,000 ranks is no
        more read whole from a small file than from a large one)."""
        if self.streamed:
            return stream_lines(self.path)
        return (line[:MAX_LINE_CHARS] for line in self.text.splitlines())


def _files(paths: Sequence[Path], warnings: list[str]) -> list[tuple[Path, bool]]:
    """Every file to look at, each with whether the user named it (True) or it lay in a folder."""
    files: list[tuple[Path, bool]] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if not p.name.startswith(".") and p.is_file())
            if not inside:
                raise UsageError(f"{path}: an empty folder; expected {EXPECTED}")
            skipped = [p.name for p in path.iterdir() if not p.name.startswith(".") and not p.is_file()]
            if skipped:
                shown = ", ".join(sorted(skipped)[:3]) + ("…" if len(skipped) > 3 else "")
                warnings.append(f"{path}: {len(skipped)} subfolder{'s' if len(skipped) > 1 else ''} not opened ({shown})")
            files += [(p, False) for p in inside]
        elif path.exists():
            files.append((path, True))
        else:
            raise UsageError(f"{path}: no such file or folder")
    if len(files) > MAX_FILES:
        raise UsageError(f"{len(files):,} files, more than the {MAX_FILES:,} one import opens")
    return files


def _recognise(path: Path, data: bytes) -> _Found | str:
    """The file's kind and content, or why it is none of the expected kinds."""
    kind = sniff(data)
    if kind == "pickle":
        content = load_plain_pickle(data, path)
        return _Found(path, "flight-recorder", columns=read_content(content)) if is_dump(content) else "a pickle that is not a Flight Recorder dump"
    if kind == "json":
        try:
            content = load_json(data, path)
        except UsageError:
            text = data.decode("utf-8", "replace")
            if is_inspector_log(text):  # one JSON record a line: not one JSON document
                return _Found(path, "nccl-inspector", text=text)
            if is_nccl_log(text):  # a launcher's prefix ([1,0]<stdout>:, [default0]:) begins with '['
                return _Found(path, "nccl-log", text=text)
            raise
        if is_dump(content):
            return _Found(path, "flight-recorder", columns=read_content(content))
        if is_profiler_trace(content):
            return _Found(path, "profiler", document=content)
        if is_inspector_record(content):  # a file of one record
            return _Found(path, "nccl-inspector", text=data.decode("utf-8", "replace"))
        if isinstance(content, dict) and "traceEvents" in content:
            return "a Chrome trace without torch.profiler's distributedInfo (not a distributed torch.profiler trace)"
        return "JSON that is neither a Flight Recorder dump, a torch.profiler trace nor NCCL Inspector output"
    if kind == "text":
        text = data.decode("utf-8", "replace")
        return _Found(path, "nccl-log", text=text) if is_nccl_log(text) else "text without NCCL INFO lines"
    if b"\x00" in data and sniff(data.replace(b"\x00", b"")) == "text":  # a crash leaves NUL bytes in a log
        text = data.decode("utf-8", "replace")
        if is_nccl_log(text.replace("\x00", "")):
            return _Found(path, "nccl-log", text=text)
    return "neither JSON, a pickle nor text"


def _large_log(path: Path) -> _Found | None:
    """A large file as an NCCL log to stream, if its first MiB is one."""
    head = read_head(path)
    head = head.replace(b"\x00", b"")  # a crash leaves NUL bytes where it was writing
    if sniff(head) in ("text", "json") and is_nccl_log(head.decode("utf-8", "replace")):
        return _Found(path, "nccl-log", streamed=True)
    return None


def _refuse_or_skip(path: Path, named: bool, why: str, warnings: list[str], refused: list[str]) -> None:
    if named:
        raise UsageError(f"{path}: {why}; expected {EXPECTED}")
    warnings.append(f"skipped {path.name}: {why}")
    refused.append(f"{path.name}: {why}")


def _nothing_to_open(paths: Sequence[Path], refused: list[str]) -> UsageError:
    """The error for artifacts of which no file opened, naming each file's reason (the first few)."""
    where = ", ".join(str(p) for p in paths)
    shown = "; ".join(refused[:_REASONS_SHOWN]) + (f"; and {len(refused) - _REASONS_SHOWN} more" if len(refused) > _REASONS_SHOWN else "")
    return UsageError(f"{where}: nothing to open{f' ({shown})' if refused else ''}; expected {EXPECTED}")


def open_artifacts(paths: Sequence[Path], progress: Progress = no_progress) -> ImportedRun:
    """Open ``paths`` (files, or folders of them) as one imported run: events as collviz's own runs
    emit them, warnings about what could not be read, matched or shown, and the exit status (1
    for a hung or mismatched job, 0 otherwise); ``progress`` is told each file read, then the
    import's own stages. Raises :class:`~..errors.UsageError` (one line) for anything that cannot
    be opened."""
    warnings: list[str] = []
    refused: list[str] = []
    found: list[_Found] = []
    total = 0
    files = _files([Path(p) for p in paths], warnings)
    for done, (path, named) in enumerate(files):
        progress("reading files", done, len(files))
        try:
            recognised: _Found | str | None = _large_log(path) if _size(path) > STREAMED_LOG_BYTES else None
            if recognised is None:
                data = read_artifact(path)  # refuses a file too large to read whole
                if total + len(data) > MAX_TOTAL_BYTES:
                    raise UsageError(f"the artifacts hold more than {MAX_TOTAL_BYTES:,} bytes, the most one import reads")
                with collector_paused():  # a dump's document is gone, read into columns, before it resumes
                    recognised = _recognise(path, data)
                total += recognised.held(len(data)) if isinstance(recognised, _Found) else 0
        except UsageError as exc:
            if named or str(exc).startswith("the artifacts hold"):
                raise
            warnings.append(f"skipped {exc}")
            refused.append(str(exc))
            continue
        if isinstance(recognised, str):
            _refuse_or_skip(path, named, recognised, warnings, refused)
        else:
            found.append(recognised)
    progress("reading files", len(files), len(files))
    kinds = sorted({f.kind for f in found})
    if not found:
        raise _nothing_to_open(paths, refused)
    if len(kinds) > 1:
        raise UsageError("the artifacts mix " + " and ".join(
            f"{_KIND_NAMES[k]} ({', '.join(f.path.name for f in found if f.kind == k)[:60]})" for k in kinds)
            + ": open one kind at a time")
    kind = kinds[0]
    if kind == "flight-recorder":
        return import_read(_dumps(found, warnings), warnings, progress)
    if kind == "profiler":
        return import_traces([ProfilerTrace(f.path, f.document) for f in found], warnings, progress)
    if kind == "nccl-inspector":
        return import_inspector([(f.path, f.text) for f in found], warnings, progress)
    return import_nccl_log([(f.path, f.lines()) for f in found], warnings, progress)


def _size(path: Path) -> int:
    """``path``'s size as its directory entry says (0 if it cannot be read: reading it says why)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _dumps(found: Sequence[_Found], warnings: list[str]) -> list[RankDump]:
    """One dump per rank, its rank from the file's name; a second dump of a rank is left out."""
    dumps: dict[int, RankDump] = {}
    for item in found:
        rank = rank_from_name(item.path)
        if rank is None:
            raise UsageError(f"{item.path}: cannot tell which rank wrote this dump (a dump does not say): "
                             "end its name with the rank, as torch does (nccl_trace_rank_3)")
        if rank in dumps:
            warnings.append(f"rank {rank} has two dumps ({dumps[rank].path.name}, {item.path.name}): "
                            f"{item.path.name} left out")
            continue
        dumps[rank] = RankDump(rank, item.path, cast(DumpColumns, item.columns))  # set for every dump found
    return [dumps[r] for r in sorted(dumps)]
