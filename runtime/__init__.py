"""Headless runtime: launches workers, runs scenarios on real process groups, streams events.

Grouped by role (import-linter contracts in ``pyproject.toml`` state what may import what, and the
test command checks them):

- :mod:`.wire` — the protocol, the ZeroMQ transport and the trace file; imports nothing else of
  collviz but :mod:`.errors`.
- :mod:`.observation` — what is measured on a rank or derived from events: storage tracker, NVML,
  tensor contents and provenance tags, nccl-tests metrics, the collective watchdog.
- :mod:`.scenario_files` — scenario and lesson files as data (loading, validation, notes); never
  torch, zmq nor a process.
- :mod:`.programs` — the programs every rank runs: collectives, algorithms, desync, bench,
  training; they never start processes.
- :mod:`.reports` — pure functions from events to text or JSON: summary, bench table, Perfetto
  export, compare table, analytic estimates; they never launch processes nor import torch.
- :mod:`.userjob` — a user's own script as a run (``collviz run --nproc N train.py``): the light
  observer of its collectives, the marks it may call (``collviz.step``), one rank running it.
- :mod:`.live` — a running job read live: one reader protocol (worker servers, a run's own ranks,
  an NCCL Inspector folder), one feed of events, one loop; bounded reads only, and one snapshot
  of who waits on whom and where (``collviz attach``, ``replay --follow``).
- :mod:`.sessions` — one run's events from its workers to its consumers: the session contract
  and the intake every session's events pass through, the local session that forks the workers
  (each rank's stdout/stderr: its log file and the terminal), the listening session fed by
  torchrun's workers, the live session over a reader, the headless drivers.
- Beside them: :mod:`.errors` (UsageError), :mod:`.context` (what a rank uses to emit),
  :mod:`.worker` (one rank), :mod:`.torchrun_rank` (one torchrun rank, streaming to a listening
  viewer), :mod:`.plan` (the one validated run plan), :mod:`.compare` (several sessions side by
  side, without a screen).

Never imports textual or :mod:`collviz.app`: this package runs on cluster nodes without a screen.
"""
