"""Run a script (``python _empty_dispatch_mode.py SCRIPT ARGS…``) inside a pass-through
``TorchDispatchMode``: every tensor op goes through Python and straight on, nothing recorded.
What any dispatch-mode observer costs at the least (benchmarks/userjob_overhead.py)."""

from __future__ import annotations

import runpy
import sys

from torch.utils._python_dispatch import TorchDispatchMode


class PassThrough(TorchDispatchMode):
    """Hands every op on unchanged."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


if __name__ == "__main__":
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    with PassThrough():
        runpy.run_path(script, run_name="__main__")
