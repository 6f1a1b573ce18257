"""One rank of a user's script read from torch's own Flight Recorder: what ``collviz run`` does by
default, so the script pays only Flight Recorder's cost (issue 34).

While the script runs, the rank (:func:`recorded_rank`):

- keeps Flight Recorder on: ``TORCH_FR_BUFFER_SIZE`` is set to :data:`DEFAULT_ENTRIES` where the
  user left it unset (torch 2.8's gloo records nothing without it), before the script creates
  its process group; and where the user named no file for them (:data:`WATCHDOG_DUMP_ENVS`), the
  dumps torch's own watchdog writes when a call times out go to the run's folder
  (``nccl_trace_rank_<r>``, beside the rank's logs), not to torch's default ``/tmp/nccl_trace_rank_<r>``;
- serves its recorder and Python stacks on torch's worker server, and its groups' status alone
  (:data:`STATUS_HANDLER`, a handler of collviz's), on the Unix socket ``rank<r>.sock`` of the
  run's folder (``torch.distributed.elastic.control_plane.worker_main``,
  the way a job under torchrun opens it), for whoever attaches while it runs;
- writes its recorder to ``fr_rank<r>.json`` in that folder (``_dump_fr_trace_json``: torch's
  own JSON, what the Flight Recorder reader opens; with NCCL's recorder's calls joined, where
  torch has NCCL — :func:`recorder_json`; none while it has recorded no call): when the script ends, normally or by an
  exception (after the device has finished its queued work and the recorder has retired its
  calls, so the last calls read as completed, not scheduled), or when the launcher asks — it closes its end of a pipe every rank listens on, when a
  run fails or is interrupted, and a rank blocked in a collective its peer never joins still
  dumps from a thread of its own (the call's wait releases the interpreter lock). The file
  appears whole or not at all (written aside, then renamed). Reading NCCL's recorder queries
  CUDA events: the dump thread makes the rank's own GPU its device first (a thread with none set
  would create a context on GPU 0, about 0.5 GiB in every rank).

Nothing runs per call: the recorder is torch's, in C++. The thread waiting on the pipe sleeps in
``read`` until the run ends. The server is never shut down (its shutdown can deadlock with a
thread answering a Python handler): it ends with the rank's process. torch refuses to open a
server over an old socket file and leaves its own behind: the rank removes it, before and after
the script. torch's server logs its start on stderr: those lines go to ``rank<r>.sock.log`` beside the socket,
not among the script's own.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import msgspec
import torch
import torch._C._distributed_c10d as _c10d
from torch.distributed.elastic.control_plane import TORCH_WORKER_SERVER_SOCKET, worker_main

__all__ = ["DEFAULT_ENTRIES", "DEVICE_SETTLE_S", "WATCHDOG_DUMP_ENVS", "WATCHDOG_DUMP_PREFIX", "FR_BUFFER_ENV", "SETTLE_S",
           "SETTLE_POLL_S",
           "STATUS_HANDLER", "RecorderPlace", "dump_path", "merged_dump", "recorder_json", "socket_path", "recorded_rank"]

FR_BUFFER_ENV = "TORCH_FR_BUFFER_SIZE"

WATCHDOG_DUMP_ENVS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
"""The variables naming where torch's watchdog dumps a rank's recorder (a prefix: torch adds the
rank), the newer name first; torch reads the first one set (both in 2.13's ``libtorch``)."""

WATCHDOG_DUMP_PREFIX = "nccl_trace_rank_"
"""The name of the watchdog's dumps in the run's folder, before the rank (torch's own name)."""
"""How many calls torch's Flight Recorder keeps per rank (torch reads it as a process group is made)."""

DEVICE_SETTLE_S = 1.0
"""As the script ends, how long its device gets to finish the work queued on it before the dump."""

SETTLE_S = 0.2
"""As the script ends (its device's queued work finished), how long its last calls get to be
retired in its recorder before the dump (:func:`_settled_json`; a call that never completes, in a
failing run, costs the rank this long)."""

SETTLE_POLL_S = 0.005
"""While the last calls are not all retired, how long the rank sleeps before it dumps again."""

STATUS_HANDLER = "collviz_fr_status"
"""The worker-server handler collviz adds in the ranks it starts: every recorder's groups' status
alone (``pg_status``: each group's last call enqueued, started and completed), without a call —
microseconds, where the whole buffer costs the rank tens of milliseconds — so the launcher looks
often at whether a rank is stuck, and reads the calls rarely."""

DEFAULT_ENTRIES = 2000
"""Calls kept per rank where the user did not say: torch's own default since 2.11 (2.8 keeps none
without it); each call's entry is a few hundred bytes in C++."""


@dataclass(frozen=True)
class RecorderPlace:
    """Where a run's ranks keep their recorder: the run's ``folder`` (sockets and dumps), and the
    read end of the pipe whose end of file asks every rank for its dump (inherited by the fork)."""

    folder: str
    request_fd: int


def socket_path(folder: str | Path, rank: int) -> Path:
    """Rank ``rank``'s worker-server socket in ``folder`` (its name ends with the rank, as attach reads it)."""
    return Path(folder, f"rank{rank}.sock")


def dump_path(folder: str | Path, rank: int) -> Path:
    """Rank ``rank``'s Flight Recorder dump in ``folder`` (its name ends with the rank, as the reader needs)."""
    return Path(folder, f"fr_rank{rank}.json")


def _recorders() -> list[Callable[[bool, bool], bytes]]:
    """torch's Flight Recorder dumps in JSON: gloo's (CPU backends'), and NCCL's, a recorder of its
    own, where torch was built with NCCL (checked on 2.8 and 2.11: neither holds the other's calls)."""
    nccl = getattr(_c10d, "_dump_nccl_trace_json", None)
    return [_c10d._dump_fr_trace_json] + ([nccl] if nccl is not None else [])  # type: ignore[attr-defined]


def merged_dump(dumps: list[dict]) -> dict:
    """One dump of a rank holding the calls of each of its recorders' ``dumps`` (decoded JSON): the
    first that holds calls, its entries, groups and statuses joined by those of the others that do,
    the entries in the order the rank made them (``time_created_ns``). A group made with
    ``"cpu:gloo,cuda:nccl"`` has entries in both, each backend numbering its own calls: the reader
    tells them apart by the backend each entry's ``profiling_name`` names."""
    holding = [dump for dump in dumps if dump.get("entries")] or dumps[:1]
    merged = dict(holding[0])
    for other in holding[1:]:
        merged["entries"] = [*merged["entries"], *other["entries"]]
        for key in ("pg_config", "pg_status"):
            merged[key] = {**(other.get(key) or {}), **(merged.get(key) or {})}
    if len(holding) > 1:
        merged["entries"] = sorted(merged["entries"], key=_made_at)
    return merged


def _made_at(entry: object) -> int:
    """When a dump's entry was made (0 where it does not say)."""
    made = entry.get("time_created_ns") if isinstance(entry, dict) else None
    return made if isinstance(made, int) else 0


def recorder_json() -> bytes | None:
    """This rank's Flight Recorder as one JSON dump (every recorder's calls: :func:`merged_dump`),
    or None where it holds no call (torch then leaves out the dump's ``entries``)."""
    recorders = _recorders()
    if len(recorders) == 1:
        raw = recorders[0](True, False)
        return raw if b'"entries"' in raw else None
    merged = merged_dump([json.loads(dump(True, False)) for dump in recorders])
    return json.dumps(merged).encode() if merged.get("entries") else None


def _statuses() -> dict:
    """Every recorder's groups' status (``pg_status``), as one mapping."""
    found: dict = {}
    for dump in _recorders():
        found.update(json.loads(dump(False, False)).get("pg_status") or {})
    return found


def _serve_status(request: _c10d._Request, response: _c10d._Response) -> None:
    """:data:`STATUS_HANDLER`'s answer: ``{"pg_status": …}``."""
    response.set_content(json.dumps({"pg_status": _statuses()}).encode(), "application/json")
    response.set_status(200)


def _register_status_handler() -> None:
    """Add :data:`STATUS_HANDLER` to torch's worker server, once a process (torch refuses a second).

    torch keeps its handlers in a C++ global that is destroyed after the interpreter has ended;
    as it ends, the interpreter clears the names of every module still alive, so the registry's
    reference to :func:`_serve_status` can be the last, and the handler would then be freed with
    no interpreter left: "Fatal Python error: PyThreadState_Get … finalizing", status 134, at an
    otherwise normal exit. The registry is given one reference of its own that is never returned:
    it never frees the handler (one function, kept for the life of the process anyway)."""
    if STATUS_HANDLER in _c10d._get_handler_names():  # type: ignore[attr-defined]
        return
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(_serve_status))
    _c10d._register_handler(STATUS_HANDLER, _serve_status)


