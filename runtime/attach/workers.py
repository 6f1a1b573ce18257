"""torch's worker servers, found and asked. ``torch.distributed.elastic.control_plane.worker_main``
opens one per rank on the Unix socket ``TORCH_WORKER_SERVER_SOCKET`` names;
``torch.distributed.debug.start_debug_server()`` opens one per rank on a TCP port and puts its
``http://HOST:PORT`` in the job's store (:mod:`.store`). Each answers HTTP POSTs to
``/handler/NAME`` (``fr_trace_json``: the rank's Flight Recorder of CPU backends (gloo) as JSON;
``dump_nccl_trace_json``: NCCL's, registered only where torch was built with NCCL;
``dump_traceback``: every thread's Python stack; ``ping``).

A socket's rank is the number its file name ends with (``rank3.sock``), as for Flight Recorder
dumps: the server's answers do not say it. Every request is bounded (a timeout per rank, a byte
limit per answer) and all ranks are asked at once; a rank that does not answer in time is named
in its :class:`Answer`, never waited for longer.
"""

from __future__ import annotations

import glob
import http.client
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


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (the worker server's), with one timeout for connecting and each read."""

    def __init__(self, path: str, timeout_s: float) -> None:
        super().__init__("localhost", timeout=timeout_s)
        self.socket_path = path

    def connect(self) -> None:
        """Connect to the socket file instead of a host."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def _connection(address: str, timeout_s: float) -> http.client.HTTPConnection:
    if address.startswith("http://"):
        return http.client.HTTPConnection(address.removeprefix("http://").rstrip("/"), timeout=timeout_s)
    return _UnixConnection(address, timeout_s)


def _ask(worker: Worker, handler: str, timeout_s: float, limit: int) -> Answer:
    start = time.monotonic()
    connection = _connection(worker.address, timeout_s)
    try:
        connection.request("POST", f"/handler/{handler}", body=b"")
        response = connection.getresponse()
        body = response.read(limit + 1)
        took = time.monotonic() - start
        if response.status != 200:
            first = body[:200].decode(errors="replace").strip().splitlines()
            return Answer(worker.rank, None, f"{handler} answered {response.status}"
                          + (f": {first[0]}" if first else ""), took, response.status)
        if len(body) > limit:
            return Answer(worker.rank, None, f"{handler}'s answer is over {limit:,} bytes: not read", took,
                          response.status)
        return Answer(worker.rank, body, "", took, response.status)
    except TimeoutError:
        return Answer(worker.rank, None, f"no answer within {timeout_s:g} s", time.monotonic() - start)
    except (OSError, http.client.HTTPException) as exc:
        return Answer(worker.rank, None, f"{type(exc).__name__}: {exc}".rstrip(": "), time.monotonic() - start)
    finally:
        connection.close()


def ask_all(workers: Sequence[Worker], handler: str, timeout_s: float,
            limit: int = MAX_ANSWER_BYTES) -> dict[int, Answer]:
    """rank → its server's answer to ``handler``, every rank asked at once, each within ``timeout_s``."""
    if not workers:
        return {}
    with ThreadPoolExecutor(max_workers=min(_MAX_PARALLEL, len(workers))) as pool:
        answers = pool.map(lambda worker: _ask(worker, handler, timeout_s, limit), workers)
        return {answer.rank: answer for answer in answers}
