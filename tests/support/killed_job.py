"""A user's own 4-rank gloo script in which one rank dies without a word: every rank makes
all_reduce #1, then rank 3 kills itself (SIGKILL: no dump, no RankEnd) and ranks 0–2, inside
all_reduce #2, fail when its connections close (gloo: "Connection closed by peer"), status 1."""

from __future__ import annotations

import textwrap

__all__ = ["KILLED_RANK", "KILLED_SCRIPT"]

KILLED_RANK = 3

KILLED_SCRIPT = textwrap.dedent(f'''
    import datetime, os, signal
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    dist.all_reduce(torch.ones(4))
    if dist.get_rank() == {KILLED_RANK}:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.all_reduce(torch.ones(8))
''')