class _CallState(msgspec.Struct):
    """What says whether a dump's call is over: torch's ``retired`` and ``state``."""

    retired: bool = False
    state: str | None = None


class _Calls(msgspec.Struct):
    """A dump's calls, each read for its state alone."""

    entries: list[_CallState] = []


_CALLS = msgspec.json.Decoder(_Calls)


def _unfinished(content: bytes) -> int:
    """How many calls of a dump (torch's JSON) are neither retired nor completed (0 where a field
    is not of the usual type: the dump is written as it is, never lost)."""
    try:
        calls = _CALLS.decode(content).entries
    except msgspec.DecodeError:
        return 0
    return sum(not (call.retired or call.state == "completed") for call in calls)


def _settled_json(most_s: float) -> bytes | None:
    """:func:`recorder_json` once every call it holds is retired or completed, or as it is once
    ``most_s`` has passed. gloo's thread wakes a call's waiter, marks the call completed in its
    group's status, and only then retires its entry: a dump taken as the script ends, even once the
    status says every call completed, can hold the script's last call unfinished, which the launcher
    then reads as never left (on a loaded machine the thread waits its turn between the two)."""
    deadline = time.monotonic() + most_s
    while True:
        content = recorder_json()
        if content is None or not _unfinished(content) or time.monotonic() >= deadline:
            return content
        time.sleep(SETTLE_POLL_S)


