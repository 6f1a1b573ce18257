"""Reports: pure functions from a run's events (or from numbers) to text and JSON.

:mod:`.summary` (the headless per-rank summary), :mod:`.bench_table` (the nccl-tests-style table),
:mod:`.export` (Chrome trace-event JSON for Perfetto), :mod:`.compare` (two runs' memory side by
side), :mod:`.estimate` (analytic memory estimates).

May import :mod:`collviz.runtime.wire`, :mod:`~collviz.runtime.observation.metrics` and
:mod:`~collviz.runtime.errors`. Never launches processes and never imports torch (import-linter
contracts), so ``collviz replay TRACE --headless`` and ``collviz export`` start quickly.
"""
