"""Observation: what collviz measures on a rank and derives from events.

:mod:`.memory` (a storage tracker for exact live bytes by category, CUDA allocator figures),
:mod:`.nvml` (every NVML call through one function), :mod:`.tensors` (values, summaries and
provenance from tag collectives), :mod:`.metrics` (nccl-tests algbw/busbw formulas, byte units),
:mod:`.watchdog` (collectives matched across ranks to report hangs), :mod:`.group_names` (a
process group named as torch's Flight Recorder names it).

May import :mod:`collviz.runtime.wire` and :mod:`collviz.runtime.errors` only: no scenario, report
or session.
"""