def _watchdog_dumps_in(folder: str) -> None:
    """Have torch's watchdog dump to ``folder`` (see the module), unless the user named a file."""
    if not any(name in os.environ for name in WATCHDOG_DUMP_ENVS):
        os.environ.update(dict.fromkeys(WATCHDOG_DUMP_ENVS, str(Path(folder, WATCHDOG_DUMP_PREFIX))))


def _finish_device_work(most_s: float) -> None:
    """Wait (at most ``most_s``) until the script's CUDA device has run everything queued, where
    the script uses CUDA: NCCL's recorder marks a call completed only once its end event has
    happened on the device, and the script's last calls may still be queued as it ends. The wait
    is a thread's (``torch.cuda.synchronize`` of that device, which makes it the thread's own), so
    a call that never completes, in a failing run, costs the rank ``most_s``, not its dump."""
    if not torch.cuda.is_initialized():
        return
    device = torch.device("cuda", torch.cuda.current_device())
    waiter = threading.Thread(target=torch.cuda.synchronize, args=(device,), name="collviz-device-wait", daemon=True)
    waiter.start()
    waiter.join(most_s)


def _use_rank_device(device: torch.device) -> None:
    """Make ``device`` (the rank's) this thread's CUDA device, where the rank uses CUDA: NCCL's
    recorder queries CUDA events, and in a thread with no device set that creates a context on
    GPU 0. Nothing where CUDA is not in use (no context is created for a dump)."""
    if device.type == "cuda" and torch.cuda.is_initialized():
        torch.cuda.set_device(device)


class _Dumper:
    """Writes the rank's dump, one thread at a time: when the launcher asks, and again as the script
    ends (the later dump holds every call of the earlier one, and those since)."""

    def __init__(self, path: Path, device: torch.device) -> None:
        self.path = path
        self.device = device
        """The rank's device, which the thread dumping on request makes its own."""
        self._lock = threading.Lock()

    def dump(self, settle_s: float = 0.0) -> None:
        """Write the recorder to :attr:`path` (aside, then renamed over the earlier dump), once
        every call in it is retired (or ``settle_s`` has passed: :func:`_settled_json`); nothing
        where it holds no call."""
        with self._lock:
            content = _settled_json(settle_s)
            if content is None:
                return
            aside = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            aside.write_bytes(content)
            os.replace(aside, self.path)

    def on_request(self, fd: int) -> None:
        """Wait (asleep in ``read``) for the pipe's end of file, then dump (on the rank's device)."""
        try:
            while os.read(fd, 64):
                pass
        except OSError:
            return
        _use_rank_device(self.device)
        self.dump()


@contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """The process's stderr (file descriptor 2) appended to ``path`` for the duration: torch's
    worker server says it opens and closes there, lines that are not the script's."""
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


_OPEN_SERVERS: list[ExitStack] = []
"""The rank's worker server, held open until the process ends (see :func:`_worker_server`)."""


@contextmanager
def _worker_server(path: Path) -> Iterator[None]:
    """torch's worker server on the socket ``path`` from here until the process ends (its own
    messages to ``<path>.log``); the socket file removed before, and after the body. The variable
    naming it is set only while the server opens, so a script that wraps itself in
    ``worker_main`` does not open a second one on the same socket.

    The server is never shut down: its ``shutdown`` joins its threads while holding the
    interpreter lock (torch 2.8 to 2.13 bind it without releasing it), so a thread of it answering
    a Python handler (:data:`STATUS_HANDLER`, a script's own), waiting for that lock or for
    anything the main thread would do next, never ends, and the rank hangs at its exit (seen under
    load). The worker ends every rank with ``os._exit``, which ends the server's threads with it;
    the socket file is removed first, so no one connects to a rank that is ending."""
    path.unlink(missing_ok=True)
    log = path.with_name(f"{path.name}.log")
    server = ExitStack()
    _OPEN_SERVERS.append(server)  # never closed, and never collected: collecting it would shut it down
    os.environ[TORCH_WORKER_SERVER_SOCKET] = str(path)
    try:
        with _stderr_to(log):
            server.enter_context(worker_main())  # type: ignore[arg-type]  # torch's @record types it Optional
    finally:
        os.environ.pop(TORCH_WORKER_SERVER_SOCKET, None)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


@contextmanager
def recorded_rank(place: RecorderPlace, rank: int, device: torch.device) -> Iterator[None]:
    """Run the body (the script) as rank ``rank`` on ``device`` with its recorder on, served and
    dumped (see the module's text); the dump is written before the body's exception, if any, goes on."""
    os.environ.setdefault(FR_BUFFER_ENV, str(DEFAULT_ENTRIES))
    _watchdog_dumps_in(place.folder)
    _register_status_handler()
    dumper = _Dumper(dump_path(place.folder, rank), device)
    threading.Thread(target=dumper.on_request, args=(place.request_fd,), name="collviz-fr-dump",
                     daemon=True).start()
    with _worker_server(socket_path(place.folder, rank)):
        try:
            yield
        finally:
            _finish_device_work(DEVICE_SETTLE_S)
            dumper.dump(SETTLE_S)
