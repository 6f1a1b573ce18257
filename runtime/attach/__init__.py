"""Attaching to a user's running job: each rank's Flight Recorder and Python stacks, read from
torch's worker server, with bounded timeouts and nothing but reads (``collviz attach``).

- :mod:`.workers` — where the ranks' worker servers are (a folder, glob or path of Unix sockets)
  and one HTTP POST to a handler of each, in parallel, each bounded in time and size.
- :mod:`.stacks` — the user's own frame in a rank's ``dump_traceback`` text.
- :mod:`.tail` — the part of each rank's answer a reading decodes: the calls from the last one
  every rank completed onwards (the rest only skimmed).
- :mod:`.watch` — readings again and again at an adaptive pace (``--watch``; the
  :class:`~.watch.Watcher` the live session steps).
- :mod:`.feed` — each reading's news as collviz events: new calls per rank, confirmed waits with
  the missing ranks' stack lines, ranks that stop answering (the live viewer's session,
  :mod:`collviz.runtime.sessions.attached`).
- :mod:`.snapshot` — one reading of every rank, in words: the call each rank last completed and
  is in now, who waits on whom (the Flight Recorder reader's own analysis), and the stack line of
  each rank the others wait on.

May import: the sources (the Flight Recorder reader), observation, the wire and errors; never
torch (attaching costs the job and the machine nothing but the reads).
"""

__all__: list[str] = []
