"""A user's own training script as a collviz run: ``collviz run --nproc N train.py [args…]``.

- :mod:`.script` — the script to run and its arguments, checked before any process starts.
- :mod:`.observer` — the light observer: every collective the process issues, seen at the
  dispatcher without waits, extra collectives or copies, timed as it completes; it receives what
  the script marks with ``collviz.step`` and ``collviz.watch`` (:mod:`collviz.marks`).
- :mod:`.program` — one rank of the script: torchrun's environment, the observer, ``runpy``.

May import: the rank context, observation, the wire, errors and :mod:`collviz.marks`; never a
session (it runs inside a worker) and never the scenarios.
"""

__all__: list[str] = []
