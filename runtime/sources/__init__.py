"""Sources: a user's own artifacts become the events collviz's own runs emit.

:mod:`.detect` (:func:`open_artifacts`, the one entry point: files or a folder, sorted by what they
hold), :mod:`.flight_recorder` (per-rank Flight Recorder dumps, JSON or pickle: calls, states, and
which ranks hang or disagree) over :mod:`.fr_columns` (a dump's calls as arrays), :mod:`.fr_table`
(a job's dumps as one :mod:`.call_table`) and :mod:`.fr_large` (an import too large for events,
summarised by :mod:`.table_summary`), :mod:`.profiler` (per-rank torch.profiler Chrome traces: calls with
sizes, groups and their own times) with :mod:`.trace_work` (the kernel or work slice that timed
each call), :mod:`.nccl_log` (an ``NCCL_DEBUG=INFO`` log: its ranks and
devices, per-call algorithm and protocol, the rings and trees NCCL built) over :mod:`.nccl_lines`
(its lines, from any NCCL version and launcher), :mod:`.nccl_inspector` (NCCL Inspector output)
with :mod:`.growing` (a folder's new whole lines, for the live Inspector reader), :mod:`.run` (the events every source builds) with
:mod:`.call_checks` (the live run's own hang and mismatch checks over a table of the calls), :mod:`.reading` (bounded reads, a pickle
loader that builds plain values only), :mod:`.names` (element types and op names),
:mod:`.plausible` (the values an artifact can hold: others are damaged input).

May import :mod:`collviz.runtime.observation`, :mod:`collviz.runtime.reports`, the wire and the
errors; never torch, zmq, textual or a process (import-linter contracts), so a dump from a
cluster opens on a laptop without torch doing anything.
"""

from .detect import open_artifacts
from .run import ImportedRun

__all__ = ["open_artifacts", "ImportedRun"]
