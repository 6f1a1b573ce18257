"""The GPU check's parts (``benchmarks/gpu_check.py`` is its command line), one job per module:

- :mod:`.wheels` — the pinned wheels a GPU image lacks: fetched here (``--download``), installed
  there from the folder, with no network and nothing over the image's torch;
- :mod:`.context` — what describes a check (its budget, the modules it needs) and what it is
  given (backend, ranks, a folder, its log, its deadline, the environment);
- :mod:`.running` — a deadline per check, and child processes run against it, their output in
  the check's log (a run past its deadline is stopped with its whole process group);
- :mod:`.report` — outcomes (nothing "passed" without NCCL on CUDA) and the markdown report,
  rewritten and flushed as each check starts and ends;
- :mod:`.machine` — what the run ran on (torch, CUDA, NCCL, GPUs, the carried packages), read in
  a child process, since ranks fork from this one;
- :mod:`.checks` and :mod:`.userjobs` — the checks, most telling first; :mod:`.perf` — the
  performance rows (``--perf``);
- :mod:`.programs` — the programs the checks start: :mod:`~.programs.canary_rank` (one canary
  rank) and :mod:`~.programs.user_job` (a user's own job under ``collviz run`` and torchrun).
"""
