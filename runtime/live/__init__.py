"""Reading a running job, live: one :class:`~.reading.Reader` protocol, one feed, one loop.

A reading is one look at a running job's ranks; a reader makes readings of one kind of job; the
feed turns successive readings into events; the loop paces the readings. Every live view steps
the same three: ``collviz attach`` (viewer, ``--headless``, ``--watch``), ``collviz run``'s
Flight Recorder mode and ``collviz replay --follow``. A new source is one more reader.

- :mod:`.reading` — the :class:`~.reading.Reader` protocol, a :class:`~.reading.Reading` (each
  rank's calls, or why it was not read) and the waits it shows, keyed by ``(group, seq)``.
- :mod:`.recorder_reader` — ranks' Flight Recorders through torch's worker servers (a job
  attached, or a run's own ranks), decoded to calls; stacks of the ranks others wait on.
- :mod:`.inspector_reader` — a folder of NCCL Inspector files as they grow.
- :mod:`.workers` — where worker servers are (sockets, or a job's store: :mod:`.store`) and one
  HTTP POST to each, in parallel, each within a deadline and a byte cap (a slow server is named).
- :mod:`.tail` — the part of each rank's answer a reading decodes, bounded in depth and size.
- :mod:`.stacks` — where a rank's Python is (a ``dump_traceback`` text, or py-spy's threads): the
  user's own frame, and the collective call it is inside.
- :mod:`.pid_reader` — a job that prepared nothing, by pid (``attach --pid``): every rank's stack
  read with py-spy (:mod:`.py_spy`) at each reading, its ranks found in ``/proc`` (:mod:`.pids`);
  :mod:`.unprepared` names the dumps torch wrote on a timeout, or what would show more next time.
- :mod:`.feed` — each reading's news as collviz events: new calls per rank, confirmed waits (their
  waiting time counting up) with the missing ranks' stack lines, ranks that stop answering.
- :mod:`.pace` and :mod:`.loop` — the readings' pace, and the one loop that steps reader and feed.
- :mod:`.snapshot` — one look in words, like ``py-spy dump`` (``attach --headless``, ``--watch``).

May import: the sources (the Flight Recorder and Inspector readers), observation, the wire and
errors; never torch but through the store lookup (reading costs the job nothing but the reads),
never the sessions (which step these); no process but py-spy's (:mod:`.py_spy`), which only reads.
"""

__all__: list[str] = []
