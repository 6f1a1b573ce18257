"""torch's worker servers, found and asked. ``torch.distributed.elastic.control_plane.worker_main``
opens one per rank on the Unix socket ``TORCH_WORKER_SERVER_SOCKET`` names;
``torch.distributed.debug.start_debug_server()`` opens one per rank on a TCP port and puts its
``http://HOST:PORT`` in the job's store (:mod:`.store`). Each answers HTTP POSTs to
``/handler/NAME`` (``fr_trace_json``: the rank's Flight Recorder of CPU backends (gloo) as JSON;
``dump_nccl_trace_json``: NCCL's, registered only where torch was built with NCCL;
``dump_traceback``: every thread's Python stack; ``ping``).

A socket's rank is the number its file name ends with (``rank3.sock``), as for Flight Recorder
dumps: the server's answers do not say it. Every request is bounded (one deadline for connecting, asking and reading the whole
answer, however slowly the server sends it; a byte limit per answer) and all ranks are asked at
once; a rank that does not answer whole in time is named ``slow`` in its :class:`Answer`, never
waited for longer.
"""

from __future__ import annotations

import glob
import re
import socket
import stat
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..sources.flight_recorder import rank_from_name

__all__ = ["MAX_ANSWER_BYTES", "Answer", "Worker", "ask_all", "find_sockets", "find_workers"]

MAX_ANSWER_BYTES = 16 << 20
"""The largest answer read from one rank (a full 20,000-entry Flight Recorder is about 10 MB)."""

_MAX_PARALLEL = 64

_MAX_HEAD = 64 << 10
"""The most bytes of status line and headers read before a body."""

_STATUS = re.compile(rb"^HTTP/1\.[01] (\d{3})")


_STORE_ADDRESS = re.compile(r"^(?P<host>[^/:]+|\[[0-9A-Fa-f:]+\]):(?P<port>\d{1,5})$")


@dataclass(frozen=True)
class Worker:
    """One rank's worker server: its rank and where it listens (a Unix socket's path, or
    ``http://HOST:PORT``)."""

    rank: int
    address: str

    @property
    def path(self) -> Path:
        """The address as a path (a dump's file, in the Flight Recorder reader's messages)."""
        return Path(self.address)


@dataclass(frozen=True)
class Answer:
    """What one rank's server said to one handler: its body, or why there is none (``status``:
    the HTTP status, None when the server did not answer)."""

    rank: int
    body: bytes | None
    error: str = ""
    took_s: float = 0.0
    status: int | None = None
    slow: bool = False
    """Whether the server did not answer whole within the request's deadline (it is not waited for)."""
    ended: bool = False
    """Whether the rank has ended and left nothing to read: it is never read later (a run's rank
    that exited without a Flight Recorder dump)."""


def _is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(path.stat().st_mode)
    except OSError:
        return False


def find_workers(target: str, timeout_s: float) -> list[Worker]:
    """The worker servers ``target`` names: a debug server's store address ``HOST:PORT`` (the
    job's ``MASTER_ADDR:MASTER_PORT``; read within ``timeout_s``) unless a file of that name
    exists, else sockets (:func:`find_sockets`)."""
    address = _STORE_ADDRESS.match(target)
    if address is not None and not Path(target).exists():
        from .store import debug_server_workers

        return [Worker(rank, url) for rank, url in debug_server_workers(address["host"].strip("[]"),
                                                                         int(address["port"]), timeout_s)]
    return find_sockets(target)


