"""What the launcher imports once, before it forks its workers: torch, then frozen.

Workers are forked from the launcher after its one ``import torch`` (:mod:`.sessions.local`): whatever the
launcher has imported, no worker imports again. Importing this module makes that cheaper twice:

* torch imports some modules lazily, on their first use; each worker would import them after the
  fork, N times over on a machine with fewer cores than ranks. :data:`LAZY_TORCH_MODULES` are
  imported here instead.
* Importing torch leaves about 175,000 long-lived objects to the cyclic garbage collector, and the
  next full collection walks them all; the imports that follow torch's set one off (zmq's enums):
  166-301 ms of the launcher's start-up, measured on a busy 2-core machine.
  ``gc.freeze()`` right after the imports moves every object to the permanent generation, which
  collections skip (the gc module's advice for a process that forks without exec: collections in
  the children then never write to those objects' shared pages either).

:mod:`.plan`, the first runtime module every launching command imports, imports this module
before the rest (after only the torch version check, :mod:`.compat`).
"""

from __future__ import annotations

import gc
import importlib

import torch.distributed  # noqa: F401  (the import this module exists for)

__all__ = ["LAZY_TORCH_MODULES"]

LAZY_TORCH_MODULES = ("torch._subclasses.schema_check_mode",)
"""torch modules a worker would import on first use: ``schema_check_mode`` on the first
``_disable_current_modes()``, which the storage tracker's ``suspended()`` calls (about 1 ms a
worker, 60 ms of CPU at 64 ranks)."""

for _name in LAZY_TORCH_MODULES:
    try:
        importlib.import_module(_name)
    except ImportError:  # private modules: another torch version may have moved one; workers import what they need
        pass

gc.freeze()
