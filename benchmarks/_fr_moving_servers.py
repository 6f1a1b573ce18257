"""Synthetic worker servers of a job that moves, for ``relay_scale.py``: RANKS Unix sockets
``FOLDER/sockets/rank<r>.sock`` answering as torch's worker server does (``_fr_servers.py``'s
answers), each ``fr_trace_json`` answer the rank's recorder one step later: a window of WINDOW
calls that moves on by STEP calls at each of the rank's answers. The calls are ``FOLDER/real.json``'s
entries (a real gloo rank's, ``_fr_rank.py``), renumbered to run on past its end; rank BEHIND has
not issued the newest call of its window, which every other rank is inside (not yet retired). All
in one asyncio loop; prints ``ready``, serves until stdin closes.

    python benchmarks/_fr_moving_servers.py FOLDER RANKS WINDOW STEP BEHIND
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from _fr_servers import STACK, _response


class _Job:
    """Every call's entry as JSON bytes (retired, and the not-retired form of each), numbered on."""

    def __init__(self, real: dict, ranks: int, window: int, step: int, behind: int) -> None:
        real["pg_config"] = {"": {"name": "", "desc": "", "ranks": json.dumps(list(range(ranks)))}}
        self.head = json.dumps({k: v for k, v in real.items() if k != "entries"})[:-1].encode() + b', "entries": ['
        self.window, self.step, self.behind = window, step, behind
        self.template = real["entries"]
        self.retired: list[bytes] = []
        self.inside: list[bytes] = []

    def _entry(self, index: int) -> None:
        """Make the call ``index`` (from 0): the real entry at that place in the recording, renumbered."""
        real = self.template[index % len(self.template)]
        entry = {**real, "collective_seq_id": index + 1, "op_id": index + 1, "record_id": index,
                 "time_created_ns": real["time_created_ns"] + index * 1000}
        self.retired.append(json.dumps({**entry, "retired": True}).encode())
        self.inside.append(json.dumps({**entry, "retired": False}).encode())

    def answer(self, rank: int, reading: int) -> bytes:
        """The rank's recorder at its ``reading``-th answer."""
        end = self.window + reading * self.step
        while len(self.retired) < end:
            self._entry(len(self.retired))
        start = end - self.window
        if rank == self.behind:
            entries = self.retired[start:end - 1]
        else:
            entries = [*self.retired[start:end - 1], self.inside[end - 1]]
        return self.head + b", ".join(entries) + b"]}"


async def _serve(folder: Path, ranks: int, window: int, step: int, behind: int) -> None:
    sockets = folder / "sockets"
    sockets.mkdir(exist_ok=True)
    job = _Job(json.loads((folder / "real.json").read_bytes()), ranks, window, step, behind)
    readings = [0] * ranks
    servers = []
    for rank in range(ranks):

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, rank: int = rank) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].split(b"?")[0]
            if path == b"/handler/fr_trace_json":
                writer.write(_response("200 OK", job.answer(rank, readings[rank]), "application/json"))
                readings[rank] += 1
            elif path == b"/handler/dump_traceback":
                writer.write(_response("200 OK", STACK, "text/plain"))
            else:
                writer.write(_response("404 Not Found", b"Handler not found", "text/plain"))
            try:
                await writer.drain()
            except ConnectionError:  # a relay stopped (Ctrl-C) or gave up on this answer: nothing to say
                pass
            writer.close()

        servers.append(await asyncio.start_unix_server(answer, path=str(sockets / f"rank{rank}.sock"), backlog=256))
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for server in servers:
        server.close()


if __name__ == "__main__":
    asyncio.run(_serve(Path(sys.argv[1]), *map(int, sys.argv[2:6])))