def find_sockets(target: str) -> list[Worker]:
    """The worker-server sockets ``target`` names: a socket, a folder (the sockets in it) or a glob
    pattern; each rank once, from the number ending its name. A one-line UsageError when there is
    none, a name carries no rank, or two name the same one."""
    given = Path(target)
    if any(char in target for char in "*?["):
        candidates = [Path(match) for match in sorted(glob.glob(target))]
    elif given.is_dir():
        candidates = sorted(given.iterdir())
    elif given.exists():
        candidates = [given]
    else:
        raise UsageError(f"{target}: no such socket, folder or pattern")
    sockets = [path for path in candidates if _is_socket(path)]
    if not sockets:
        raise UsageError(f"{target}: no Unix socket there (the job's worker servers: TORCH_WORKER_SERVER_SOCKET "
                         "under torch.distributed.elastic.control_plane.worker_main)")
    found: dict[int, Path] = {}
    for path in sockets:
        rank = rank_from_name(path)
        if rank is None:
            raise UsageError(f"{path}: its name does not end with its rank (name each rank's socket after it: "
                             "TORCH_WORKER_SERVER_SOCKET=/tmp/job/rank$RANK.sock)")
        if rank in found:
            raise UsageError(f"{found[rank]} and {path} both name rank {rank}")
        found[rank] = path
    return [Worker(rank, str(found[rank])) for rank in sorted(found)]


def _open(address: str, timeout_s: float) -> socket.socket:
    """A connected socket to a Unix socket's path or ``http://HOST:PORT``, within ``timeout_s``."""
    if address.startswith("http://"):
        host, _, port = address.removeprefix("http://").rstrip("/").rpartition(":")
        return socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect(address)
    except BaseException:
        sock.close()
        raise
    return sock


def _exchange(address: str, handler: str, deadline: float, limit: int) -> tuple[int, bytes]:
    """POST to ``handler`` and read the whole answer (HTTP/1.0: the server closes when done) by
    ``deadline`` (monotonic) and within ``limit`` bytes of body: its status and body. Raises
    TimeoutError past the deadline (a server sending a byte a second included), ValueError for an
    answer that is no HTTP or over the limit."""
    with _open(address, max(0.001, deadline - time.monotonic())) as sock:
        sock.sendall(f"POST /handler/{handler} HTTP/1.0\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n".encode())
        received = bytearray()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            sock.settimeout(left)
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            received += chunk
            if len(received) > limit + _MAX_HEAD:
                raise ValueError(f"its answer is over {limit:,} bytes: not read")
    head, separator, body = bytes(received).partition(b"\r\n\r\n")
    status = _STATUS.match(head)
    if not separator or status is None:
        raise ValueError("its answer is not HTTP")
    if len(body) > limit:
        raise ValueError(f"its answer is over {limit:,} bytes: not read")
    return int(status[1]), body


def _ask(worker: Worker, handler: str, timeout_s: float, limit: int) -> Answer:
    start = time.monotonic()
    try:
        status, body = _exchange(worker.address, handler, start + timeout_s, limit)
    except TimeoutError:
        return Answer(worker.rank, None, f"slow: no whole answer within {timeout_s:g} s", time.monotonic() - start,
                      slow=True)
    except ValueError as exc:
        return Answer(worker.rank, None, f"{handler}: {exc}", time.monotonic() - start)
    except (ConnectionRefusedError, FileNotFoundError):
        return Answer(worker.rank, None, "no worker server there (its rank ended, or has not started)",
                      time.monotonic() - start)
    except OSError as exc:
        return Answer(worker.rank, None, f"{type(exc).__name__}: {exc}".rstrip(": "), time.monotonic() - start)
    took = time.monotonic() - start
    if status != 200:
        first = body[:200].decode(errors="replace").strip().splitlines()
        return Answer(worker.rank, None, f"{handler} answered {status}" + (f": {first[0]}" if first else ""), took,
                      status)
    return Answer(worker.rank, body, "", took, status)


def ask_all(workers: Sequence[Worker], handler: str, timeout_s: float,
            limit: int = MAX_ANSWER_BYTES) -> dict[int, Answer]:
    """rank → its server's answer to ``handler``, every rank asked at once, each within ``timeout_s``."""
    if not workers:
        return {}
    pool = ThreadPoolExecutor(max_workers=min(_MAX_PARALLEL, len(workers)))
    try:
        answers = pool.map(lambda worker: _ask(worker, handler, timeout_s, limit), workers)
        return {answer.rank: answer for answer in answers}
    finally:  # an interrupt (Ctrl-C, SIGTERM) leaves at once: no request is waited for past it
        pool.shutdown(wait=False, cancel_futures=True)
