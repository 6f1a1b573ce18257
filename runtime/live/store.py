"""The worker servers ``torch.distributed.debug.start_debug_server()`` opened: every rank puts
``http://HOST:PORT`` under ``debug_server/rank<r>`` in the job's store (torchrun's TCPStore at
``MASTER_ADDR:MASTER_PORT``), so ranks on every host of a job are found in one place.

The store is read with torch's own client (its protocol is torch's), with ``check`` and ``get``
only: nothing is written, no counter is joined. This is the one module of :mod:`..attach` that
imports torch, and only when a store is named.
"""

from __future__ import annotations

import datetime
import os

from ..errors import UsageError

__all__ = ["STORE_PREFIX", "debug_server_workers"]

STORE_PREFIX = "debug_server"
"""The prefix ``start_debug_server`` puts its keys under (``torch.distributed.debug._store``)."""

_MAX_RANKS = 1 << 16


def debug_server_workers(host: str, port: int, timeout_s: float) -> list[tuple[int, str]]:
    """(rank, ``http://HOST:PORT``) of every rank's worker server in the store at ``host:port``,
    rank 0 up to the first rank without one; a one-line UsageError when the store cannot be
    reached within ``timeout_s`` or holds no debug server's address."""
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")  # read as torch loads: its client's retries stay quiet
    import torch.distributed as dist

    try:
        store = dist.TCPStore(host, port, is_master=False, timeout=datetime.timedelta(seconds=timeout_s),
                              wait_for_workers=False)
    except (RuntimeError, ValueError) as exc:  # DistNetworkError and DistStoreError are RuntimeErrors
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"{host}:{port}: no job's store answered within {timeout_s:g} s ({reason})") from None
    keys = dist.PrefixStore(STORE_PREFIX, store)
    found = []
    for rank in range(_MAX_RANKS):
        key = f"rank{rank}"
        if not keys.check([key]):
            break
        found.append((rank, keys.get(key).decode(errors="replace")))
    if not found:
        raise UsageError(f"{host}:{port}: the job's store holds no worker-server address (the job calls "
                         "torch.distributed.debug.start_debug_server() on every rank)")
    return found
