"""Synthetic worker servers for ``attach_scale.py``: for each ``rank<r>.json`` in FOLDER, a Unix
socket ``FOLDER/sockets/rank<r>.sock`` answering HTTP POSTs as torch's worker server does:
``/handler/fr_trace_json`` with that file's bytes, ``/handler/dump_traceback`` with a short stack,
404 for any other handler. All in one asyncio loop; prints ``ready``, serves until stdin closes.

    python benchmarks/_fr_servers.py FOLDER
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

STACK = b'Thread 0x1 (most recent call first):\n  File "/home/me/train.py", line 16 in step\n' \
        b'  File "/home/me/train.py", line 30 in <module>\n'


def _response(status: str, body: bytes, kind: str) -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode() + body


async def serve_ranks(sockets: Path, fr_traces: dict[str, Callable[[], bytes]],
                      each_line: Callable[[], None] = lambda: None) -> None:
    """Serve ``sockets/<name>.sock`` for each name of ``fr_traces`` as torch's worker server does,
    each ``fr_trace_json`` answer made by its callable at the time it is asked; print ``ready``,
    serve until stdin closes (one asyncio loop for every rank), calling ``each_line`` for each line
    read from it."""
    sockets.mkdir(exist_ok=True)
    servers = []
    for name, fr_trace in fr_traces.items():

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         fr_trace: Callable[[], bytes] = fr_trace) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].split(b"?")[0]
            if path == b"/handler/fr_trace_json":
                writer.write(_response("200 OK", fr_trace(), "application/json"))
            elif path == b"/handler/dump_traceback":
                writer.write(_response("200 OK", STACK, "text/plain"))
            else:
                writer.write(_response("404 Not Found", b"Handler not found", "text/plain"))
            try:
                await writer.drain()
            except (ConnectionError, asyncio.CancelledError):  # a reader gone, or the servers closing: nothing to say
                pass
            writer.close()

        servers.append(await asyncio.start_unix_server(answer, path=str(sockets / f"{name}.sock"), backlog=256))
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, lambda: [each_line() for _ in sys.stdin])
    for server in servers:
        server.close()


if __name__ == "__main__":
    FOLDER = Path(sys.argv[1])
    asyncio.run(serve_ranks(FOLDER / "sockets", {dump.stem: lambda body=dump.read_bytes(): body
                                                 for dump in sorted(FOLDER.glob("rank*.json"))}))
