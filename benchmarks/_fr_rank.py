"""A gloo rank of one whose Flight Recorder holds ENTRIES real all_reduce calls, for the attach
benchmarks: with SOCKET it opens torch's worker server there (``worker_main``'s), prints ``ready``
and idles until its stdin closes; with ``--dump PATH`` it writes its ``fr_trace_json`` there and
exits.

    python benchmarks/_fr_rank.py ENTRIES (SOCKET | --dump PATH)
"""

from __future__ import annotations

import os
import socket
import sys


def main() -> None:
    """Fill the recorder, then serve it or dump it."""
    entries = int(sys.argv[1])
    os.environ["TORCH_FR_BUFFER_SIZE"] = str(entries)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(probe.getsockname()[1]))
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import _dump_fr_trace_json, _WorkerServer

    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        for _ in range(entries):
            dist.all_reduce(torch.ones(4))
        if sys.argv[2] == "--dump":
            with open(sys.argv[3], "wb") as out:
                out.write(_dump_fr_trace_json(True, True))
        else:
            server = _WorkerServer(sys.argv[2])
            print("ready", flush=True)
            sys.stdin.read()  # idle (no CPU of its own) until the benchmark closes stdin
            server.shutdown()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
